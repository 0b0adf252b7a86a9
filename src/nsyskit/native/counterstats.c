/* The counters' statistics and time bins in C (see nsyskit/native/counterstats.py and
   nsyskit/analysis/compute/counters.py), where numpy makes several passes and temporaries per series: a series'
   weighted quantiles of whole-number values by counting and its time-weighted sums; per time bin the integral and the
   max of every series sharing their times, in one walk over the samples; how much of each sample a union covers.

   The results are numpy's, bit for bit: the same sums in the same order (bincount and cumsum add in index order, sum
   pairwise; a product is rounded before it is added, so no fused multiply-add), or integer sums where every sum is
   exact in any order; the same searches (searchsorted); the same ties of a max (an earlier value kept). No globals:
   callers may run them in threads. */
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

/* first_at_least of the array before + cumulative[k] (numpy: before + cumsum(...), then searchsorted), each sum
   rounded as numpy rounds it (the sums rise with k: rounding keeps their order). */
static int64_t first_after(const double *cumulative, int64_t size, double before, double target) {
    int64_t low = 0, high = size;
    while (low < high) {
        int64_t middle = low + (high - low) / 2;
        if (before + cumulative[middle] < target) low = middle + 1;
        else high = middle;
    }
    return low;
}

/* Integer tallies (`exact`: whole weights whose total is below 2^52, each sum exact whatever the order) or sums in
   numpy's order (bincount's: index order) of the weights per key, then their running sum into cumulative[0..size). */
typedef struct {
    int64_t size, ways, *whole; /* whole: `ways` interleaved integer tallies per key (a repeated key waits less) */
    double *sums;
} Tally;

static int open_tally(Tally *tally, int64_t size, int64_t ways, int exact) {
    tally->size = size, tally->ways = ways;
    tally->whole = exact ? (int64_t *)calloc((size_t)(size * ways), sizeof(int64_t)) : NULL;
    tally->sums = exact ? NULL : (double *)calloc((size_t)size, sizeof(double));
    return exact ? tally->whole != NULL : tally->sums != NULL;
}

static inline void add(Tally *tally, int64_t key, int64_t i, double weight) {
    if (tally->whole) tally->whole[key * tally->ways + (i & (tally->ways - 1))] += (int64_t)weight;
    else tally->sums[key] += weight;
}

/* np.cumsum(np.bincount(...)) of the tally into cumulative[0..size) (exact sums: the integers' running sum is
   numpy's), then freed. */
static void close_tally(Tally *tally, double *cumulative) {
    int64_t k, w, total = 0;
    for (k = 0; k < tally->size; k++) {
        if (tally->whole) {
            for (w = 0; w < tally->ways; w++) total += tally->whole[k * tally->ways + w];
            cumulative[k] = (double)total;
        } else {
            cumulative[k] = k ? cumulative[k - 1] + tally->sums[k] : tally->sums[k];
        }
    }
    free(tally->whole), free(tally->sums);
    tally->whole = NULL, tally->sums = NULL;
}

/* 1 where the n weights are whole numbers whose total is below 2^52 (each sum of some of them exact, whatever the
   order: they may be tallied as integers), else 0. Four sums of the weights in flight: a total at or past 2^52, or
   close below it, rounds to no less than 2^52 in any order. */
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

#define MAX_QS 8

/* For each of qs[0..nq) (nq <= 8): the smallest value below which at least q of the weight lies, into found[], for
   n > 0 values spanning [low, high] (their min and max, low < high, high - low < 2^32) with time weights (`exact`:
   nsk_exact_weights' answer for them), as counters._quantiles counts them: whole numbers of 0..65535 per value,
   others per block of 2^16 values, then inside the block each q falls in (numpy: before + cumsum(bincount(offset[inside]
   & 0xFFFF, weights[inside]))). Whether each value is whole is asked of its key: (double)key == value only for a
   whole number (key: the value, or its offset from low, converted to an integer). Returns 0, NSK_NOT_WHOLE, or
   NSK_BAD (no memory, a value outside [low, high], too many qs). */
