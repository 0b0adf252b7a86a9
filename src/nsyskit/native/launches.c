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
    const int64_t *l_thread, *l_start, *l_kernel;
    int64_t *copies = NULL;
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
    for (i = 0; i < ranges; i++) {
        int64_t lo, hi, sum = 0, low_start = 0, high_end = 0;
        if (!have_block || thread[i] != block_thread) { /* the range's thread's launches: one slice */
            block_lo = search(l_thread, 0, kept, thread[i], 0);
            block_hi = search(l_thread, block_lo, kept, thread[i], 1);
            block_thread = thread[i];
            have_block = 1;
        }
        lo = search(l_start, block_lo, block_hi, start[i], 0); /* the first call starting at or after the start */
        hi = search(l_start, block_lo, block_hi, end[i], 1);   /* the first call starting after the end */
        count[i] = hi - lo;
        if (hi > lo) {
            low_start = kernel_start[l_kernel[lo]], high_end = kernel_end[l_kernel[lo]];
            for (j = lo; j < hi; j++) {
                int64_t s = kernel_start[l_kernel[j]], e = kernel_end[l_kernel[j]];
                sum += e - s;
                if (s < low_start) low_start = s;
                if (e > high_end) high_end = e;
            }
            total[i] = sum;
            first[i] = low_start;
            last[i] = high_end;
        } else {
            for (j = hi; j < lo; j++) sum += kernel_end[l_kernel[j]] - kernel_start[l_kernel[j]];
            total[i] = -sum;
            first[i] = -1;
            last[i] = -1;
        }
    }
    free(copies);
    return 0;
}
