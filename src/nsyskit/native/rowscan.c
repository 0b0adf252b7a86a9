/* The rows of nccl-tests outputs in one C pass (native/rowscan.py loads it with ctypes for nccltests/lines.py; nccltests/lines.py's
 * ROW_START is the reference, and its pure-Python path gives the same records).
 *
 * nsk_nt_rows reads the lines of buf[from, n) and writes one record per line that starts, after the launchers'
 * prefixes and blanks, with a digit (ROW_START's matches):
 *   - a whole row (size count type [redop] [root], then two placements of time algbw busbw check, then only
 *     blanks to the end of the line): its line start and line number, size, count and root, its six numbers,
 *     flags (1: a redop column, 2: a root column) and the codes of its texts (type, redop, both checks) in a
 *     table of distinct texts kept across calls;
 *   - any other such line: its line start and number, flags 128 (the scanner reads it the slow way).
 * A line this code is unsure of (a number too long for 64 bits, a text longer than TEXT_MAX) is handed over as an
 * "other" line: the slow way reads it to the same row. Stops when `capacity` records are written or at the end;
 * returns the records written and sets *next to the offset to go on from (n at the end), -1 when the table of
 * texts is full (the caller then uses the regex).
 */
#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launchprefix.h"

#define TEXT_MAX 15
#define TEXTS_MAX 255
#define OTHER 128

