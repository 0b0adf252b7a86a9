/* One series' passes of the counters' statistics and time bins (see nsyskit/native/counterstats.py and
   nsyskit/analysis/compute/counters.py): the weighted quantiles of whole-number values by counting, and per time bin
   the running sum of value x time and the max, in one walk over the samples for every series sharing their times,
   where numpy makes several passes and temporaries per series.

   The results are numpy's, bit for bit: the same sums in the same order (bincount and cumsum add in index order; a
   product is rounded before it is added, so no fused multiply-add), the same searches (searchsorted, side left), the
   same ties of a max (an earlier value kept). No globals: callers may run them in threads. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define NSK_NOT_WHOLE 1 /* a value that is not a whole number: the caller sorts (numpy) */
#define NSK_BAD (-1)    /* an input this code does not take (the caller uses numpy) */
#define SMALL_INTEGERS 65536.0
#define WIDE_INTEGERS 4294967296.0
#define BLOCK_BITS 16
#define ALL_WHOLE 4503599627370496.0 /* 2^52: every double this large is a whole number */

/* Whether a (>= 0) is not a whole number, without a branch or a call to floor (x86-64's baseline has no instruction
   for it): below 2^52, adding 2^52 rounds it to a whole number, exactly undone by the subtraction only if it was
   one. */
static int fraction(double a) {
    return !(a >= ALL_WHOLE) & ((a + ALL_WHOLE) - ALL_WHOLE != a);
}

/* The first i of cumulative[0..size) with cumulative[i] >= target, else size (numpy's searchsorted, side left). */
static int64_t first_at_least(const double *cumulative, int64_t size, double target) {
    int64_t low = 0, high = size;
    while (low < high) {
        int64_t middle = low + (high - low) / 2;
        if (cumulative[middle] < target) low = middle + 1;
        else high = middle;
    }
    return low;
}

/* The key sample i is counted under (None: not counted): its value (BY_VALUE), its offset from low's block of 2^16
   (BY_BLOCK), or its offset inside block `at` for the samples in that block (IN_BLOCK). No array of keys: none to
   fault in. */
enum { BY_VALUE, BY_BLOCK, IN_BLOCK };
#define KEY(kind, v, low, at)                                                                                         \
    ((kind) == BY_VALUE ? (int64_t)(v)                                                                               \
     : (kind) == BY_BLOCK ? ((int64_t)((v) - (low)) >> BLOCK_BITS)                                                   \
     : (((int64_t)((v) - (low)) >> BLOCK_BITS) == (at) ? ((int64_t)((v) - (low)) & 0xFFFF) : -1))

/* cumulative[0..size) := np.cumsum(np.bincount(keys, weights, minlength=size)) of the samples' keys (KEY; every key
   below size): with `exact` (whole weights whose total is below 2^52: each sum exact, whatever the order) in four
   interleaved integer tallies per key (no wait on a key's last addition: counters repeat values), else in numpy's
   order. 0, or NSK_BAD (no memory). */
static int counted(int64_t n, const double *value, const double *weight, int kind, double low, int64_t at, int exact,
                   int64_t size, double *cumulative) {
    int64_t i, k, key, total = 0;
    if (!exact) {
        for (k = 0; k < size; k++) cumulative[k] = 0.0;
        for (i = 0; i < n; i++)
            if ((key = KEY(kind, value[i], low, at)) >= 0) cumulative[key] += weight[i];
        for (k = 1; k < size; k++) cumulative[k] = cumulative[k - 1] + cumulative[k];
        return 0;
    }
    {
        int64_t *tally = (int64_t *)calloc((size_t)size * 4, sizeof(int64_t));
        if (!tally) return NSK_BAD;
        for (i = 0; i < n; i++)
            if ((key = KEY(kind, value[i], low, at)) >= 0) tally[key * 4 + (i & 3)] += (int64_t)weight[i];
        for (k = 0; k < size; k++) {
            total += tally[k * 4] + tally[k * 4 + 1] + tally[k * 4 + 2] + tally[k * 4 + 3];
            cumulative[k] = (double)total;
        }
        free(tally);
        return 0;
    }
}

/* 1 where the n weights are whole numbers whose total is below 2^52 (each sum of some of them exact, whatever the
   order: counted() may tally them as integers), else 0. Four sums of the weights in flight: a total at or past 2^52,
   or close below it, rounds to no less than 2^52 in any order. */
int nsk_exact_weights(int64_t n, const double *weight) {
    int64_t i;
    int inexact = 0;
    double total[4] = {0.0, 0.0, 0.0, 0.0};
    for (i = 0; i + 4 <= n; i += 4) {
        double a = weight[i], b = weight[i + 1], c = weight[i + 2], d = weight[i + 3];
        inexact |= !(a >= 0) | !(b >= 0) | !(c >= 0) | !(d >= 0) | fraction(a) | fraction(b) | fraction(c) | fraction(d);
        total[0] += a, total[1] += b, total[2] += c, total[3] += d;
    }
    for (; i < n; i++) {
        inexact |= (!(weight[i] >= 0)) | fraction(weight[i]);
        total[0] += weight[i];
    }
    return !inexact && (total[0] + total[1]) + (total[2] + total[3]) < ALL_WHOLE;
}

/* For each of qs[0..nq): the smallest value below which at least q of the weight lies, into found[], for n > 0
   values spanning [low, high] (their min and max, low < high, high - low < 2^32) with time weights (`exact`:
   nsk_exact_weights' answer for them), as
   counters._quantiles counts them: whole numbers of 0..65535 per value, others per block of 2^16 values then inside
   the block each q falls in (numpy: before + cumsum(bincount(offset[inside] & 0xFFFF, weights[inside]))).
   Returns 0, NSK_NOT_WHOLE, or NSK_BAD (no memory, a value outside [low, high]). */