int nsk_quantiles(int64_t n, const double *value, const double *weight, int exact, double low, double high,
                  int64_t nq, const double *qs, double *found) {
    int64_t i, q, r, size, at[MAX_QS], top[MAX_QS], runs = 0, run_of[MAX_QS], length[MAX_QS];
    double *cumulative, *within[MAX_QS] = {NULL};
    Tally tally, inside[MAX_QS];
    int small = low >= 0 && high < SMALL_INTEGERS, outside = 0, part = fraction(fabs(low)), done = NSK_BAD;
    if (n <= 0 || nq < 0 || nq > MAX_QS || !(low < high) || !(high - low < WIDE_INTEGERS)) return NSK_BAD;
    size = small ? (int64_t)high + 1 : ((int64_t)(high - low) >> BLOCK_BITS) + 1; /* bincount: largest key + 1 */
    cumulative = (double *)malloc(sizeof(double) * (size_t)size);
    if (!cumulative || !open_tally(&tally, size, 4, exact)) {
        free(cumulative);
        return NSK_BAD;
    }
    for (i = 0; i < n; i++) { /* one pass: each value's key tallied, whether it is whole asked of it */
        double v = value[i];
        int64_t key;
        if (!(v >= low && v <= high)) { /* (NaN too): no key */
            outside = 1;
            continue;
        }
        key = small ? (int64_t)v : (int64_t)(v - low);
        part |= small ? (double)key != v : (double)key + low != v;
        add(&tally, small ? key : key >> BLOCK_BITS, i, weight[i]);
    }
    close_tally(&tally, cumulative);
    if (outside || part) {
        free(cumulative);
        return outside ? NSK_BAD : NSK_NOT_WHOLE;
    }
    for (q = 0; q < nq; q++) { /* the value (small) or the block where each q falls; the blocks, each once */
        at[q] = first_at_least(cumulative, size, qs[q] * cumulative[size - 1]);
        for (r = 0; r < runs && at[run_of[r]] != at[q]; r++) continue;
        if (r == runs) run_of[runs++] = q;
        top[q] = r; /* which of the blocks (runs) q looks into */
    }
    if (small) {
        for (q = 0; q < nq; q++) found[q] = (double)at[q];
        done = 0;
        goto out;
    }
    for (r = 0; r < runs; r++) inside[r].whole = NULL, inside[r].sums = NULL, length[r] = 0;
    for (r = 0; r < runs; r++)
        if (!(within[r] = (double *)malloc(sizeof(double) << BLOCK_BITS)) ||
            !open_tally(&inside[r], (int64_t)1 << BLOCK_BITS, 1, exact)) /* (one way: 2^16 keys) */
            goto out_inside;
    for (i = 0; i < n; i++) {
        int64_t offset = (int64_t)(value[i] - low);
        for (r = 0; r < runs; r++)
            if ((offset >> BLOCK_BITS) == at[run_of[r]]) {
                add(&inside[r], offset & 0xFFFF, i, weight[i]);
                if ((offset & 0xFFFF) + 1 > length[r]) length[r] = (offset & 0xFFFF) + 1;
            }
    }
    for (r = 0; r < runs; r++) inside[r].size = length[r]; /* bincount's length: the largest key + 1 (0: none) */
    for (r = 0; r < runs; r++) close_tally(&inside[r], within[r]);
    for (q = 0; q < nq; q++) {
        double target = qs[q] * cumulative[size - 1], before = at[q] ? cumulative[at[q] - 1] : 0.0;
        found[q] = low + (double)(at[q] << BLOCK_BITS) + (double)first_after(within[top[q]], length[top[q]], before,
                                                                                target);
    }
    done = 0;
    goto out;
out_inside:
    for (r = 0; r < runs; r++) free(inside[r].whole), free(inside[r].sums);
out:
    for (r = 0; r < MAX_QS; r++) free(within[r]);
    free(cumulative);
    return done;
}

/* For `series` series of n samples sharing their times (values[s][i]: series s's value of sample i; weight[i]: the
   time sample i holds), sample after sample (the series' running sums interleaved: no wait on one sum's additions):
   - integral[s * m + j] for each of the m points the samples before which number marks[j] (nondecreasing, 0..n),
     the last of them holding on for tail[j] past the point: the integral of series s up to the point as
     counters._Clipped.integral finds it, np.cumsum's element marks[j] - 1 (0 for none) less value x tail of that
     last sample;
   - highest[s * bins + b] for each of `bins` bins: the max of series s's values of the samples that overlap bin b
     (sample i overlaps bins first[i] .. first[i] + spans[i] - 1), -inf where none does.
   Returns 0, or NSK_BAD (a mark or bin out of order or range, a NaN value, no memory). */
