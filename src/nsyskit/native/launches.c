/* CUDA launches in one pass each (see nsyskit/native/launches.py): which CUDA API call launched which kernel (the
   join on correlationId), and which kernels each NVTX range launched (the NVTX-to-GPU projection).

   numpy does each in a dozen passes over a million launches, each pass a new array; these walk them once. Both
   give exactly the numpy paths' results (records.join_launches, projection.project), which stay for machines
   without a compiler. No globals: callers run them in threads. Every index read is checked against its array. */
#include <stdint.h>
#include <stdlib.h>

#define NSK_BAD (-1)       /* an input this code does not take (the caller uses numpy) */
#define NSK_NOT_INTEGER (-2) /* a call on a wanted thread whose start is not an INTEGER (the caller reads via SQLite) */
#define NSK_NO_MEMORY (-3)
#define KIND_INTEGER 1

/* The first index in [a, b) of sorted `values` holding a value >= key (after: > key); b when there is none, as
   numpy's searchsorted side='left' (side='right'). */
static int64_t search(const int64_t *values, int64_t a, int64_t b, int64_t key, int after) {
    while (a < b) {
        int64_t middle = a + (b - a) / 2;
        if (values[middle] < key || (after && values[middle] == key)) a = middle + 1;
        else b = middle;
    }
    return a;
}

/* search(values, a, b, key, after) for an answer known to lie at or after `from` (a <= from <= b): steps of 1, 2, 4,
   ... from there, then a binary search within the last step. Ranges in start order find their launches a few
   steps past the previous range's, in memory already read, instead of twenty steps across the whole array. */
static int64_t search_from(const int64_t *values, int64_t from, int64_t b, int64_t key, int after) {
    int64_t low = from, step = 1;
    while (low + step <= b && (values[low + step - 1] < key || (after && values[low + step - 1] == key))) {
        low += step; /* every value before low is below the key (at or below it: after) */
        step *= 2;
    }
    return search(values, low, low + step < b ? low + step : b, key, after);
}

/* Whether `value` is one of the `count` sorted `values` (few: the NVTX threads). */
static int listed(int64_t value, const int64_t *values, int64_t count) {
    int64_t at = search(values, 0, count, value, 0);
    return at < count && values[at] == value;
}

/* The calls (thread, start, corr; kinds as pagescan gives them, or NULL when all are INTEGERs) made on one of the
   sorted `threads` whose correlationId is that of a kernel (`kernel_corr`, all within [low, high], a table of
   high - low + 1 entries: the caller checks the span is small). Writes, in call order, each such call's thread,
   start and kernel row (the last kernel with that id, as numpy's assignment keeps the last); returns their count,
   or NSK_NOT_INTEGER when a wanted call's start is not an INTEGER (before writing anything that counts). */
int64_t nsk_join_launches(int64_t calls, const int64_t *thread, const int64_t *start, const int64_t *corr,
                          const uint8_t *thread_kind, const uint8_t *start_kind, const uint8_t *corr_kind,
                          int64_t thread_count, const int64_t *threads, int64_t kernels, const int64_t *kernel_corr,
                          int64_t low, int64_t high, int64_t *out_thread, int64_t *out_start, int64_t *out_kernel) {
    int64_t i, found = 0, span;
    int64_t *row_of;
    if (calls < 0 || kernels < 1 || thread_count < 1 || high < low) return NSK_BAD;
    for (i = 1; i < thread_count; i++)
        if (threads[i] <= threads[i - 1]) return NSK_BAD;
    span = high - low + 1;
    row_of = (int64_t *)malloc((size_t)span * sizeof(int64_t));
    if (!row_of) return NSK_NO_MEMORY;
    for (i = 0; i < span; i++) row_of[i] = -1;
    for (i = 0; i < kernels; i++) {
        if (kernel_corr[i] < low || kernel_corr[i] > high) {
            free(row_of);
            return NSK_BAD;
        }
        row_of[kernel_corr[i] - low] = i;
    }
    for (i = 0; i < calls; i++) { /* every wanted call's start must be an INTEGER, matched or not (as numpy checks) */
        int64_t row;
        if ((corr_kind && corr_kind[i] != KIND_INTEGER) || (thread_kind && thread_kind[i] != KIND_INTEGER)) continue;
        if (!listed(thread[i], threads, thread_count)) continue;
        if (start_kind && start_kind[i] != KIND_INTEGER) {
            free(row_of);
            return NSK_NOT_INTEGER;
        }
        if (corr[i] < low || corr[i] > high) continue;
        row = row_of[corr[i] - low];
        if (row < 0) continue;
        out_thread[found] = thread[i];
        out_start[found] = start[i];
        out_kernel[found] = row;
        found++;
    }
    free(row_of);
    return found;
}

