/* NVTX texts grouped, in one pass over them (see nsyskit/native/texts.py): without PyTorch's per-call suffixes, and
   a trailing step number written N.

   The suffix is nvtxnames.PER_CALL_SUFFIX: one or more units ", seq = N" / ", op_id = N" (\s* around the '=' and
   after the comma, \d+ for N), then \s* to the end. The step number is nvtxnames.STEP_NUMBER on what is left: a
   word of STEP_WORDS (any case, no ASCII letter or digit before it), [\s_:#-]*, \d+, \s* to the end; the digits and
   the spaces after them become 'N'. Python's regex takes ~250 ns a text over the tens of thousands of per-call texts
   of a rank; this walks each text back from its end. Only ASCII texts are cut here: in others \s and \d also match
   Unicode spaces and digits, and Python's regex decides (the text is marked). No globals. */
#include <stdint.h>
#include <string.h>

/* \s and \d of a str pattern, on ASCII: \t \n \v \f \r, the separators 0x1c-0x1f and the space; 0-9 */
static int is_space(uint8_t c) { return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20); }
static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* Where the text [a, b) keeps ending once its per-call suffix is cut (b when it has none). */
static int64_t kept_end(const uint8_t *s, int64_t a, int64_t b) {
    int64_t p = b, cut = b;
    while (p > a && is_space(s[p - 1])) p--; /* the trailing \s* */
    for (;;) { /* one unit back from p: digits, \s*, '=', \s*, seq or op_id, \s*, ',' */
        int64_t q = p;
        while (q > a && is_digit(s[q - 1])) q--;
        if (q == p) break;
        while (q > a && is_space(s[q - 1])) q--;
        if (q == a || s[q - 1] != '=') break;
        q--;
        while (q > a && is_space(s[q - 1])) q--;
        if (q - a >= 3 && memcmp(s + q - 3, "seq", 3) == 0) q -= 3;
        else if (q - a >= 5 && memcmp(s + q - 5, "op_id", 5) == 0) q -= 5;
        else break;
        while (q > a && is_space(s[q - 1])) q--;
        if (q == a || s[q - 1] != ',') break;
        cut = p = q - 1; /* units follow each other with nothing between: the next one ends at the comma */
    }
    return cut;
}

/* nvtxnames.STEP_WORDS (each is tried: 'batch' ends 'microbatch', whose boundary differs). */
static const char *const STEP_WORDS[] = {"step", "iter", "iteration", "epoch", "batch", "microbatch", "minibatch"};

static int is_alnum(uint8_t c) { return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }
static int is_separator(uint8_t c) { return is_space(c) || c == '_' || c == ':' || c == '#' || c == '-'; }

/* Where the step number of the text [a, b) starts when it ends with one (b when it does not). */
static int64_t step_number_start(const uint8_t *s, int64_t a, int64_t b) {
    int64_t p = b, digits, q;
    size_t w;
    while (p > a && is_space(s[p - 1])) p--;
    q = p;
    while (q > a && is_digit(s[q - 1])) q--;
    if (q == p) return b;
    digits = q;
    while (q > a && is_separator(s[q - 1])) q--;
    for (w = 0; w < sizeof STEP_WORDS / sizeof STEP_WORDS[0]; w++) {
        int64_t n = (int64_t)strlen(STEP_WORDS[w]), i;
        if (q - a < n || (q - n > a && is_alnum(s[q - n - 1]))) continue;
        for (i = 0; i < n && (s[q - n + i] | 0x20) == STEP_WORDS[w][i]; i++) {}
        if (i == n) return digits;
    }
    return b;
}

/* The `size` bytes of `texts`, each text ended by a NUL, copied to `out` (as large) with each text's suffix cut and
   a trailing step number written 'N' and its NUL kept; non_ascii[i] set to 1 for each text i holding a byte >= 0x80 (copied whole: the caller cuts it),
   else 0 (`count` texts, the NULs' count). Returns the bytes written, or -1 when the NULs are not `count`. */
int64_t nsk_cut_suffixes(const uint8_t *texts, int64_t size, int64_t count, uint8_t *out, uint8_t *non_ascii) {
    int64_t a = 0, written = 0, i = 0;
    while (a < size) {
        const uint8_t *nul = (const uint8_t *)memchr(texts + a, 0, (size_t)(size - a));
        int64_t b, end, number, j;
        uint8_t high = 0;
        if (!nul || i >= count) return -1;
        b = nul - texts;
        for (j = a; j < b; j++) high |= texts[j];
        non_ascii[i] = (high & 0x80) != 0;
        end = non_ascii[i] ? b : kept_end(texts, a, b);
        number = non_ascii[i] ? end : step_number_start(texts, a, end);
        memcpy(out + written, texts + a, (size_t)(number - a));
        written += number - a;
        if (number < end) out[written++] = 'N'; /* digits (one at least) and spaces: never longer than the text */
        out[written++] = 0;
        a = b + 1;
        i++;
    }
    return i == count ? written : -1;
}