int nsk_bin_walk(int64_t series, const double *const *values, int64_t n, const double *weight, int64_t m,
                 const int64_t *marks, const int64_t *tail, double *integral, int64_t bins, const int64_t *first,
                 const int64_t *spans, double *highest) {
    int64_t i, j, b, s, t;
    double *spare;
    for (j = 0; j < m; j++)
        if (marks[j] < (j ? marks[j - 1] : 0) || marks[j] > n) return NSK_BAD;
    for (i = 0; i < n; i++)
        if (first[i] < 0 || spans[i] < 0 || first[i] > bins - spans[i]) return NSK_BAD;
    spare = (double *)malloc(sizeof(double) * (size_t)(bins > 0 ? bins : 1));
    if (!spare) return NSK_BAD;
    for (s = 0; s < series; s += 4) { /* four series at once: their sums and maxima in flight together */
        const double *v[4];
        double *top[4], sum[4] = {0.0, 0.0, 0.0, 0.0};
        double run[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}; /* the max of the run of samples in bin `at` */
        int64_t at = -1;
        int nan = 0;
        for (t = 0; t < 4; t++) {
            v[t] = values[s + t < series ? s + t : s];
            top[t] = s + t < series ? highest + (s + t) * bins : spare; /* (past the last: computed, not kept) */
            for (b = 0; b < bins; b++) top[t][b] = -INFINITY;
        }
        for (i = 0, j = 0; i < n; i++) {
            double x0 = v[0][i], x1 = v[1][i], x2 = v[2][i], x3 = v[3][i], w = weight[i];
            double p0 = x0 * w, p1 = x1 * w, p2 = x2 * w, p3 = x3 * w;
            for (; j < m && marks[j] == i; j++)
                for (t = 0; t < 4 && s + t < series; t++) integral[(s + t) * m + j] = i ? sum[t] : 0.0;
            if (i) sum[0] = sum[0] + p0, sum[1] = sum[1] + p1, sum[2] = sum[2] + p2, sum[3] = sum[3] + p3;
            else sum[0] = p0, sum[1] = p1, sum[2] = p2, sum[3] = p3; /* cumsum's first element: the product */
            nan |= (x0 != x0) | (x1 != x1) | (x2 != x2) | (x3 != x3);
            if (spans[i] == 1 && first[i] == at) { /* (a later equal value leaves the earlier: numpy's maximum) */
                run[0] = x0 > run[0] ? x0 : run[0], run[1] = x1 > run[1] ? x1 : run[1];
                run[2] = x2 > run[2] ? x2 : run[2], run[3] = x3 > run[3] ? x3 : run[3];
                continue;
            }
            for (t = 0; t < 4 && at >= 0; t++)
                if (run[t] > top[t][at]) top[t][at] = run[t];
            at = -1;
            if (spans[i] == 1) {
                at = first[i], run[0] = x0, run[1] = x1, run[2] = x2, run[3] = x3;
                continue;
            }
            for (t = 0; t < 4; t++)
                for (b = first[i]; b < first[i] + spans[i]; b++)
                    if (v[t][i] > top[t][b]) top[t][b] = v[t][i];
        }
        for (; j < m; j++) /* (the marks at n) */
            for (t = 0; t < 4 && s + t < series; t++) integral[(s + t) * m + j] = n ? sum[t] : 0.0;
        for (t = 0; t < 4 && at >= 0; t++)
            if (run[t] > top[t][at]) top[t][at] = run[t];
        if (nan) {
            free(spare);
            return NSK_BAD;
        }
    }
    free(spare);
    for (s = 0; s < series; s++) /* less the part of each point's last sample past the point (numpy's order) */
        for (j = 0; j < m; j++)
            integral[s * m + j] = integral[s * m + j] - (marks[j] > 0 ? values[s][marks[j] - 1] : 0.0) * (double)tail[j];
    return 0;
}

/* The first k of sorted[0..m) with sorted[k] > t, else m (numpy's searchsorted, side right), looked for from `hint`
   (the last answer: spans in time order find theirs a step or two on, in one walk over the union). */
