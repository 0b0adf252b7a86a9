"""The run's NCCL durations folded across ranks as they come: per group and kind of operation the distinct durations
with how many operations took each, in integer ns up to a budget of distinct values, in coarser units past it.

A merge of 16,384 ranks of 80k operations each cannot hold every rank's sorted durations (0.4 MB a rank), but every
number the run's tables take from them (medians, bandwidth quantiles, outliers over a median, histograms) is a
function of the multiset of durations per group and kind, which a count per distinct value holds exactly. Ranks
whose durations jitter make nearly every duration distinct, so a cell holds at most DISTINCT_PER_CELL of them: past
that it holds them in units of 2**k ns (each duration floored to its unit) for the least k that fits, and says so
(coarsening_line). The least k depends only on the cell's multiset, so 'invoke analyze', the merge of parts and the
merge of partial merges, in any order and split, give the same numbers.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from nsyskit.analysis.compute.table import Table

PENDING_DURATIONS = 1 << 22  # durations gathered over every cell before a batch folds them in (~50 ranks of 80k)
DISTINCT_PER_CELL = 1 << 16  # distinct durations a cell holds before it coarsens its unit (2 MB of values and counts)
DENSE_BINS_PER_VALUE = 2  # a cell's values are counted in bins of its unit where they span at most this many a value
DENSE_BINS = 1 << 22  # and at most this many bins (32 MB of counts)
CELL_COLUMNS = ("op", "origin", "bucket", "size_bytes", "nranks", "gpu")  # a cell: its group, then its kind


class DurationFold:
    """Per cell (op, origin, bucket, size_bytes, nranks, gpu) the distinct durations and their counts, added to as
    the ranks' digests (or other folds) come in; read with `cells()` once every rank is in.

    Each cell keeps its own: its durations in their dtype (uint32 where every one fits: numpy sorts those twice as
    fast as int64, and no cell number packed beside them limits a duration's range), so a batch sorts each cell's
    pending runs apart and merges the distinct values into that cell's. A cell whose distinct durations pass
    DISTINCT_PER_CELL holds them floored to units of 2**k ns (its shift k: 0 is exact) for the least k that fits."""

    def __init__(self) -> None:
        self.cell_keys: list[tuple] = []  # each cell's CELL_COLUMNS (a size unknown is None), in order of arrival
        self.cell_of: dict[tuple, int] = {}
        self.values: list[np.ndarray] = []  # per cell: its distinct durations, ascending
        self.counts: list[np.ndarray] = []  # per cell: how many operations took each (int64)
        self.cell_shifts: list[int] = []  # per cell: its values are multiples of 2**shift ns, floored (0: exact)
        self.cell_totals: list[int] = []  # per cell: the exact sum of its durations in ns, whatever its unit
        # per cell: (durations, counts or None, the shift they are floored to)
        self.pending: list[list[tuple[np.ndarray, np.ndarray | None, int]]] = []
        self.pending_size = 0
        self.folded_size = 0  # distinct durations over every cell
        self.read: tuple[Table, np.ndarray, np.ndarray, np.ndarray] | None = None  # cells() since the last change
        self.shared = False  # the cells' arrays are views of what a cells() returned

    def _cell(self, key: tuple) -> int:
        found = self.cell_of.get(key)
        if found is None:
            found = self.cell_of[key] = len(self.cell_keys)
            self.cell_keys.append(key)
            self.read = None
            self.values.append(np.empty(0, dtype=np.uint32))
            self.counts.append(np.empty(0, dtype=np.int64))
            self.cell_shifts.append(0)
            self.cell_totals.append(0)
            self.pending.append([])
        return found

    def add_digest(self, digest) -> None:
        """Fold in one rank's digest (compute.nccldigest.NcclDigest): its durations, one sorted run per group and
        kind."""
        if not len(digest.durations):
            return
        # One copy the pending runs are views of: the digest's own array goes with the digest (a merge holds at
        # most two ranks' digests' durations: tests/unit/analysis/test_merge_scale.py counts them).
        durations, codes = digest.durations.copy(), digest.kind_codes
        groups, kinds = digest.groups, digest.kinds
        ends = np.cumsum(groups["count"])
        starts = np.union1d(np.flatnonzero(codes[1:] != codes[:-1]) + 1, ends[:-1])  # where a (group, kind) begins
        starts = np.r_[0, starts[starts > 0]].astype(np.int64)
        rows = np.searchsorted(ends, starts, side="right")
        group_keys = list(zip(*(groups[k].tolist() for k in ("op", "origin", "bucket")), strict=True))
        kind_keys = [(None if size != size else size, int(n), int(gpu))
                     for size, n, gpu in zip(*(kinds[k].tolist() for k in ("size_bytes", "nranks", "gpu")), strict=True)]  # fmt: skip
        bounds = np.r_[starts, len(durations)].tolist()
        sums = np.add.reduceat(durations, starts, dtype=np.int64).tolist()  # each run's exact total
        for index, (row, kind) in enumerate(zip(rows.tolist(), codes[starts].tolist(), strict=True)):
            op, origin, bucket = group_keys[row]
            cell = self._cell((str(op), str(origin), str(bucket), *kind_keys[kind]))
            self.pending[cell].append((durations[bounds[index] : bounds[index + 1]], None, 0))
            self.cell_totals[cell] += sums[index]
        self._pend(len(durations))

    def add_cells(
        self, cells: Table, cell: np.ndarray, durations: np.ndarray, counts: np.ndarray,
        shifts: np.ndarray | None = None, totals: np.ndarray | None = None,
    ) -> None:  # fmt: skip
        """Fold in another fold's cells() (a partial merge's, read back from its file), with its shifts() (None: every
        cell exact) and totals() (None: summed from the durations, exact where the cells are)."""
        if not len(cell):
            return
        mine = [self._cell(key) for key in keys_of(cells)]
        theirs_shifts = [0] * len(mine) if shifts is None else [int(shift) for shift in shifts]
        if np.any(cell[1:] < cell[:-1]):  # cells() gives them ordered by cell; anything else is ordered here
            order = np.argsort(cell, kind="stable")
            cell, durations, counts = cell[order], durations[order], counts[order]
        bounds = np.searchsorted(cell, np.arange(len(cells) + 1)).tolist()
        for theirs, own in enumerate(mine):
            if bounds[theirs + 1] > bounds[theirs]:
                piece = slice(bounds[theirs], bounds[theirs + 1])
                self.pending[own].append((durations[piece], counts[piece], theirs_shifts[theirs]))
                self.cell_totals[own] += (int(totals[theirs]) if totals is not None
                                          else int(np.dot(durations[piece].astype(np.int64), counts[piece])))  # fmt: skip
        self._pend(len(cell))

    def _pend(self, added: int) -> None:
        """Count `added` durations as pending, and fold the batch in once it is large enough."""
        self.pending_size += added
        # Real ranks' durations differ (jitter), so the folded values grow with the ranks: folding fixed batches into
        # them would copy them every time (quadratic). Batches of half what is folded copy each value a logarithmic
        # number of times (bench/ncclfold_bench.py, 4,096 jittered ranks: 50.7 -> 30.6 s, 1.03 -> 1.21 GB).
        if self.pending_size >= max(PENDING_DURATIONS, self.folded_size // 2):
            self._fold()

    def _fold(self) -> None:
        """Fold every cell's pending runs into its distinct durations: one sort of the cell's pending, one merge."""
        for cell, runs in enumerate(self.pending):
            if not runs:
                continue
            self.pending[cell] = []
            counts = self.counts[cell].copy() if self.shared else self.counts[cell]  # what cells() gave stays as it was
            self.read = None
            self.folded_size -= len(self.values[cell])
            values, shift = self.values[cell], max(self.cell_shifts[cell], *(shift for _d, _c, shift in runs))
            if shift > self.cell_shifts[cell]:  # a partial fold came coarser than this one: this one meets it first
                values, counts = _coarsened(values, counts, shift)
            values, counts = _merged(values, counts, [(d, c) for d, c, _shift in runs], shift)
            if len(values) > DISTINCT_PER_CELL:
                shift = _least_shift(values, shift)
                values, counts = _coarsened(values, counts, shift)
            self.values[cell], self.counts[cell], self.cell_shifts[cell] = values, counts, shift
            self.folded_size += len(values)
        self.pending_size = 0

    def shifts(self) -> np.ndarray:
        """Per cell (in cells()' order) its shift k: its durations are held in units of 2**k ns, each the low edge of
        its unit (0: exact)."""
        self._fold()
        return np.asarray(self.cell_shifts, dtype=np.int64)

    def totals(self) -> np.ndarray:
        """Per cell (in cells()' order) the exact sum of its durations in ns (a coarse cell's values are floored: its
        time is not theirs summed)."""
        return np.asarray(self.cell_totals, dtype=np.int64)

    def coarsening_line(self) -> str | None:
        """The one warning line that says which cells hold their durations in units coarser than a ns (None when
        every cell is exact)."""
        shifts = self.shifts()
        coarse = int(np.count_nonzero(shifts))
        if not coarse:
            return None
        return (
            f"NCCL durations: {coarse:,} of {len(shifts):,} kinds of operation had more than {DISTINCT_PER_CELL:,} "
            f"distinct durations; they are held in units of up to {_unit_text(int(shifts.max()))}, so their medians, "
            "bandwidth quantiles, outliers and histogram are exact to that unit"
        )

    def cells(self) -> tuple[Table, np.ndarray, np.ndarray, np.ndarray]:
        """(the cells' CELL_COLUMNS, and for every distinct duration of every cell: its cell, the duration (int64),
        the count), ordered by cell, then duration."""
        self._fold()
        if self.read is not None:  # the sizes table, the curve, the histograms read it in turn: one copy for all
            return self.read
        lengths = [len(values) for values in self.values]
        places = [slice(a, b) for a, b in itertools.pairwise(np.r_[0, np.cumsum(lengths, dtype=np.int64)].tolist())]
        # Each cell's arrays become views of what is returned, one array at a time: the fold is held once, not
        # twice, and its peak is no higher than the packed keys' was (bench/ncclfold_bench.py)
        durations = np.concatenate([np.empty(0, dtype=np.int64), *self.values], dtype=np.int64)
        self.values = [durations[place] for place in places]
        counts = np.concatenate([np.empty(0, dtype=np.int64), *self.counts])
        self.counts = [counts[place] for place in places]
        self.shared = True
        cell = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        self.read = (cell_table(self.cell_keys), cell, durations, counts)
        return self.read


def _floored(values: np.ndarray, shift: int) -> np.ndarray:
    """The values floored to multiples of 2**shift (an arithmetic shift: toward -inf for negative ones), in their
    dtype; uint32 ones past its width as int64."""
    if not shift:
        return values
    if values.dtype != np.int64 and shift >= 8 * values.dtype.itemsize - 1:
        values = values.astype(np.int64)
    step = values.dtype.type(shift)
    return (values >> step) << step


def _coarsened(values: np.ndarray, counts: np.ndarray, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ascending values with their counts floored to multiples of 2**shift: counts of values that meet
    are summed."""
    floored = _floored(values, shift)
    if not len(floored):
        return floored, counts
    starts = np.flatnonzero(np.r_[True, floored[1:] != floored[:-1]])
    return floored[starts], np.add.reduceat(counts, starts)


def _distinct_after(values: np.ndarray, shift: int) -> int:
    """How many distinct values the ascending `values` leave when floored to multiples of 2**shift."""
    floored = _floored(values, shift)
    return 1 + int(np.count_nonzero(floored[1:] != floored[:-1])) if len(floored) else 0


def _least_shift(values: np.ndarray, shift: int) -> int:
    """The least shift above `shift` at which the ascending `values` (multiples of 2**shift) leave at most
    DISTINCT_PER_CELL distinct values: found by halving, since flooring coarser never adds one."""
    low, high = shift, 63  # at 63 every int64 is -1 or 0
    while high - low > 1:
        middle = (low + high) // 2
        if _distinct_after(values, middle) <= DISTINCT_PER_CELL:
            high = middle
        else:
            low = middle
    return high


def _unit_text(shift: int) -> str:
    """2**shift ns in the unit a person reads: 256 ns, 4.1 us, 1.0 ms, 1.1 s."""
    unit = float(1 << shift)
    for scale, name in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if unit >= scale:
            return f"{unit / scale:.1f} {name}"
    return f"{int(unit)} ns"


def _merged(
    values: np.ndarray, counts: np.ndarray, runs: list[tuple[np.ndarray, np.ndarray | None]], shift: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """One cell's distinct durations and counts (multiples of 2**shift) with its pending runs (durations, counts or
    None: one each) added, floored to that unit: counted in a bin per unit where they span few units, else sorted
    together in their dtype (uint32 stays uint32; int64, negative or past 2**32, sorts as int64)."""
    pending = np.concatenate([durations for durations, _counts in runs])
    weights = None
    if any(counts_of is not None for _durations, counts_of in runs):
        weights = np.concatenate([np.ones(len(d), dtype=np.int64) if w is None else w for d, w in runs])
    # a cell of uint32 durations meeting int64 ones holds int64 from then on (and one floored past uint32's width)
    wide = _floored(np.empty(0, dtype=np.result_type(values, pending)), shift).dtype
    least, greatest = int(pending.min()) >> shift, int(pending.max()) >> shift
    if len(values):
        least, greatest = min(least, int(values[0]) >> shift), max(greatest, int(values[-1]) >> shift)
    bins = greatest - least + 1
    if bins <= min(DENSE_BINS_PER_VALUE * (len(pending) + len(values)), DENSE_BINS):
        return _counted(values, counts, pending, weights, least, shift, bins, wide)
    values, pending = values.astype(wide, copy=False), _floored(pending.astype(wide, copy=False), shift)
    if weights is None:
        pending.sort()  # numpy's (SIMD) sort: a C radix sort measured 2-6x slower here
    else:
        order = np.argsort(pending)
        pending, weights = pending[order], weights[order]
    starts = np.flatnonzero(np.r_[True, pending[1:] != pending[:-1]])
    distinct = pending[starts]
    added = np.diff(np.r_[starts, len(pending)]) if weights is None else np.add.reduceat(weights, starts)
    if not len(values):
        return distinct, added.astype(np.int64, copy=False)
    at = np.searchsorted(values, distinct)
    known = at < len(values)
    known[known] = values[at[known]] == distinct[known]
    counts[at[known]] += added[known]  # distinct durations: each place once
    new = ~known
    if new.any():
        values = np.insert(values, at[new], distinct[new])
        counts = np.insert(counts, at[new], added[new])
    return values, counts


def _counted(
    values: np.ndarray, counts: np.ndarray, pending: np.ndarray, weights: np.ndarray | None, least: int, shift: int,
    bins: int, dtype: np.dtype,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """_merged by counting in a bin per unit from `least` units on (linear, where a sort is n log n: a coarse cell's
    values span about DISTINCT_PER_CELL units, however many ranks bring them)."""
    index = pending.astype(np.int64)  # bincount counts int64 indices without a copy of its own
    index >>= shift
    index -= least
    if weights is None:
        dense = np.bincount(index, minlength=bins)
    else:  # bincount's weights sum in float64: int64 counts are added exactly
        dense = np.zeros(bins, dtype=np.int64)
        np.add.at(dense, index, weights)
    dense[(values.astype(np.int64) >> shift) - least] += counts  # distinct values: each bin once
    filled = np.flatnonzero(dense)
    return ((filled + least) << shift).astype(dtype), dense[filled]


def cell_table(keys: list[tuple]) -> Table:
    """The cells' CELL_COLUMNS from their keys (a size unknown is None in a key, NaN in the table)."""
    columns = list(zip(*keys, strict=True)) if keys else [()] * len(CELL_COLUMNS)
    return Table({
        "op": np.asarray(columns[0], dtype=object), "origin": np.asarray(columns[1], dtype=object),
        "bucket": np.asarray(columns[2], dtype=object),
        "size_bytes": np.asarray([np.nan if s is None else s for s in columns[3]], dtype=np.float64),
        "nranks": np.asarray(columns[4], dtype=np.int64), "gpu": np.asarray(columns[5], dtype=np.int64),
    })  # fmt: skip


def keys_of(cells: Table) -> list[tuple]:
    """The cells' keys (plain Python values: JSON can hold them) from their CELL_COLUMNS."""
    sizes = cells["size_bytes"].tolist()
    return [(str(op), str(origin), str(bucket), None if size != size else size, int(n), int(gpu))
            for op, origin, bucket, size, n, gpu in zip(cells["op"], cells["origin"], cells["bucket"], sizes,
                                                         cells["nranks"], cells["gpu"], strict=True)]  # fmt: skip


def order_statistics(values: np.ndarray, counts: np.ndarray, ranks: list[int]) -> list:
    """The `ranks`-th smallest (0-based) of the multiset where values[i] occurs counts[i] times (in any order)."""
    order = np.argsort(values, kind="stable")
    ends = np.cumsum(counts[order])
    return [values[order[int(np.searchsorted(ends, rank, side="right"))]] for rank in ranks]


def median(values: np.ndarray, counts: np.ndarray) -> float:
    """The median of the multiset (values[i] counts[i] times) as of one sorted array of it: NaN when empty."""
    count = int(counts.sum())
    if not count:
        return float("nan")
    low, high = order_statistics(values, counts, [(count - 1) // 2, count // 2])
    return (float(low) + float(high)) / 2.0


def quantiles(values: np.ndarray, counts: np.ndarray, qs: list[float]) -> list[float]:
    """numpy's quantiles (its default, linear interpolation) of the multiset, bit for bit as np.quantile of the array
    holding values[i] counts[i] times gives them: the same virtual index (n - 1) q and the same two-sided lerp."""
    count = int(counts.sum())
    if not count:
        return [float("nan")] * len(qs)
    virtuals = [np.float64(count - 1) * np.float64(q) for q in qs]
    belows = [min(math.floor(virtual), count - 1) for virtual in virtuals]
    needed = sorted({r for below in belows for r in (below, min(below + 1, count - 1))})
    at = dict(zip(needed, order_statistics(values, counts, needed), strict=True))
    result = []
    for virtual, below in zip(virtuals, belows, strict=True):
        if virtual >= count - 1:  # numpy takes the greatest value
            result.append(float(at[count - 1]))
            continue
        low, high = np.float64(at[below]), np.float64(at[below + 1])
        gamma = virtual - np.float64(below)
        step = high - low
        result.append(float(low + step * gamma if gamma < 0.5 else high - step * (1 - gamma)))
    return result


def histogram(values: np.ndarray, counts: np.ndarray, scale: float, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """(counts, edges) of the multiset's values divided by `scale` in `bins` equal bins from the least to the
    greatest, as numpy's histogram of the whole array gives them."""
    least, greatest = float(values.min()) / scale, float(values.max()) / scale
    edges = np.histogram_bin_edges(np.asarray([least, greatest]), bins=bins)
    return np.histogram(values / scale, bins=edges, weights=counts)[0].astype(np.int64), edges
