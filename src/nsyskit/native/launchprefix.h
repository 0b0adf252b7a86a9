/* The launcher-prefix tokens of nsyskit/launchprefix.py (tokens(), its alternatives in its order), for the C
 * scanners of both readers: linescan.c (NCCL logs) and rowscan.c (nccl-tests rows) include it, and
 * nsyskit.native.source() writes it into their text (the digest of a helper covers it). */
#include <string.h>

static int lp_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int lp_letter(unsigned char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static int lp_word(unsigned char c) { return lp_letter(c) || lp_digit(c); }

static const unsigned char *lp_digits(const unsigned char *p, const unsigned char *eol) {
    while (p < eol && lp_digit(*p)) p++;
    return p;
}

static int lp_starts(const unsigned char *p, const unsigned char *eol, const char *word) {
    size_t n = strlen(word);
    return (size_t)(eol - p) >= n && memcmp(p, word, n) == 0;
}

/* The end of a stamp at p (STAMP: '\d{4}-\d\d-\d\d(?:[T ][\d:.,]*+)?(?:Z|[+\-]\d\d:?\d\d)?'), or 0. */
static const unsigned char *lp_stamp_end(const unsigned char *p, const unsigned char *eol) {
    const unsigned char *r = p + 10, *s;
    if (!(eol - p >= 10 && lp_digit(p[0]) && lp_digit(p[1]) && lp_digit(p[2]) && lp_digit(p[3]) && p[4] == '-' &&
          lp_digit(p[5]) && lp_digit(p[6]) && p[7] == '-' && lp_digit(p[8]) && lp_digit(p[9])))
        return 0;
    if (r < eol && (*r == 'T' || *r == ' '))
        for (r++; r < eol && (lp_digit(*r) || *r == ':' || *r == '.' || *r == ','); r++)
            ;
    if (r < eol && *r == 'Z') return r + 1;
    if (eol - r >= 5 && (*r == '+' || *r == '-') && lp_digit(r[1]) && lp_digit(r[2])) {
        s = r + 3;
        if (eol - s >= 3 && *s == ':' && lp_digit(s[1]) && lp_digit(s[2])) return s + 3;
        if (lp_digit(s[0]) && lp_digit(s[1])) return s + 2;
    }
    return r;
}

/* The end of the token at p (p < eol), 0 when none starts here, `unclosed` for a '[' or '(' not closed in the line
 * (the NCCL log reader's regex may run it into the next line; in nccl-tests it is no token). */
static const unsigned char *launch_token(const unsigned char *p, const unsigned char *eol,
                                         const unsigned char *unclosed) {
    const unsigned char *q, *r;
    if (*p == '[' || *p == '(') { /* '\[[^\]]*+\]', '\([^)]*+\)' */
        q = memchr(p, *p == '[' ? ']' : ')', (size_t)(eol - p));
        return q ? q + 1 : unclosed;
    }
    if (*p == '<') { /* '<\w++>' */
        q = p + 1;
        while (q < eol && lp_word(*q)) q++;
        return q > p + 1 && q < eol && *q == '>' ? q + 1 : 0;
    }
    if (lp_digit(*p)) { /* 'N:', a stamp, a number before a blank or '|' (epoch seconds) */
        q = lp_digits(p, eol);
        if (q < eol && *q == ':') return q + 1;
        if ((r = lp_stamp_end(p, eol)) != 0) return r;
        if (q + 1 < eol && *q == '.' && lp_digit(q[1])) q = lp_digits(q + 1, eol);
        return q < eol && (*q == ' ' || *q == '\t' || *q == '|') ? q : 0;
    }
    if ((lp_starts(p, eol, "stdout ") || lp_starts(p, eol, "stderr ")) && eol - p >= 8 && (p[7] == 'F' || p[7] == 'P'))
        return p + 8; /* the CRI stream tag */
    if (lp_letter(*p)) {
        q = p + 1;
        while (q < eol && lp_word(*q)) q++;
        if (lp_starts(q, eol, "(), ")) { /* 'run(), common.cu:967,' */
            r = q + 4;
            while (r < eol && lp_word(*r)) r++;
            if (r > q + 4 && lp_starts(r, eol, ".cu:") && (q = lp_digits(r + 4, eol)) > r + 4 && q < eol && *q == ',')
                return q + 1;
        }
        q = p + 1;
        while (q < eol && (lp_word(*q) || *q == '.')) q++;
        return lp_starts(q, eol, " - ") ? q : 0; /* Python logging's level or logger before ' - ' */
    }
    return *p == '-' && p + 1 < eol && p[1] == ' ' ? p + 1 : 0; /* '-(?= )' */
}
