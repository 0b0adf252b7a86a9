"""The run's NCCL durations folded across ranks as they come: per group and kind of operation the distinct durations
in integer ns with how many operations took each, exactly; and the order statistics read from those counts.

A merge of 16,384 ranks of 80k operations each cannot hold every rank's sorted durations (0.4 MB a rank), but every
number the run's tables take from them (medians, bandwidth quantiles, outliers over a median, histograms) is a
function of the multiset of durations per group and kind, which a count per distinct value holds exactly, in memory
bounded by the values' range, not by the ranks. 'invoke analyze', the merge of parts and the merge of partial merges
all fold the same way, so they give the same numbers.
"""

from __future__ import annotations

import math

import numpy as np

from nsyskit.analysis.compute.table import Table

DURATION_BITS = 40  # a folded key is cell << 40 | duration: durations of 0 - 18 minutes (longer ones kept apart)
DURATION_MASK = (1 << DURATION_BITS) - 1
PENDING_KEYS = 1 << 22  # keys gathered before one sort folds them in (32 MB: ~50 ranks of 80k operations)
CELL_COLUMNS = ("op", "origin", "bucket", "size_bytes", "nranks", "gpu")  # a cell: its group, then its kind


class DurationFold:
    """Per cell (op, origin, bucket, size_bytes, nranks, gpu) the distinct durations and their counts, added to as
    the ranks' digests (or other folds) come in; read with `cells()` once every rank is in."""

    def __init__(self) -> None:
        self.cell_keys: list[tuple] = []  # each cell's CELL_COLUMNS (a size unknown is None), in order of arrival
        self.cell_of: dict[tuple, int] = {}
        self.keys = np.empty(0, dtype=np.int64)  # folded: sorted, distinct cell << DURATION_BITS | duration
        self.counts = np.empty(0, dtype=np.int64)
        self.pending: list[tuple[np.ndarray, np.ndarray | None]] = []  # (keys, counts or None: one each)
        self.pending_size = 0
        self.apart: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (cells, durations, counts) out of range

    def _cell(self, key: tuple) -> int:
        found = self.cell_of.get(key)
        if found is None:
            found = self.cell_of[key] = len(self.cell_keys)
            self.cell_keys.append(key)
        return found

    def add_digest(self, digest) -> None:
        """Fold in one rank's digest (compute.nccldigest.NcclDigest): its sorted durations with their kinds."""
        durations = digest.durations
        if not len(durations):
            return
        groups, kinds = digest.groups, digest.kinds
        width = max(1, len(kinds))
        local = np.repeat(np.arange(len(groups), dtype=np.int64) * width, groups["count"])
        local += digest.kind_codes
        seen = np.zeros(len(groups) * width, dtype=bool)
        seen[local] = True  # the (group, kind) pairs the rank has: a few hundred at most (a mark, not a bincount)
        sizes = kinds["size_bytes"].tolist()
        lookup = np.zeros(len(seen), dtype=np.int64)
        for code in np.flatnonzero(seen).tolist():
            row, kind = divmod(code, width)
            size = sizes[kind]
            lookup[code] = self._cell((str(groups["op"][row]), str(groups["origin"][row]), str(groups["bucket"][row]),
                                       None if size != size else size, int(kinds["nranks"][kind]),
                                       int(kinds["gpu"][kind])))  # fmt: skip
        if durations.dtype != np.uint32:  # may not fit DURATION_BITS: _push keeps those apart
            self._push(lookup[local], durations, None)
            return
        lookup <<= DURATION_BITS  # every uint32 fits: the keys straight from the lookup, one pass fewer per rank
        keys = lookup[local]
        keys |= durations
        self._pend(keys, None)

    def add_cells(self, cells: Table, cell: np.ndarray, durations: np.ndarray, counts: np.ndarray) -> None:
        """Fold in another fold's cells() (a partial merge's, read back from its file)."""
        if not len(cell):
            return
        mine = np.asarray([self._cell(key) for key in keys_of(cells)], dtype=np.int64)
        self._push(mine[cell], durations, counts)

    def _push(self, cell: np.ndarray, durations: np.ndarray, counts: np.ndarray | None) -> None:
        fits = None if durations.dtype == np.uint32 else (durations >= 0) & (durations <= DURATION_MASK)  # uint32 fit
        durations = durations.astype(np.int64, copy=False)
        if fits is not None and not fits.all():  # a negative or an over-long duration: kept apart, folded when read
            out = ~fits
            ones = np.ones(int(out.sum()), dtype=np.int64)
            self.apart.append((cell[out], durations[out], ones if counts is None else counts[out]))
            cell, durations = cell[fits], durations[fits]
            counts = None if counts is None else counts[fits]
        cell <<= DURATION_BITS  # (a fresh array: the digest's lookup, or a copy)
        cell |= durations
        self._pend(cell, counts)

    def _pend(self, keys: np.ndarray, counts: np.ndarray | None) -> None:
        """Keep folded keys (cell << DURATION_BITS | duration) until enough are pending for one sort."""
        self.pending.append((keys, counts))
        self.pending_size += len(keys)
        # Real ranks' durations differ (jitter), so the folded keys grow with the ranks: folding fixed batches into
        # them would copy them every time (quadratic). Batches of half what is folded copy each key a logarithmic
        # number of times (bench/ncclfold_bench.py, 4,096 jittered ranks: 50.7 -> 30.6 s, 1.03 -> 1.21 GB).
        if self.pending_size >= max(PENDING_KEYS, len(self.keys) // 2):
            self._fold()

    def _fold(self) -> None:
        """Fold the pending keys into the sorted distinct keys: one sort of the pending, one merge."""
        if not self.pending:
            return
        keys = np.concatenate([keys for keys, _counts in self.pending])
        if all(counts is None for _keys, counts in self.pending):
            keys.sort()  # numpy's (SIMD) sort: a C radix sort measured 2-6x slower here
            counts = None
        else:
            counts = np.concatenate([np.ones(len(k), dtype=np.int64) if c is None else c for k, c in self.pending])
            order = np.argsort(keys)
            keys, counts = keys[order], counts[order]
        self.pending, self.pending_size = [], 0
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.empty(0, dtype=np.int64)
        distinct = keys[starts]
        added = np.diff(np.r_[starts, len(keys)]) if counts is None else np.add.reduceat(counts, starts)
        at = np.searchsorted(self.keys, distinct)
        known = at < len(self.keys)
        known[known] = self.keys[at[known]] == distinct[known]
        self.counts[at[known]] += added[known]  # distinct keys: each place once
        new = ~known
        if new.any():
            self.keys = np.insert(self.keys, at[new], distinct[new])
            self.counts = np.insert(self.counts, at[new], added[new])

    def cells(self) -> tuple[Table, np.ndarray, np.ndarray, np.ndarray]:
        """(the cells' CELL_COLUMNS, and for every distinct duration of every cell: its cell, the duration, the
        count), ordered by cell, then duration."""
        self._fold()
        cell = self.keys >> DURATION_BITS
        durations, counts = self.keys & DURATION_MASK, self.counts
        if self.apart:
            cell = np.concatenate([cell, *(c for c, _d, _n in self.apart)])
            durations = np.concatenate([durations, *(d for _c, d, _n in self.apart)])
            counts = np.concatenate([counts, *(n for _c, _d, n in self.apart)])
            order = np.lexsort((durations, cell))
            cell, durations, counts = cell[order], durations[order], counts[order]
            starts = np.flatnonzero(np.r_[True, (np.diff(cell) != 0) | (np.diff(durations) != 0)])
            cell, durations, counts = cell[starts], durations[starts], np.add.reduceat(counts, starts)
        return cell_table(self.cell_keys), cell, durations, counts


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