#define BLOCK 64 /* launches summed together when ranges nest (see nsk_project) */

/* The kernels of launches [lo, hi) (lo < hi): their total time, least start and greatest end. */
typedef struct {
    int64_t sum, low_start, high_end;
} Span;

static Span launch_span(const int64_t *l_kernel, const int64_t *kernel_start, const int64_t *kernel_end,
                        int64_t lo, int64_t hi) {
    Span span = {0, kernel_start[l_kernel[lo]], kernel_end[l_kernel[lo]]};
    int64_t j;
    for (j = lo; j < hi; j++) {
        int64_t s = kernel_start[l_kernel[j]], e = kernel_end[l_kernel[j]];
        span.sum += e - s;
        if (s < span.low_start) span.low_start = s;
        if (e > span.high_end) span.high_end = e;
    }
    return span;
}

/* launch_span from the blocks' summaries (sum, least start, greatest end of launches [b * BLOCK, (b + 1) * BLOCK))
   for the whole blocks inside [lo, hi), launch by launch for the rest. */
static Span block_span(const int64_t *l_kernel, const int64_t *kernel_start, const int64_t *kernel_end,
                       const int64_t *summary, int64_t lo, int64_t hi) {
    int64_t whole_lo = (lo + BLOCK - 1) / BLOCK, whole_hi = hi / BLOCK, b;
    Span span, part;
    if (whole_hi - whole_lo < 2) return launch_span(l_kernel, kernel_start, kernel_end, lo, hi);
    span.sum = 0, span.low_start = summary[3 * whole_lo + 1], span.high_end = summary[3 * whole_lo + 2];
    for (b = whole_lo; b < whole_hi; b++) {
        span.sum += summary[3 * b];
        if (summary[3 * b + 1] < span.low_start) span.low_start = summary[3 * b + 1];
        if (summary[3 * b + 2] > span.high_end) span.high_end = summary[3 * b + 2];
    }
    if (lo < whole_lo * BLOCK) {
        part = launch_span(l_kernel, kernel_start, kernel_end, lo, whole_lo * BLOCK);
        span.sum += part.sum;
        if (part.low_start < span.low_start) span.low_start = part.low_start;
        if (part.high_end > span.high_end) span.high_end = part.high_end;
    }
    if (whole_hi * BLOCK < hi) {
        part = launch_span(l_kernel, kernel_start, kernel_end, whole_hi * BLOCK, hi);
        span.sum += part.sum;
        if (part.low_start < span.low_start) span.low_start = part.low_start;
        if (part.high_end > span.high_end) span.high_end = part.high_end;
    }
    return span;
}

/* The GPU projection of `ranges` NVTX ranges (thread, start, end): per range, of the launches on its thread whose
   call starts inside [start, end], counting only kernels where `only` is set (NULL: all), the number, their total
   time (end - start), the first kernel start and the last kernel end (-1 both when none).

   `launches` calls sorted by (thread, start), each with its kernel's row in kernel_start/kernel_end. As numpy's
   searchsorted gives them: lo = the first launch with start >= range start, hi = the first with start > range end;
   the count is hi - lo and the total the sum over [lo, hi) (negated over [hi, lo) when a range ends before it
   starts). Returns 0, or NSK_BAD when the launches are not in that order or a row is out of range. */
