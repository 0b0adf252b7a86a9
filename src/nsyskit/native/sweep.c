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

/* The next segment of one start-sorted list's own union from index *at on: (*s, *e), or 0 when the list is done. */
static int next_segment(const int64_t *start, const int64_t *end, int64_t count, int64_t *at, int64_t *s, int64_t *e) {
    int64_t i = *at;
    while (i < count && end[i] <= start[i]) i++; /* empty intervals are left out */
    if (i >= count) {
        *at = i;
        return 0;
    }
    *s = start[i];
    *e = end[i];
    for (i++; i < count && start[i] <= *e; i++)
        if (end[i] > *e) *e = end[i];
    *at = i;
    return 1;
}

/* The union of `streams` interval lists (each sorted by start) as disjoint, sorted intervals (the busy time of a GPU:
   kernels, memcpys and memsets at once). Each list yields the segments of its own union (a predictable pass: a
   list's intervals mostly follow one another) and a k-way merge by start joins those, far fewer than the intervals
   (merging the intervals themselves costs a mispredicted branch per interval where the lists interleave); nothing
   is allocated (fresh pages cost more than the merge). Intervals with end <= start are left out and touching
   intervals merge, as intervals.union does. out_start and out_end hold room for every interval. Returns the number
   of intervals written, or -1 when a list is not sorted by start. */
int64_t nsk_union(int64_t streams, const int64_t *const *starts, const int64_t *const *ends, const int64_t *counts,
                  int64_t *out_start, int64_t *out_end) {
    int64_t at[MAX_STREAMS] = {0}, head_start[MAX_STREAMS], head_end[MAX_STREAMS];
    int live[MAX_STREAMS] = {0};
    int64_t k, written = 0, seg_start = 0, reach = 0;
    int active = 0;
    if (streams < 1 || streams > MAX_STREAMS) return -1;
    for (k = 0; k < streams; k++) {
        int64_t i;
        if (counts[k] < 0) return -1;
        for (i = 1; i < counts[k]; i++)
            if (starts[k][i] < starts[k][i - 1]) return -1;
        live[k] = next_segment(starts[k], ends[k], counts[k], &at[k], &head_start[k], &head_end[k]);
    }
    for (;;) {
        int64_t best = -1, s, e, j;
        for (j = 0; j < streams; j++)
            if (live[j] && (best < 0 || head_start[j] < head_start[best])) best = j;
        if (best < 0) break;
        s = head_start[best];
        e = head_end[best];
        live[best] = next_segment(starts[best], ends[best], counts[best], &at[best], &head_start[best], &head_end[best]);
        if (!active || s > reach) {
            if (active) {
                out_start[written] = seg_start;
                out_end[written++] = reach;
            }
            seg_start = s;
            reach = e;
            active = 1;
        } else if (e > reach) {
            reach = e;
        }
    }
    if (active) {
        out_start[written] = seg_start;
        out_end[written++] = reach;
    }
    return written;
}
