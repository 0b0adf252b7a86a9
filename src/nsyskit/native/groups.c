/* Values grouped by a small integer key, for the duration statistics per kernel name (see nsyskit/native/groups.py).

   numpy groups a million durations by a radix argsort of the keys and a gather (three passes, two new arrays) and
   finds each group's median by one np.partition call per group; these do it in two passes and one selection per
   group. The results are exactly numpy's: the same grouped order (stable), the same middle values. No globals:
   callers run them in threads. */
#include <stdint.h>
#include <string.h>

#define NSK_BAD (-1) /* an input this code does not take (the caller uses numpy) */

/* A stable counting sort: the values whose key is k (0 <= k < span), in their order, land at
   out[first[k] .. first[k + 1]); `first` has span + 1 entries. Returns 0, or NSK_BAD for a key outside [0, span). */
int nsk_group(int64_t count, const int64_t *keys, const int64_t *values, int64_t span, int64_t *first, int64_t *out) {
    int64_t i, k, total = 0;
    memset(first, 0, (size_t)(span + 1) * sizeof(int64_t));
    for (i = 0; i < count; i++) {
        if (keys[i] < 0 || keys[i] >= span) return NSK_BAD;
        first[keys[i] + 1]++;
    }
    for (k = 0; k <= span; k++) { /* counts -> where each group begins */
        total += first[k];
        first[k] = total;
    }
    for (i = 0; i < count; i++) out[first[keys[i]]++] = values[i]; /* first[k] moves on to where group k ends */
    memmove(first + 1, first, (size_t)span * sizeof(int64_t));      /* the end of group k is where k + 1 begins */
    first[0] = 0;
    return 0;
}

/* The k-th smallest of values[0 .. n) (n > k >= 0), reordering them (Hoare's selection; the middle element as pivot,
   so sorted input is not the worst case). */
static int64_t select_kth(int64_t *values, int64_t n, int64_t k) {
    int64_t low = 0, high = n - 1;
    while (low < high) {
        int64_t pivot = values[low + (high - low) / 2], i = low, j = high;
        while (i <= j) {
            while (values[i] < pivot) i++;
            while (values[j] > pivot) j--;
            if (i <= j) {
                int64_t swap = values[i];
                values[i++] = values[j];
                values[j--] = swap;
            }
        }
        if (k <= j) high = j;
        else if (k >= i) low = i;
        else return values[k];
    }
    return values[k];
}

/* For each of `groups` groups of `grouped` (group g: `counts[g]` values from `firsts[g]`, counts > 0): its two middle
   values, the ((count - 1) / 2)-th and (count / 2)-th smallest, into low[g] and high[g]. `scratch` holds as many
   values as the largest group (`grouped` is left as it is). Returns 0, or NSK_BAD for a group outside `total`. */
int nsk_middles(int64_t groups, const int64_t *firsts, const int64_t *counts, const int64_t *grouped, int64_t total,
                int64_t *scratch, int64_t *low, int64_t *high) {
    int64_t g, i;
    for (g = 0; g < groups; g++) {
        int64_t n = counts[g], a = (n - 1) / 2, b = n / 2;
        if (n <= 0 || firsts[g] < 0 || firsts[g] > total - n) return NSK_BAD;
        memcpy(scratch, grouped + firsts[g], (size_t)n * sizeof(int64_t));
        low[g] = select_kth(scratch, n, a);
        if (b == a) {
            high[g] = low[g];
        } else { /* after selecting the a-th, the values past it are those >= it: the b-th (= a + 1) is their least */
            int64_t least = scratch[b];
            for (i = b + 1; i < n; i++)
                if (scratch[i] < least) least = scratch[i];
            high[g] = least;
        }
    }
    return 0;
}