typedef struct {
    int count;
    unsigned char length[TEXTS_MAX];
    char text[TEXTS_MAX][TEXT_MAX + 1];
} Texts;

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_alpha(unsigned char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
static int is_word(unsigned char c) { return is_alpha(c) || is_digit(c) || c == '_'; }
static int is_blank(unsigned char c) { return c == ' ' || c == '\t'; }

static const unsigned char *digits(const unsigned char *p, const unsigned char *end) {
    while (p < end && is_digit(*p)) p++;
    return p;
}

/* Whether the number at p goes on as no table number does ('N:', 'YYYY-'): NOT_A_ROW's '\d++(?:\.\d++)?(?![.:\-])'
 * fails, with its fraction and without. */
static int label_or_date(const unsigned char *p, const unsigned char *eol) {
    const unsigned char *q = digits(p, eol);
    if (q + 1 < eol && *q == '.' && is_digit(q[1])) q = digits(q + 1, eol);
    else if (q < eol && *q == '.') return 1;
    return q < eol && (*q == '.' || *q == ':' || *q == '-');
}

/* The end of the launchers' prefix at p: launchprefix.py's prefix() (possessive: one pass) with its NOT_A_ROW guard,
 * a number that ends there being the table's. */
static const unsigned char *prefix_end(const unsigned char *p, const unsigned char *eol) {
    const unsigned char *q;
    while (p < eol && (is_blank(*p) || *p == '|')) p++;
    while (p < eol) {
        if (is_digit(*p) && !label_or_date(p, eol)) return p;
        if ((q = launch_token(p, eol, 0)) == 0) return p;
        while (q < eol && (is_blank(*q) || *q == ':' || *q == '|')) q++;
        p = q;
    }
    return p;
}

/* The tokens of a line (blank-separated), up to 14; their count (14: too many for a row). */
static int tokens(const unsigned char *p, const unsigned char *eol, const unsigned char **start, int *length) {
    int n = 0;
    while (p < eol && (eol[-1] == '\r' || is_blank(eol[-1]))) eol--; /* WHOLE_ROW's [ \t\r]* before the end */
    while (p < eol) {
        while (p < eol && is_blank(*p)) p++;
        if (p >= eol) break;
        if (n == 14) return 14;
        start[n] = p;
        while (p < eol && !is_blank(*p)) p++;
        length[n] = (int)(p - start[n]);
        n++;
    }
    return n;
}

static int all_digits(const unsigned char *p, int n) {
    for (int i = 0; i < n; i++)
        if (!is_digit(p[i])) return 0;
    return n > 0;
}

static int is_name(const unsigned char *p, int n) { /* [A-Za-z]\w* */
    if (n < 1 || !is_alpha(p[0])) return 0;
    for (int i = 1; i < n; i++)
        if (!is_word(p[i])) return 0;
    return 1;
}

static int matches(const unsigned char *p, int n, const char *word) {
    return n == (int)strlen(word) && memcmp(p, word, (size_t)n) == 0;
}

/* \d+\.?\d* | \.\d+ then an optional exponent: the length matched from p (whole token expected), or -1. */
static int decimal(const unsigned char *p, int n, int dot_needs_digits) {
    int i = 0, whole = 0, fraction = 0;
    while (i < n && is_digit(p[i])) i++, whole++;
    if (i < n && p[i] == '.') {
        i++;
        while (i < n && is_digit(p[i])) i++, fraction++;
        if (!whole && !fraction) return -1;
        if (dot_needs_digits && !whole) return -1;
    } else if (!whole) {
        return -1;
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        int j = i + 1, exponent = 0;
        if (j < n && (p[j] == '+' || p[j] == '-')) j++;
        while (j < n && is_digit(p[j])) j++, exponent++;
        if (exponent) i = j;
    }
    return i;
}

static int is_num(const unsigned char *p, int n) { /* NUM: [-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)? | -?nan | -?inf */
    int sign = n > 0 && (p[0] == '-' || p[0] == '+');
    if (matches(p, n, "nan") || matches(p, n, "-nan") || matches(p, n, "inf") || matches(p, n, "-inf")) return 1;
    return decimal(p + sign, n - sign, 0) == n - sign;
}

static int is_check(const unsigned char *p, int n) { /* WRONG: N/A | \d+(\.\d*)?([eE][-+]?\d+)?\*? | -?nan\*? */
    if (matches(p, n, "N/A")) return 1;
    int star = n > 0 && p[n - 1] == '*';
    if (matches(p, n - star, "nan") || matches(p, n - star, "-nan")) return 1;
    return n - star > 0 && is_digit(p[0]) && decimal(p, n - star, 1) == n - star;
}

static int text_code(Texts *texts, const unsigned char *p, int n) {
    if (n > TEXT_MAX) return -2;
    for (int i = 0; i < texts->count; i++)
        if (texts->length[i] == n && memcmp(texts->text[i], p, (size_t)n) == 0) return i;
    if (texts->count == TEXTS_MAX) return -1;
    memcpy(texts->text[texts->count], p, (size_t)n);
    texts->text[texts->count][n] = 0;
    texts->length[texts->count] = (unsigned char)n;
    return texts->count++;
}

/* A decimal as strtod reads it. Clinger's fast path first: up to 15 significant digits and a power of ten up to
 * 22 are both exact doubles, so one IEEE multiplication or division gives the correctly rounded value, as strtod
 * (and Python's float) do; anything else goes to strtod. */
static double number(const unsigned char *p, int n) {
    static const double powers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    int i = 0, negative = 0, digits = 0, scale = 0;
    uint64_t mantissa = 0;
    if (i < n && (p[i] == '-' || p[i] == '+')) negative = p[i++] == '-';
    for (; i < n && is_digit(p[i]); i++, digits++) mantissa = mantissa * 10 + (uint64_t)(p[i] - '0');
    if (i < n && p[i] == '.')
        for (i++; i < n && is_digit(p[i]); i++, digits++, scale--) mantissa = mantissa * 10 + (uint64_t)(p[i] - '0');
    if (i < n && (p[i] == 'e' || p[i] == 'E') && digits) {
        int j = i + 1, sign = 1, exponent = 0, seen = 0;
        if (j < n && (p[j] == '+' || p[j] == '-')) sign = p[j++] == '-' ? -1 : 1;
        for (; j < n && is_digit(p[j]) && exponent < 1000; j++, seen++) exponent = exponent * 10 + (p[j] - '0');
        if (seen && j == n) i = j, scale += sign * exponent;
    }
    if (i == n && digits && digits <= 15 && scale >= -22 && scale <= 22) {
        double value = (double)mantissa;
        value = scale < 0 ? value / powers[-scale] : value * powers[scale];
        return negative ? -value : value;
    }
    char copy[64];
    if (n >= (int)sizeof copy) n = sizeof copy - 1;
    memcpy(copy, p, (size_t)n);
    copy[n] = 0;
    return strtod(copy, 0);
}

static int64_t integer(const unsigned char *p, int n) {
    int64_t value = 0, sign = 1;
    if (n && *p == '-') sign = -1, p++, n--;
    for (int i = 0; i < n; i++) value = value * 10 + (p[i] - '0');
    return sign * value;
}

/* A whole row's fields into the record; 1 when the line is one (0: an "other" line; -1: the texts table is full). */
static int whole_row(const unsigned char *p, const unsigned char *eol, Texts *texts, int64_t *ints, double *nums,
                     int16_t *codes, uint8_t *flags) {
    const unsigned char *start[14];
    int length[14];
    int n = tokens(p, eol, start, length);
    if (n < 11 || n > 13) return 0;
    int head = n - 8, redop = -1, root = -1;
    if (!all_digits(start[0], length[0]) || !all_digits(start[1], length[1]) || !is_name(start[2], length[2])) return 0;
    if (length[0] > 18 || length[1] > 18) return 0;
    if (head == 5) {
        redop = 3, root = 4;
    } else if (head == 4) {
        if (is_name(start[3], length[3])) redop = 3;
        else root = 3;
    }
    if (redop >= 0 && !is_name(start[redop], length[redop])) return 0;
    if (root >= 0) {
        const unsigned char *r = start[root];
        int m = length[root], sign = m > 0 && r[0] == '-';
        if (!all_digits(r + sign, m - sign) || m > 18) return 0;
    }
    for (int placement = 0; placement < 2; placement++) {
        int at = head + 4 * placement;
        for (int k = 0; k < 3; k++)
            if (!is_num(start[at + k], length[at + k])) return 0;
        if (!is_check(start[at + 3], length[at + 3])) return 0;
    }
    int code[4] = {text_code(texts, start[2], length[2]), redop >= 0 ? text_code(texts, start[redop], length[redop]) : 0,
                   text_code(texts, start[head + 3], length[head + 3]), text_code(texts, start[head + 7], length[head + 7])};
    for (int k = 0; k < 4; k++) {
        if (code[k] == -1) return -1;
        if (code[k] == -2) return 0;
    }
    ints[0] = integer(start[0], length[0]);
    ints[1] = integer(start[1], length[1]);
    ints[2] = root >= 0 ? integer(start[root], length[root]) : 0;
    for (int placement = 0; placement < 2; placement++)
        for (int k = 0; k < 3; k++) nums[3 * placement + k] = number(start[head + 4 * placement + k], length[head + 4 * placement + k]);
    for (int k = 0; k < 4; k++) codes[k] = (int16_t)code[k];
    *flags = (uint8_t)((redop >= 0 ? 1 : 0) | (root >= 0 ? 2 : 0));
    return 1;
}

int64_t nsk_nt_rows(const char *buffer, int64_t n, int64_t from, int64_t first_line, int64_t capacity,
                    int64_t *starts, int64_t *lines, int64_t *ints, double *nums, int16_t *codes, uint8_t *flags,
                    void *texts_state, int64_t *next, int64_t *next_line) {
    const unsigned char *buf = (const unsigned char *)buffer, *end = buf + n, *p = buf + from;
    Texts *texts = (Texts *)texts_state;
    int64_t written = 0, line = first_line;
    while (p < end && written < capacity) {
        const unsigned char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        unsigned char c = *p;
        if (c == ' ' || c == '\t' || c == '|' || c == '<' || is_digit(c) || c == '[' || c == '(') { /* the lookahead */
            const unsigned char *r = prefix_end(p, eol);
            int found = 0; /* ROW_START: a whole row, else a digit after blanks */
            while (r < eol && is_blank(*r)) r++;
            if (r < eol && is_digit(*r)) {
                int whole = whole_row(r, eol, texts, ints + 3 * written, nums + 6 * written, codes + 4 * written,
                                      flags + written);
                if (whole < 0) return -1;
                if (whole == 0) flags[written] = OTHER;
                found = 1;
            }
            if (found) {
                starts[written] = p - buf;
                lines[written] = line;
                written++;
            }
        }
        line++;
        p = eol + 1;
    }
    *next = p < end ? p - buf : n;
    *next_line = line; /* the number of the line at *next: the next call goes on from there, nothing recounted */
    return written;
}

int64_t nsk_nt_texts_size(void) { return (int64_t)sizeof(Texts); }

/* The distinct texts so far, NUL-separated into out (TEXTS_MAX x (TEXT_MAX + 1) bytes at most); their count. */
int64_t nsk_nt_texts(const void *texts_state, char *out) {
    const Texts *texts = (const Texts *)texts_state;
    for (int i = 0; i < texts->count; i++) {
        memcpy(out, texts->text[i], (size_t)texts->length[i] + 1);
        out += texts->length[i] + 1;
    }
    return texts->count;
}

/* Where `needle` occurs in buf[from, n), up to `capacity` offsets (every occurrence, overlapping ones too); the
 * count written, *next set to the offset to go on from (n at the end). nccltests/lines.py's keyword regexes start
 * with these literals and are matched at each offset. */
int64_t nsk_nt_find(const char *buffer, int64_t n, const char *needle, int64_t length, int64_t from, int64_t capacity,
                    int64_t *offsets, int64_t *next) {
    int64_t written = 0, at = from;
    while (written < capacity && at < n) {
        const char *found = memmem(buffer + at, (size_t)(n - at), needle, (size_t)length);
        if (!found) {
            at = n;
            break;
        }
        offsets[written++] = found - buffer;
        at = found - buffer + 1;
    }
    *next = at;
    return written;
}

/* How many '\n' bytes buf[0, n) holds: 8 bytes at a time (each byte equal to '\n' becomes 0x80 in y, exactly: no
 * borrow crosses bytes), the ends byte by byte. */
static int64_t newlines_in(const unsigned char *buf, int64_t n) {
    const uint64_t low7 = 0x7F7F7F7F7F7F7F7FULL, lines = 0x0A0A0A0A0A0A0A0AULL;
    int64_t count = 0, k = 0;
    for (; k < n && ((uintptr_t)(buf + k) & 7); k++) count += buf[k] == '\n';
    for (; k + 8 <= n; k += 8) {
        uint64_t word;
        memcpy(&word, buf + k, 8);
        uint64_t x = word ^ lines;
        uint64_t y = ~(((x & low7) + low7) | x | low7);
        count += __builtin_popcountll(y);
    }
    for (; k < n; k++) count += buf[k] == '\n';
    return count;
}

/* The 1-based line number of each of `count` offsets into buf[0, n), given in ascending order: one count of the
 * newlines before each, walking forward once (the keyword lines' numbers, which Python counted with a
 * bytes.count per line: a tenth of a 200 MB read). Offsets past n count to n. */
int64_t nsk_nt_line_numbers(const char *buffer, int64_t n, const int64_t *offsets, int64_t count, int64_t *out) {
    const unsigned char *buf = (const unsigned char *)buffer;
    int64_t at = 0, line = 1;
    for (int64_t i = 0; i < count; i++) {
        int64_t to = offsets[i] < n ? offsets[i] : n;
        if (to < at) return -1; /* not ascending */
        line += newlines_in(buf + at, to - at);
        at = to;
        out[i] = line;
    }
    return count;
}
