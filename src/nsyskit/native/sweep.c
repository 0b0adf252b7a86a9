/* Union lengths of GPU activity categories in one sweep (see sweep.py): the breakdown's numbers without building a
   merged interval set per pair. No globals: callers may run it in threads.

   Input: `streams` interval lists, each sorted by start (start[i] <= start[i+1]), each with a category bit (1 compute,
   2 communication, 4 memory; several lists may share a bit), or, where kinds[k] is not NULL, a bit per interval
   (kernels: compute or communication by name, without splitting the list). Intervals with end <= start are left out, as the numpy
   unions leave them. Output: out[mask] for every mask 1..7, the length of the union of the intervals whose category
   is in the mask. Returns 0, or -1 when a list is not sorted by start (the caller then sorts it or uses numpy). */
#include <stdint.h>

#define MAX_STREAMS 8

int nsk_union_lengths(int64_t streams, const int64_t *const *starts, const int64_t *const *ends, const int64_t *counts,
                      const int64_t *categories, const uint8_t *const *kinds, int64_t *out) {
    int64_t at[MAX_STREAMS] = {0};
    int64_t seg_start[8] = {0}, reach[8] = {0};
    int active[8] = {0};
    int8_t masks_of[8][8]; /* per category: the masks that contain it, -1 ended */
    int64_t k, mask;
    for (k = 1; k < 8; k++) {
        int n = 0;
        for (mask = 1; mask < 8; mask++)
            if (mask & k) masks_of[k][n++] = (int8_t)mask;
        masks_of[k][n] = -1;
    }
    if (streams < 1 || streams > MAX_STREAMS) return -1;
    for (k = 0; k < streams; k++) {
        int64_t i;
        if (categories[k] < 1 || categories[k] > 7 || counts[k] < 0) return -1;
        for (i = 1; i < counts[k]; i++)
            if (starts[k][i] < starts[k][i - 1]) return -1;
        if (kinds[k])
            for (i = 0; i < counts[k]; i++)
                if (kinds[k][i] < 1 || kinds[k][i] > 7) return -1;
    }
    for (mask = 0; mask < 8; mask++) out[mask] = 0;
    for (;;) {
        int64_t best = -1, s, e, category, j;
        for (j = 0; j < streams; j++) /* the list whose next interval starts first: a k-way merge by start */
            if (at[j] < counts[j] && (best < 0 || starts[j][at[j]] < starts[best][at[best]])) best = j;
        if (best < 0) break;
        s = starts[best][at[best]];
        e = ends[best][at[best]];
        category = kinds[best] ? kinds[best][at[best]] : categories[best];
        at[best]++;
        if (e <= s) continue;
        for (k = 0; masks_of[category][k] >= 0; k++) {
            mask = masks_of[category][k];
            if (!active[mask] || s > reach[mask]) { /* a new segment of this mask's union */
                if (active[mask]) out[mask] += reach[mask] - seg_start[mask];
                seg_start[mask] = s;
                reach[mask] = e;
                active[mask] = 1;
            } else if (e > reach[mask]) {
                reach[mask] = e;
            }
        }
    }
    for (mask = 1; mask < 8; mask++)
        if (active[mask]) out[mask] += reach[mask] - seg_start[mask];
    return 0;
}