int nsk_quantiles(int64_t n, const double *value, const double *weight, int exact, double low, double high,
                  int64_t nq, const double *qs, double *found) {
    int64_t i, q, size;
    double *cumulative, *within = NULL;
    int small = low >= 0 && high < SMALL_INTEGERS, outside = 0, part = 0, done = NSK_BAD;
    if (n <= 0 || !(low < high) || !(high - low < WIDE_INTEGERS)) return NSK_BAD;
    for (i = 0; i < n; i++) { /* flags gathered without a branch */
        double v = value[i];
        outside |= !(v >= low) | !(v <= high); /* (NaN too) */
        part |= fraction(fabs(v));
    }
    if (outside) return NSK_BAD;
    if (part) return NSK_NOT_WHOLE;
    size = small ? (int64_t)high + 1 : ((int64_t)(high - low) >> BLOCK_BITS) + 1; /* bincount: largest key + 1 */
    cumulative = (double *)malloc(sizeof(double) * (size_t)size);
    if (!cumulative || (!small && !(within = (double *)malloc(sizeof(double) * 65536)))) goto out;
    if (counted(n, value, weight, small ? BY_VALUE : BY_BLOCK, low, 0, exact, size, cumulative)) goto out;
    for (q = 0; q < nq; q++) {
        double target = qs[q] * cumulative[size - 1];
        int64_t at = first_at_least(cumulative, size, target), top = 0, key;
        if (small) {
            found[q] = (double)at;
            continue;
        }
        for (i = 0; i < n; i++) /* bincount's length: the largest key inside the block + 1 (0 where it holds none) */
            if ((key = KEY(IN_BLOCK, value[i], low, at)) >= top) top = key + 1;
        if (counted(n, value, weight, IN_BLOCK, low, at, exact, top, within)) goto out;
        for (i = 0; i < top; i++) within[i] = (at ? cumulative[at - 1] : 0.0) + within[i];
        found[q] = low + (double)(at << BLOCK_BITS) + (double)first_at_least(within, top, target);
    }
    done = 0;
out:
    free(cumulative), free(within);
    return done;
}

/* For `series` series of n samples sharing their times (values[s][i]: series s's value of sample i; weight[i]: the
   time sample i holds), sample after sample (the series' running sums interleaved: no wait on one sum's additions):
   - prefix[s * m + j] for each of the m sample counts marks[j] (nondecreasing, 0..n): the sum of series s's first
     marks[j] products value x weight added one after the other (np.cumsum's element marks[j] - 1), 0 for none;
   - highest[s * bins + b] for each of `bins` bins: the max of series s's values of the samples that overlap bin b
     (sample i overlaps bins first[i] .. first[i] + spans[i] - 1), -inf where none does.
   Returns 0, or NSK_BAD (a mark or bin out of order or range, a NaN value, no memory). */
int nsk_bin_walk(int64_t series, const double *const *values, int64_t n, const double *weight, int64_t m,
                 const int64_t *marks, double *prefix, int64_t bins, const int64_t *first, const int64_t *spans,
                 double *highest) {
    int64_t i, j, b, s, t;
    for (j = 0; j < m; j++)
        if (marks[j] < (j ? marks[j - 1] : 0) || marks[j] > n) return NSK_BAD;
    for (i = 0; i < n; i++)
        if (first[i] < 0 || spans[i] < 0 || first[i] > bins - spans[i]) return NSK_BAD;
    for (s = 0; s < series; s += 4) { /* four series at once: four running sums in flight */
        const double *v[4];
        double sum[4] = {0.0, 0.0, 0.0, 0.0};
        for (t = 0; t < 4; t++) v[t] = values[s + t < series ? s + t : s]; /* (past the last: computed, not kept) */
        for (i = 0, j = 0; j < m; j++) {
            if (i == 0 && marks[j] > 0) { /* cumsum's first element: the first product itself */
                for (t = 0; t < 4; t++) sum[t] = v[t][0] * weight[0];
                i = 1;
            }
            for (; i < marks[j]; i++) {
                double w = weight[i], p0 = v[0][i] * w, p1 = v[1][i] * w, p2 = v[2][i] * w, p3 = v[3][i] * w;
                sum[0] = sum[0] + p0, sum[1] = sum[1] + p1, sum[2] = sum[2] + p2, sum[3] = sum[3] + p3;
            }
            for (t = 0; t < 4 && s + t < series; t++) prefix[(s + t) * m + j] = i ? sum[t] : 0.0;
        }
    }
    for (s = 0; s < series; s++) {
        const double *v = values[s];
        double *top = highest + s * bins, run = -INFINITY; /* the max of the run of samples inside bin `at` alone */
        int64_t at = -1;
        for (b = 0; b < bins; b++) top[b] = -INFINITY;
        for (i = 0; i < n; i++) {
            if (v[i] != v[i]) return NSK_BAD;
            if (spans[i] == 1 && first[i] == at) { /* (a later equal value leaves the earlier: numpy's maximum) */
                if (v[i] > run) run = v[i];
                continue;
            }
            if (at >= 0 && run > top[at]) top[at] = run;
            at = -1;
            if (spans[i] == 1) {
                at = first[i], run = v[i];
                continue;
            }
            for (b = first[i]; b < first[i] + spans[i]; b++)
                if (v[i] > top[b]) top[b] = v[i];
        }
        if (at >= 0 && run > top[at]) top[at] = run;
    }
    return 0;
}