static int64_t first_above(const int64_t *sorted, int64_t m, int64_t t, int64_t hint) {
    int64_t low = hint, high = hint, step = 1;
    if (hint > 0 && sorted[hint - 1] > t) { /* t lies before the hint: below it */
        low = 0;
    } else { /* at or past it: bounds doubling up from it */
        while (high < m && sorted[high] <= t) low = high + 1, high += step, step *= 2;
        if (high > m) high = m;
    }
    while (low < high) {
        int64_t middle = low + (high - low) / 2;
        if (sorted[middle] <= t) low = middle + 1;
        else high = middle;
    }
    return low;
}

/* For each of n spans [start[i], end[i]): how much of it the m disjoint intervals [union_start, union_end) (sorted)
   cover, as intervals.covered finds it (the union's length before the end less that before the start), into out[i]
   (whole ns as doubles). Returns 0, or NSK_BAD (the union not sorted by start, no memory). */
int nsk_covered(int64_t m, const int64_t *union_start, const int64_t *union_end, int64_t n, const int64_t *start,
                const int64_t *end, double *out) {
    int64_t i, k, at_start = 0, at_end = 0, *total = (int64_t *)malloc(sizeof(int64_t) * (size_t)(m + 1));
    if (!total) return NSK_BAD;
    total[0] = 0;
    for (k = 0; k < m; k++) {
        if (k && union_start[k] < union_start[k - 1]) {
            free(total);
            return NSK_BAD;
        }
        total[k + 1] = total[k] + (union_end[k] - union_start[k]);
    }
    for (i = 0; i < n; i++) {
        int64_t before_start, before_end, beyond;
        at_start = first_above(union_start, m, start[i], at_start);
        beyond = at_start > 0 ? union_end[at_start - 1] - start[i] : 0;
        before_start = total[at_start] - (beyond > 0 ? beyond : 0);
        at_end = first_above(union_start, m, end[i], at_end);
        beyond = at_end > 0 ? union_end[at_end - 1] - end[i] : 0;
        before_end = total[at_end] - (beyond > 0 ? beyond : 0);
        out[i] = (double)(before_end - before_start);
    }
    free(total);
    return 0;
}

#define PAIRWISE_BLOCK 128 /* numpy's PW_BLOCKSIZE */
#define MAX_PRODUCTS 4

/* out[t] := the sum of the products value[i] x weight[t][i] for i in [from, from + n), added in numpy's pairwise order
   (its sum of a float64 array: eight running sums over blocks of up to 128 values, halves of longer runs added), for
   each of k <= MAX_PRODUCTS weight arrays at once. */
static void pairwise(const double *value, const double *const *weight, int k, int64_t from, int64_t n, double *out) {
    int64_t i;
    int t, j;
    if (n < 8) {
        for (t = 0; t < k; t++) {
            double sum = 0.0;
            for (i = from; i < from + n; i++) sum += value[i] * weight[t][i];
            out[t] = sum;
        }
    } else if (n <= PAIRWISE_BLOCK) {
        for (t = 0; t < k; t++) {
            double r[8], sum;
            for (j = 0; j < 8; j++) r[j] = value[from + j] * weight[t][from + j];
            for (i = 8; i < n - (n % 8); i += 8)
                for (j = 0; j < 8; j++) r[j] += value[from + i + j] * weight[t][from + i + j];
            sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
            for (; i < n; i++) sum += value[from + i] * weight[t][from + i];
            out[t] = sum;
        }
    } else {
        double left[MAX_PRODUCTS], right[MAX_PRODUCTS];
        int64_t half = n / 2;
        half -= half % 8;
        pairwise(value, weight, k, from, half, left);
        pairwise(value, weight, k, from + half, n - half, right);
        for (t = 0; t < k; t++) out[t] = left[t] + right[t];
    }
}

/* For each of k <= 4 weight arrays: (value x weight[t]).sum() as numpy gives it (0.0 plus the pairwise sum of the
   products, each rounded before it is added), without the array of products. Returns 0, or NSK_BAD (k out of range). */
int nsk_weighted_sums(int64_t n, const double *value, int64_t k, const double *const *weight, double *out) {
    int t;
    if (k < 1 || k > MAX_PRODUCTS || n < 0) return NSK_BAD;
    pairwise(value, weight, (int)k, 0, n, out);
    for (t = 0; t < k; t++) out[t] = 0.0 + out[t];
    return 0;
}
