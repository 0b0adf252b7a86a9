/* The hot loop of the NCCL log scanner (nccllog/fastscan.py loads it with ctypes; nccllog/lines.py's INFO_LINE is
 * the reference).
 *
 * nsk_scan reads the lines of buf[start, end) (start is the newline before the first line) and
 *   - counts the newlines, 'NCCL INFO's and 'NCCL WARN's of the range (as bytes.count would);
 *   - reads the lines it can prove INFO_LINE reads the same way ("plain" lines: the source 'host:pid:tid [dev]'
 *     starts the line, or follows the regex's prefix tokens), and counts each distinct
 *     finding (source, op, tail, message: the spans INFO_LINE's groups would give) in a hash table;
 *   - hands back every other line as runs [newline before, newline after) for INFO_LINE itself.
 * A plain line never lets a regex match run past its end, and a match that runs from other lines into a plain line
 * yields that line's own finding, so the findings of the runs plus the counted ones equal INFO_LINE.findall's.
 * Anything this code is not sure of goes to the runs. Returns the number of distinct findings, or -1 when an
 * output array is full (the caller then reads the range with INFO_LINE alone).
 */
#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <string.h>

#include "launchprefix.h"

#define FIELDS 9 /* per finding: source, op, tail, message as [a, b) pairs, then the count */

enum { PLAIN_NOTHING = 0, PLAIN_FINDING = 1, OTHER = 2, OTHER_RUNNING_ON = 3 };

typedef struct {
    int64_t span[8];
} Finding;

