/* The values of flat JSON objects in one pass (see nsyskit/analysis/read/jsonvalues.py).

   Generic events' `data` (GPU metrics of nsys before 2023.4: {"SM Active": "12", ...}), joined by 0x01. Every
   object must hold `width` pairs whose keys are byte for byte those of the first object, in its order; a value is a
   number, or a string holding one (as nsys writes them), else NaN (true, false, null, other text). Anything else (a
   nested value, another key order, a missing pair) returns -1: the caller reads the objects with json.loads. The
   numbers are strtod's (correctly rounded, as Python's float()). No globals. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEYS 4096
#define NUMBER_CHARS 63

static int64_t skip_space(const char *s, int64_t p, int64_t end) {
    while (p < end && (s[p] == ' ' || s[p] == '\n' || s[p] == '\r' || s[p] == '\t')) p++;
    return p;
}

/* The end of the string whose opening quote is at p (the index of its closing quote), or -1. */
static int64_t string_end(const char *s, int64_t p, int64_t end) {
    for (p++; p < end; p++) {
        if (s[p] == '\\') p++;
        else if (s[p] == '"') return p;
    }
    return -1;
}

/* [a, b) as a number when all of it is one (strtod), else NaN. */
static double number(const char *s, int64_t a, int64_t b) {
    char buffer[NUMBER_CHARS + 1];
    char *stop;
    double value;
    int64_t k, whole = 0;
    if (b - a <= 0 || b - a > NUMBER_CHARS) return NAN;
    if (b - a <= 15) { /* whole numbers of up to 15 digits (counters, percentages): exact in a double */
        for (k = a; k < b && s[k] >= '0' && s[k] <= '9'; k++) whole = whole * 10 + (s[k] - '0');
        if (k == b) return (double)whole;
    }
    memcpy(buffer, s + a, (size_t)(b - a));
    buffer[b - a] = 0;
    value = strtod(buffer, &stop);
    return (stop == buffer + (b - a)) ? value : NAN;
}

/* Fill out[count * width] (object after object) from the `size` bytes of `text`; the number of objects, or -1. */
int64_t nsk_json_values(const char *text, int64_t size, int64_t count, int64_t width, double *out) {
    int64_t key_at[MAX_KEYS], key_len[MAX_KEYS];
    int64_t p = 0, i, j;
    if (width <= 0 || width > MAX_KEYS) return -1;
    for (i = 0; i < count; i++) {
        p = skip_space(text, p, size);
        if (p >= size || text[p] != '{') return -1;
        p++;
        for (j = 0; j < width; j++) {
            int64_t close, a, b;
            p = skip_space(text, p, size);
            if (p >= size || text[p] != '"') return -1;
            close = string_end(text, p, size);
            if (close < 0) return -1;
            if (i == 0) {
                key_at[j] = p;
                key_len[j] = close - p;
            } else if (close - p != key_len[j] || memcmp(text + p, text + key_at[j], (size_t)key_len[j]) != 0) {
                return -1;
            }
            p = skip_space(text, close + 1, size);
            if (p >= size || text[p] != ':') return -1;
            p = skip_space(text, p + 1, size);
            if (p >= size) return -1;
            if (text[p] == '"') {
                b = string_end(text, p, size);
                if (b < 0) return -1;
                out[i * width + j] = number(text, p + 1, b);
                p = b + 1;
            } else {
                if (text[p] == '{' || text[p] == '[') return -1;
                a = p;
                while (p < size && text[p] != ',' && text[p] != '}' && text[p] != ' ' && text[p] != '\n' &&
                       text[p] != '\r' && text[p] != '\t')
                    p++;
                out[i * width + j] = number(text, a, p);
            }
            p = skip_space(text, p, size);
            if (p >= size || text[p] != (j + 1 < width ? ',' : '}')) return -1;
            p++;
        }
        p = skip_space(text, p, size);
        if (i + 1 < count) {
            if (p >= size || text[p] != 1) return -1;
            p++;
        }
    }
    return skip_space(text, p, size) == size ? count : -1;
}