int nsk_project(int64_t ranges, const int64_t *thread, const int64_t *start, const int64_t *end, int64_t launches,
                const int64_t *launch_thread, const int64_t *launch_start, const int64_t *launch_kernel,
                int64_t kernels, const int64_t *kernel_start, const int64_t *kernel_end, const uint8_t *only,
                int64_t *count, int64_t *total, int64_t *first, int64_t *last) {
    int64_t i, j, kept = 0, block_thread = 0, block_lo = 0, block_hi = 0, have_block = 0;
    int64_t previous_lo = 0, previous_start = INT64_MIN, work = 0, blocks;
    const int64_t *l_thread, *l_start, *l_kernel;
    int64_t *copies = NULL, *summary = NULL;
    if (ranges < 0 || launches < 0 || kernels < 0) return NSK_BAD;
    for (j = 0; j < launches; j++) {
        if (launch_kernel[j] < 0 || launch_kernel[j] >= kernels) return NSK_BAD;
        if (j && (launch_thread[j] < launch_thread[j - 1] ||
                  (launch_thread[j] == launch_thread[j - 1] && launch_start[j] < launch_start[j - 1])))
            return NSK_BAD;
    }
    /* with a mask: the kept launches copied apart (few: NCCL's); without: read in place (no new pages to touch) */
    if (only) {
        for (j = 0; j < launches; j++) kept += only[launch_kernel[j]] != 0;
        copies = (int64_t *)malloc((size_t)(kept + 1) * 3 * sizeof(int64_t));
        if (!copies) return NSK_NO_MEMORY;
        for (i = 0, j = 0; j < launches; j++) {
            if (!only[launch_kernel[j]]) continue;
            copies[i] = launch_thread[j];
            copies[kept + 1 + i] = launch_start[j];
            copies[2 * (kept + 1) + i] = launch_kernel[j];
            i++;
        }
        l_thread = copies, l_start = copies + kept + 1, l_kernel = copies + 2 * (kept + 1);
    } else {
        kept = launches;
        l_thread = launch_thread, l_start = launch_start, l_kernel = launch_kernel;
    }
    /* first pass: each range's launches [lo, hi); lo is kept in first[i] until the second pass */
    for (i = 0; i < ranges; i++) {
        int64_t lo, hi;
        if (!have_block || thread[i] != block_thread) { /* the range's thread's launches: one slice */
            block_lo = search(l_thread, 0, kept, thread[i], 0);
            block_hi = search(l_thread, block_lo, kept, thread[i], 1);
            block_thread = thread[i];
            have_block = 1;
            previous_lo = block_lo, previous_start = INT64_MIN;
        }
        /* the first call starting at or after the start: past the previous range's when this one starts later */
        lo = start[i] >= previous_start ? search_from(l_start, previous_lo, block_hi, start[i], 0)
                                        : search(l_start, block_lo, block_hi, start[i], 0);
        /* the first call starting after the end: past lo when the range ends at or after its start */
        hi = end[i] >= start[i] ? search_from(l_start, lo, block_hi, end[i], 1) : search(l_start, block_lo, lo, end[i], 1);
        previous_lo = lo, previous_start = start[i];
        count[i] = hi - lo;
        first[i] = lo;
        work += hi > lo ? hi - lo : lo - hi;
    }
    /* ranges nest (a step holds every launch of its forward and backward): when they hold each launch several times
       over, whole blocks of launches are summed once each and every range reads its blocks, not their launches */
    if (work > 2 * kept && kept >= 2 * BLOCK) {
        blocks = (kept + BLOCK - 1) / BLOCK;
        summary = (int64_t *)malloc((size_t)blocks * 3 * sizeof(int64_t));
        if (!summary) {
            free(copies);
            return NSK_NO_MEMORY;
        }
        for (j = 0; j < blocks; j++) {
            Span span = launch_span(l_kernel, kernel_start, kernel_end, j * BLOCK,
                                    (j + 1) * BLOCK < kept ? (j + 1) * BLOCK : kept);
            summary[3 * j] = span.sum, summary[3 * j + 1] = span.low_start, summary[3 * j + 2] = span.high_end;
        }
    }
    /* second pass: each range's total, first start and last end */
    for (i = 0; i < ranges; i++) {
        int64_t lo = first[i], hi = lo + count[i];
        Span span;
        if (hi > lo) {
            span = summary ? block_span(l_kernel, kernel_start, kernel_end, summary, lo, hi)
                           : launch_span(l_kernel, kernel_start, kernel_end, lo, hi);
            total[i] = span.sum;
            first[i] = span.low_start;
            last[i] = span.high_end;
        } else {
            span = hi < lo ? (summary ? block_span(l_kernel, kernel_start, kernel_end, summary, hi, lo)
                                      : launch_span(l_kernel, kernel_start, kernel_end, hi, lo))
                           : (Span){0, 0, 0};
            total[i] = -span.sum;
            first[i] = -1;
            last[i] = -1;
        }
    }
    free(summary);
    free(copies);
    return 0;
}