static int is_letter(unsigned char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static int is_upper(unsigned char c) { return c >= 'A' && c <= 'Z'; }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static int starts(const unsigned char *p, const unsigned char *eol, const char *word) {
    size_t n = strlen(word);
    return (size_t)(eol - p) >= n && memcmp(p, word, n) == 0;
}

/* The end of a run of non-space characters starting at p ('[^ ]++'); 0 when the run would reach the end of the
 * line (a regex run would go on into the next line); p itself when the run is empty. */
static const unsigned char *run_end(const unsigned char *p, const unsigned char *eol) {
    const unsigned char *space = memchr(p, ' ', (size_t)(eol - p));
    return space ? space : 0;
}

/* Whether ' [digits] NCCL INFO ' starts at p; *after: the position after it, *source_end: after ']'. */
static int source_tail(const unsigned char *p, const unsigned char *eol, const unsigned char **source_end,
                       const unsigned char **after) {
    const unsigned char *q = p;
    if (eol - q < 2 || q[0] != ' ' || q[1] != '[') return 0;
    q += 2;
    if (q >= eol || !is_digit(*q)) return 0;
    while (q < eol && is_digit(*q)) q++;
    if (q >= eol || *q != ']') return 0;
    q++;
    *source_end = q;
    if (!starts(q, eol, " NCCL INFO ")) return 0;
    *after = q + 11;
    return 1;
}

/* _FACT_WORDS of lines.py at p. */
static int fact_words(const unsigned char *p, const unsigned char *eol) {
    static const char *words[] = {"NCCL version", "Using ", "NET/", "Channel", "Ring", "Trees", "Connected",
                                  "NCCL_", "comm ", "ncclCommInit", "nranks", "Init ", 0};
    const unsigned char *q = p;
    int i;
    if (p < eol && is_digit(*p)) return 1;
    for (i = 0; words[i]; i++)
        if (starts(p, eol, words[i])) return 1;
    while (q < eol && ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z'))) q++;
    if (q == p || !starts(q, eol, ": ")) return 0;
    q += 2;
    if (starts(q, eol, "opCount")) return 1;
    if (q >= eol || !is_digit(*q)) return 0;
    while (q < eol && is_digit(*q)) q++;
    return starts(q, eol, " Bytes");
}

/* _COLL of lines.py at p: the op [*op_end] and the tail [*tail, eol); 0: not a collective; -1: unsure. */
static int collective(const unsigned char *p, const unsigned char *eol, const unsigned char **op_end,
                      const unsigned char **tail) {
    static const char *names[] = {": opCount ", " sendbuff ", " recvbuff ", " "};
    const unsigned char *q = p;
    int i;
    if (q >= eol || !is_upper(*q)) return 0;
    q++;
    if (q >= eol || !((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z'))) return 0;
    while (q < eol && ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z'))) q++;
    *op_end = q;
    for (i = 0; i < 4; i++) {
        if (i > 0) { /* a value: '[^ ]++' */
            if (q >= eol) return -1; /* the run would start on the next line */
            if (*q == ' ') return 0;
            q = run_end(q, eol);
            if (q == 0) return -1;
        }
        if (!starts(q, eol, names[i])) return 0;
        q += strlen(names[i]);
    }
    if (!starts(q, eol, "count ") && !starts(q, eol, "acc ")) return 0;
    *tail = q;
    return 1;
}

/* Whether text after a line's first space could continue a '[^ ]++' value run of _COLL from an earlier line. */
static int continues_values(const unsigned char *after, const unsigned char *eol) {
    return starts(after, eol, "sendbuff ") || starts(after, eol, "recvbuff ") || starts(after, eol, "count ") ||
           starts(after, eol, "acc ");
}

/* launch_token's answer for a '[' or '(' not closed in the line: the regex's run may go on into the next one */
#define UNSURE ((const unsigned char *)1)

static int is_separator(unsigned char c) { return c == ' ' || c == '\t' || c == ':' || c == '|'; }

/* Read one line [p, eol) of buf: PLAIN_NOTHING (INFO_LINE finds nothing on it), PLAIN_FINDING (f: offsets) or
 * OTHER (left to INFO_LINE). */
static int read_line(const unsigned char *buf, const unsigned char *p, const unsigned char *eol, Finding *f) {
    const unsigned char *q = p, *first_space, *space, *source_end, *message, *op_end, *tail;
    int kind;
    if (q >= eol) return OTHER;
    first_space = run_end(p, eol);
    /* a line without a space, or one that a cut collective line before it could run into: left to the regex */
    if (first_space == 0 || continues_values(first_space + 1, eol)) return OTHER;
    if (*q == ' ' || *q == '\t' || *q == '|' || *q == '[' || *q == '<' || *q == '(' || is_digit(*q)) {
        /* the regex tries the prefix first: '[ \t|]*+', then tokens each followed by separators */
        while (q < eol && (*q == ' ' || *q == '\t' || *q == '|')) q++;
        while (q < eol) {
            const unsigned char *end = launch_token(q, eol, UNSURE); /* launchprefix.h */
            if (end == UNSURE) return OTHER;
            if (end == 0) break;
            for (q = end; q < eol && is_separator(*q); q++)
                ;
        }
        /* the prefix took the rest of the line but its last word: the source run goes on into the next line,
         * where it may match (after this line, the next one is left to the regex too) */
        space = q < eol ? run_end(q, eol) : 0;
        if (space == 0) return OTHER_RUNNING_ON;
        /* the line without its prefix (tried when the prefix way fails; a source run from the line before reads
         * the line that way too): left to the regex where it could match, unless it reads the same source (a
         * prefix without spaces: the scanner cuts such a source where the prefix ends, clean_source) */
        if (first_space != space && source_tail(first_space, eol, &source_end, &message)) return OTHER;
        if (!source_tail(space, eol, &source_end, &message)) return PLAIN_NOTHING;
    } else {
        /* no prefix: the source starts the line ('-' may start the prefix token '-(?= )' that clean_source would
         * cut from a source run coming from the line before) */
        if (*q == '-') return OTHER;
        if (!source_tail(first_space, eol, &source_end, &message)) return PLAIN_NOTHING;
    }
    memset(f, 0, sizeof(*f));
    f->span[0] = q - buf;
    f->span[1] = source_end - buf;
    kind = collective(message, eol, &op_end, &tail);
    if (kind < 0) return OTHER;
    if (kind) {
        f->span[2] = message - buf;
        f->span[3] = op_end - buf;
        f->span[4] = tail - buf;
        f->span[5] = eol - buf;
    } else if (fact_words(message, eol)) {
        f->span[6] = message - buf;
        f->span[7] = eol - buf;
    }
    return PLAIN_FINDING;
}

static uint64_t hash_spans(const unsigned char *buf, const int64_t *span) {
    uint64_t h = 1469598103934665603ULL;
    int i;
    for (i = 0; i < 8; i += 2) {
        const unsigned char *a = buf + span[i], *b = buf + span[i + 1];
        h = (h ^ (uint64_t)(b - a)) * 1099511628211ULL;
        for (; a + 8 <= b; a += 8) {
            uint64_t w;
            memcpy(&w, a, 8);
            h = (h ^ w) * 1099511628211ULL;
            h ^= h >> 29;
        }
        for (; a < b; a++) h = (h ^ *a) * 1099511628211ULL;
    }
    return h ^ (h >> 32);
}

static int same_spans(const unsigned char *buf, const int64_t *x, const int64_t *y) {
    int i;
    for (i = 0; i < 8; i += 2) {
        int64_t n = x[i + 1] - x[i];
        if (n != y[i + 1] - y[i]) return 0;
        if (n && memcmp(buf + x[i], buf + y[i], (size_t)n) != 0) return 0;
    }
    return 1;
}

/* The prefix tokens '\[[^\]]*+\]' and '\([^)]*+\)' of the regex may run from one line into the next. After a line
 * left to the regex: whether a '[' / '(' is still open at its end (*square, *round), and whether it closed one opened
 * on an earlier line (a match's prefix may then go on in this line and its source run into the next: *risk, which
 * also lasts over lines without a space). While any is set, the next line is left to the regex too. Returns whether
 * the line holds a space (a run of lines without one holds no INFO line: INFO_LINE needs ' [dev] NCCL INFO '). */
static int after_other_line(const unsigned char *p, const unsigned char *eol, int *square, int *round, int *risk) {
    const unsigned char *q;
    int sq = *square, rd = *round, closed = 0, space = 0;
    for (q = p; q < eol; q++) {
        if (*q == '[') sq = 1;
        else if (*q == ']') closed |= *square, sq = 0;
        else if (*q == '(') rd = 1;
        else if (*q == ')') closed |= *round, rd = 0;
        else if (*q == ' ') space = 1;
    }
    *risk = closed || (*risk && !space);
    *square = sq;
    *round = rd;
    return space;
}

static int64_t count_word(const unsigned char *a, const unsigned char *b, const char *word) {
    size_t n = strlen(word);
    int64_t found = 0;
    while (a < b) {
        const unsigned char *hit = memmem(a, (size_t)(b - a), word, n);
        if (!hit) break;
        found++;
        a = hit + n;
    }
    return found;
}

/* counts: newlines, 'NCCL INFO's, 'NCCL WARN's, runs. runs: [a, b) pairs. out: FIELDS int64s per finding, spans as
 * offsets into buf. slots: a hash table of table_size (a power of two, > max_out) int32s, used as scratch. */
int64_t nsk_scan(const unsigned char *buf, int64_t start, int64_t end, int64_t *counts, int64_t *runs,
                 int64_t max_runs, int64_t *out, int64_t max_out, int32_t *slots, int64_t table_size) {
    const unsigned char *p = buf + start, *stop = buf + end;
    int64_t newlines = 0, nruns = 0, nout = 0, run_start = -1;
    int square = 0, round = 0, risk = 0, run_has_space = 0; /* see after_other_line */
    Finding f;
    memset(slots, 0xff, (size_t)table_size * sizeof(int32_t));
    counts[1] = count_word(p, stop, "NCCL INFO");
    counts[2] = count_word(p, stop, "NCCL WARN");
    while (p < stop) { /* p: a newline */
        const unsigned char *line = p + 1, *eol;
        int kind;
        newlines++;
        eol = line < stop ? memchr(line, '\n', (size_t)(stop - line)) : 0;
        if (!eol) eol = stop;
        kind = line >= stop ? PLAIN_NOTHING : (square || round || risk) ? OTHER : read_line(buf, line, eol, &f);
        if (kind >= OTHER) {
            run_has_space |= after_other_line(line, eol, &square, &round, &risk);
            risk |= kind == OTHER_RUNNING_ON;
            kind = OTHER;
        }
        if (kind == OTHER) {
            if (run_start < 0) run_start = p - buf;
        } else {
            if (run_start >= 0 && run_has_space) {
                if (nruns >= max_runs) return -1;
                runs[2 * nruns] = run_start;
                runs[2 * nruns + 1] = p - buf;
                nruns++;
            }
            run_start = -1;
            run_has_space = 0;
            if (kind == PLAIN_FINDING) {
                uint64_t h = hash_spans(buf, f.span) & (uint64_t)(table_size - 1);
                for (;;) {
                    int32_t at = slots[h];
                    if (at < 0) {
                        int i;
                        if (nout >= max_out) return -1;
                        for (i = 0; i < 8; i++) out[FIELDS * nout + i] = f.span[i];
                        out[FIELDS * nout + 8] = 1;
                        slots[h] = (int32_t)nout++;
                        break;
                    }
                    if (same_spans(buf, out + FIELDS * at, f.span)) {
                        out[FIELDS * at + 8]++;
                        break;
                    }
                    h = (h + 1) & (uint64_t)(table_size - 1);
                }
            }
        }
        p = eol;
    }
    if (run_start >= 0 && run_has_space) {
        if (nruns >= max_runs) return -1;
        runs[2 * nruns] = run_start;
        runs[2 * nruns + 1] = end;
        nruns++;
    }
    counts[0] = newlines;
    counts[3] = nruns;
    return nout;
}

/* The first position of needle in buf[start, end), or -1 (bytes.find; glibc's memmem is several times faster). */
int64_t nsk_find(const unsigned char *buf, int64_t start, int64_t end, const char *needle, int64_t length) {
    const unsigned char *hit;
    if (end - start < length) return -1;
    hit = memmem(buf + start, (size_t)(end - start), needle, (size_t)length);
    return hit ? hit - buf : -1;
}
