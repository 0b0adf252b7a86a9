/* The values of flat JSON objects in one pass (see nsyskit/analysis/read/jsonvalues.py).

   Generic events' `data` (GPU metrics of nsys before 2023.4: {"SM Active": "12", ...}), joined by 0x01. Every
   object must hold `width` pairs whose keys are byte for byte those of the first object, in its order; a value is a
   number, or a string holding one (as nsys writes them), else NaN (true, false, null, other text). Anything else (a
   nested value, another key order, a missing pair) returns -1: the caller reads the objects with json.loads. The
   numbers are strtod's (correctly rounded, as Python's float()). nsk_json_spans reads objects at given spans of a
   buffer instead (no separator). No globals. */
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

/* Whether the n >= 0 bytes at a and at b are the same: memcmp's answer without a call per run (the runs between the
   values, a key and its quotes and spaces, are short: the call cost most of the parse), eight bytes at a time. */
static inline int same_bytes(const char *a, const char *b, int64_t n) {
    uint64_t x, y;
    int64_t k;
    if (n < 8) {
        for (k = 0; k < n; k++)
            if (a[k] != b[k]) return 0;
        return 1;
    }
    for (k = 0; k + 8 <= n; k += 8) {
        memcpy(&x, a + k, 8), memcpy(&y, b + k, 8);
        if (x != y) return 0;
    }
    memcpy(&x, a + n - 8, 8), memcpy(&y, b + n - 8, 8); /* the last eight bytes (overlapping those compared) */
    return x == y;
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

/* The first object's layout: where each key token and each value lie, where it opens and ends. */
typedef struct {
    int64_t *key_at, *key_len, *value_at, *value_end;
    int64_t open, close;
} Layout;

static int open_layout(Layout *layout, int64_t width) {
    layout->key_at = (int64_t *)malloc(sizeof(int64_t) * 4 * (size_t)width);
    if (!layout->key_at) return 0;
    layout->key_len = layout->key_at + width;
    layout->value_at = layout->key_len + width;
    layout->value_end = layout->value_at + width;
    return 1;
}

/* The value at p into *out (a number, or a string holding one, else NaN); where it ends, or -1 (nested). */
static int64_t parse_value(const char *text, int64_t p, int64_t size, double *out) {
    int64_t a, b;
    if (text[p] == '"') {
        /* the common case in one pass: a quoted whole number of 1 to 15 digits ("12"), exact in a double */
        int64_t whole = 0, k = p + 1, stop = p + 16 < size ? p + 16 : size;
        while (k < stop && text[k] >= '0' && text[k] <= '9') whole = whole * 10 + (text[k++] - '0');
        if (k > p + 1 && k < size && text[k] == '"') {
            *out = (double)whole;
            return k + 1;
        }
        b = string_end(text, p, size);
        if (b < 0) return -1;
        *out = number(text, p + 1, b);
        return b + 1;
    }
    if (text[p] == '{' || text[p] == '[') return -1;
    a = p;
    while (p < size && text[p] != ',' && text[p] != '}' && text[p] != ' ' && text[p] != '\n' && text[p] != '\r' &&
           text[p] != '\t')
        p++;
    *out = number(text, a, p);
    return p;
}

/* The object at p (after spaces) into row[width]: its keys those of the first object (first: record its layout);
   where it ends (after its '}'), or -1. */
static int64_t parse_object(const char *text, int64_t p, int64_t size, int first, int64_t width, Layout *layout,
                            double *row, int64_t stride) {
    int64_t j;
    p = skip_space(text, p, size);
    if (p >= size || text[p] != '{') return -1;
    if (first) layout->open = p;
    p++;
    for (j = 0; j < width; j++) {
        int64_t close;
        p = skip_space(text, p, size);
        if (p >= size || text[p] != '"') return -1;
        if (first) {
            close = string_end(text, p, size);
            if (close < 0) return -1;
            layout->key_at[j] = p;
            layout->key_len[j] = close - p;
        } else { /* the first object's key token byte for byte, closing quote included: the same string */
            if (layout->key_len[j] >= size - p ||
                !same_bytes(text + p, text + layout->key_at[j], layout->key_len[j] + 1))
                return -1;
            close = p + layout->key_len[j];
        }
        p = skip_space(text, close + 1, size);
        if (p >= size || text[p] != ':') return -1;
        p = skip_space(text, p + 1, size);
        if (p >= size) return -1;
        if (first) layout->value_at[j] = p;
        p = parse_value(text, p, size, row + j * stride);
        if (p < 0) return -1;
        if (first) layout->value_end[j] = p;
        p = skip_space(text, p, size);
        if (p >= size || text[p] != (j + 1 < width ? ',' : '}')) return -1;
        p++;
    }
    if (first) layout->close = p;
    return p;
}

/* parse_object of an object laid out as the first one: the bytes around its values those of the first object
   (spaces, keys, colons, commas), compared whole; where it ends, or -1 where it is laid out otherwise (then
   parse_object decides: the same numbers, as it reads those same bytes the same way). */
static int64_t parse_alike(const char *text, int64_t p, int64_t size, int64_t width, const Layout *layout,
                           double *row, int64_t stride) {
    int64_t j, from = layout->open, length;
    p = skip_space(text, p, size);
    for (j = 0; j <= width; j++) {
        length = (j < width ? layout->value_at[j] : layout->close) - from;
        if (length > size - p || !same_bytes(text + p, text + from, length)) return -1;
        p += length;
        if (j == width) break;
        if (p >= size) return -1;
        p = parse_value(text, p, size, row + j * stride);
        if (p < 0) return -1;
        from = layout->value_end[j];
    }
    return p;
}

/* The next object from p: alike to the first (parse_alike) or parsed whole (parse_object); its end, or -1. */
static int64_t next_object(const char *text, int64_t p, int64_t size, int first, int64_t width, Layout *layout,
                           double *row, int64_t stride) {
    int64_t done = first ? -1 : parse_alike(text, p, size, width, layout, row, stride);
    return done >= 0 ? done : parse_object(text, p, size, first, width, layout, row, stride);
}

/* Fill out[count * width] (object after object) from the `size` bytes of `text`; the number of objects, or -1. */
int64_t nsk_json_values(const char *text, int64_t size, int64_t count, int64_t width, double *out) {
    Layout layout;
    int64_t p = 0, i;
    if (width <= 0 || width > MAX_KEYS || !open_layout(&layout, width)) return -1;
    for (i = 0; i < count; i++) {
        p = next_object(text, p, size, i == 0, width, &layout, out + i * width, 1);
        if (p < 0) break;
        p = skip_space(text, p, size);
        if (i + 1 < count) {
            if (p >= size || text[p] != 1) {
                p = -1;
                break;
            }
            p++;
        }
    }
    free(layout.key_at);
    return p >= 0 && skip_space(text, p, size) == size ? count : -1;
}

/* Ask the memory for the bytes [a, b) of `text` before they are parsed: the objects lie a few to a page of the
   file, and the processor's own look-ahead stops at each page's end, so without this most of the parse waits on
   memory (a hint only: it reads nothing and cannot fault). */
#define AHEAD 2 /* objects ahead */
#define LINE 64
static inline void prefetch_span(const char *text, int64_t a, int64_t b) {
#if defined(__GNUC__)
    for (; a < b; a += LINE) __builtin_prefetch(text + a);
#else
    (void)text, (void)a, (void)b;
#endif
}

/* The same for objects at spans of `text`: object i fills [starts[i], ends[i]) whole (pagescan's text buffer, the
   rows of one type picked from it), objects from..to-1 into out, field j of object i at out[j * count + i] (a column
   per field: a series' values, contiguous) (object 0 read first all the same, for the layout: two threads may read
   two ranges of one call's objects, the same numbers as one); the number of objects read, or -1. */
int64_t nsk_json_spans(const char *text, const int64_t *starts, const int64_t *ends, int64_t from, int64_t to,
                       int64_t width, int64_t count, double *out) {
    Layout layout;
    double *scratch;
    int64_t p = 0, i;
    if (width <= 0 || width > MAX_KEYS || from < 0 || to <= from || to > count || !open_layout(&layout, width))
        return -1;
    scratch = (double *)malloc(sizeof(double) * (size_t)width);
    for (i = 0; i < to && p >= 0; i = (i == 0 && from > 0) ? from : i + 1) {
        int layout_only = i == 0 && from > 0; /* object 0 for the layout only, into scratch */
        double *row = layout_only ? scratch : out + i;
        if (i + AHEAD < to) prefetch_span(text, starts[i + AHEAD], ends[i + AHEAD]);
        p = !row || starts[i] < 0 || ends[i] < starts[i]
                ? -1
                : next_object(text, starts[i], ends[i], i == 0, width, &layout, row, layout_only ? 1 : count);
        if (p >= 0 && skip_space(text, p, ends[i]) != ends[i]) p = -1;
    }
    free(scratch);
    free(layout.key_at);
    return p >= 0 ? to - from : -1;
}
