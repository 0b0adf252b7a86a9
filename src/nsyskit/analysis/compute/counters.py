"""Time-weighted statistics of the counters sampled beside the trace, per device and metric, over a rank's window.

Each sample holds its value over [start, end) (read/counterread.py says how each form is timed); the window clips
it. Per series: samples, the time covered, mean, p50, p95 (a value weighted by the time it held) and max, the
total moved for rates ("B/s" -> bytes), and the mean while the rank's kernels (of that GPU, for GPU metrics) and
its NCCL kernels ran. For the run's heat map and its merge, each series' sums per time bin (value x time, time
covered, max): bins start at the rank's window start, their width 1 ms x 2^k (at most MAX_BINS of them), so a
merge brings every rank to the widest width by adding whole bins, exactly.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from nsyskit.analysis.compute.intervals import covered, merge, union
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.read.counterread import EFA, NIC, Series
from nsyskit.analysis.read.records import factorize
from nsyskit.native import counterstats

MAX_BINS = 64  # time bins per series and rank in the parts (the heat map's columns)
BASE_BIN_NS = 1_000_000  # the narrowest bin: 1 ms; wider ones double it
NS_PER_S = 1e9
TABLES = ("counters", "counter_bins", "counter_steps")  # the per-rank tables rank_tables gives (the parts carry them)
STAT_COLUMNS = ("kind", "device", "metric", "unit", "samples", "covered_ns", "mean", "p50", "p95", "max", "total",
                "total_unit", "busy_mean", "nccl_mean", "window_start_ns", "window_end_ns")  # fmt: skip
STEP_COLUMNS = ("step", "kind", "device", "metric", "unit", "total")


def bin_width(window_ns: int) -> int:
    """The narrowest 1 ms x 2^k width that covers `window_ns` in at most MAX_BINS bins."""
    width = BASE_BIN_NS
    while width * MAX_BINS < window_ns:
        width *= 2
    return width


def is_rate(unit: str) -> bool:
    """Whether a unit is a rate per second (its integral over time is an amount)."""
    return unit.endswith("/s")


class _Clipped:
    """The samples of one timing (series of a device sampled together share their time arrays) clipped to a window:
    which hold some time inside it, their clipped [start, end), and what depends on the times only, computed once."""

    def __init__(self, start: np.ndarray, end: np.ndarray, low: int, high: int) -> None:
        clipped_start, clipped_end = np.maximum(start, low), np.minimum(end, high)
        self.keep: np.ndarray | slice = clipped_end > clipped_start
        kept = np.flatnonzero(self.keep)
        if len(kept) and kept[-1] - kept[0] + 1 == len(kept):  # one run (sorted samples): values taken as views
            self.keep = slice(int(kept[0]), int(kept[-1]) + 1)
        self.start, self.end = clipped_start[self.keep], clipped_end[self.keep]
        self.weight = (self.end - self.start).astype(np.float64)
        self.exact = counterstats.exact_weights(self.weight)  # whole ns below 2^52 in all: C may add them as integers
        self.total = self.weight.sum()  # the time covered
        self._inside: dict[int, tuple[np.ndarray, float]] = {}
        self._at: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def inside(self, union: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, float]:
        """(how long each sample lies inside the disjoint sorted intervals `union`, as float64: whole ns, exact; their
        total), once per union whatever the number of series sharing these times."""
        key = id(union[0])
        if key not in self._inside:
            inside = counterstats.covered(*union, self.start, self.end)  # C: one walk (None: numpy)
            inside = covered(*union, self.start, self.end).astype(np.float64) if inside is None else inside
            self._inside[key] = (inside, inside.sum())
        return self._inside[key]

    def marks(self, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(how many samples start at or before each point of `at`, the part of the last of them after the point):
        one searchsorted per set of points, whatever the number of series sharing these times."""
        key = id(at)
        if key not in self._at:
            k = np.searchsorted(self.start, at, side="right")
            self._at[key] = (k, np.where(k > 0, np.maximum(self.end[k - 1] - at, 0), 0))
        return self._at[key]

    def integral(self, value: np.ndarray, at: np.ndarray) -> np.ndarray:
        """The integral of the samples' `value` from the first sample to each point of `at` (counterstats.bin_walk
        finds the same in C)."""
        k, tail = self.marks(at)
        return np.r_[0.0, np.cumsum(value * self.weight)][k] - np.where(k > 0, value[k - 1], 0.0) * tail


def _timings(series: list[Series], low: int, high: int) -> list[tuple[_Clipped, np.ndarray]]:
    """Each series' clipped timing (shared by the series with the same time arrays) and its values inside."""
    shared: dict[tuple[int, int], _Clipped] = {}
    out = []
    for one in series:
        key = (id(one.start), id(one.end))
        if key not in shared:
            shared[key] = _Clipped(one.start, one.end, low, high)
        clipped = shared[key]
        value = one.value[clipped.keep]
        if np.isnan(value).any():  # a field missing from some events: those samples apart, in a timing of its own
            good = ~np.isnan(value)
            clipped = _Clipped(clipped.start[good], clipped.end[good], low, high)
            value = value[good]
        out.append((clipped, value))
    return out


def _integral(start: np.ndarray, end: np.ndarray, value: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The integral of the step function (value over each disjoint sorted [start, end)) from -inf to each `at`."""
    full = np.r_[0.0, np.cumsum(value * (end - start))]
    k = np.searchsorted(start, at, side="right")  # samples starting at or before each point
    tail = np.where(k > 0, np.maximum(end[k - 1] - at, 0), 0)  # the part of sample k-1 after the point
    return full[k] - np.where(k > 0, value[k - 1], 0.0) * tail


SMALL_INTEGERS = 1 << 16  # counters valued 0..65535 in whole numbers (percentages): quantiles by counting
WIDE_INTEGERS = 1 << 32  # whole numbers spanning less (clocks in Hz): counted in blocks of 2^16 values


def _quantiles(values: np.ndarray, weights: np.ndarray, qs: tuple[float, ...], exact: bool = False) -> list[float]:
    """For each q, the smallest value below which at least q of the weight lies.

    The weights are whole nanoseconds: their sums are exact in any order, so whole-number values are counted (per
    value, or per block of values then inside the one block each q falls in; in C where it is built, `exact`:
    counterstats.exact_weights) rather than sorted: the same answer."""
    low, high = values.min(), values.max()
    if low == high:  # a counter that never moved (common: idle links)
        return [float(low)] * len(qs)
    if high - low < WIDE_INTEGERS:
        counted = counterstats.quantiles(values, weights, exact, float(low), float(high), qs)  # False: not whole
        if counted is None and (values == np.floor(values)).all():
            counted = _counted_quantiles(values, weights, qs, low, high)
        if counted:
            return counted
    order = np.argsort(values, kind="stable")
    cumulative, ordered = np.cumsum(weights[order]), values[order]
    return [float(ordered[min(np.searchsorted(cumulative, q * cumulative[-1], side="left"), len(values) - 1)])
            for q in qs]  # fmt: skip


def _counted_quantiles(values: np.ndarray, weights: np.ndarray, qs: tuple[float, ...], low, high) -> list[float]:
    """_quantiles of whole-number values (min `low` < max `high`) spanning less than WIDE_INTEGERS, by numpy."""
    if low >= 0 and high < SMALL_INTEGERS:
        cumulative = np.cumsum(np.bincount(values.astype(np.int64), weights=weights))  # per whole value
        return [float(np.searchsorted(cumulative, q * cumulative[-1], side="left")) for q in qs]
    return _block_quantiles(values, weights, qs)


def _block_quantiles(values: np.ndarray, weights: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """_quantiles of whole-number values spanning less than WIDE_INTEGERS: the weight per block of 2^16 values,
    then per value inside the block where each q falls (clock frequencies in Hz)."""
    low = values.min()
    offset = (values - low).astype(np.int64)
    block = offset >> 16
    cumulative = np.cumsum(np.bincount(block, weights=weights))
    found = []
    for q in qs:
        target = q * cumulative[-1]
        at = int(np.searchsorted(cumulative, target, side="left"))
        inside = block == at
        before = cumulative[at - 1] if at else 0.0
        within = before + np.cumsum(np.bincount(offset[inside] & 0xFFFF, weights=weights[inside]))
        found.append(float(low + (at << 16) + int(np.searchsorted(within, target, side="left"))))
    return found


def _weighted_sums(value: np.ndarray, weights: list[np.ndarray]) -> list:
    """[(value * w).sum() for w in weights]: in C where it is built (numpy's sums, no array of products)."""
    found = counterstats.weighted_sums(value, weights)
    return found if found is not None else [(value * weight).sum() for weight in weights]


def _mean_inside(total_inside: float, time_inside: float) -> float:
    """The mean of a series weighted by the time each sample lies inside a set of intervals, from the sum of value x
    time inside and that time (NaN when none)."""
    return float(total_inside / time_inside) if time_inside > 0 else np.nan


def counter_stats(
    series: list[Series], window: tuple[int, int], busy: dict[int, tuple[np.ndarray, np.ndarray]],
    nccl: tuple[np.ndarray, np.ndarray], timings: list | None = None,
) -> Table:  # fmt: skip
    """One row per series sampled inside the window: mean, p50, p95, max (time-weighted) and the rest (see module).

    `busy`: per GPU id, the union of its kernels (a GPU metric's 'busy_mean' is over its own GPU's kernels; a network
    counter's over any GPU's); `nccl`: the union of the rank's NCCL kernels."""
    low, high = window
    rows = []
    every = _every(busy)
    for one, (clipped, value) in zip(series, timings or _timings(series, low, high), strict=True):
        if not len(value):
            continue
        weight = clipped.weight
        kernels = busy.get(one.device_id, every) if one.device_id >= 0 else every
        inside = [clipped.inside(union) if len(union[0]) else None for union in (kernels, nccl)]
        sums = _weighted_sums(value, [weight, *(found[0] for found in inside if found is not None)])
        covered, moved, rate, more = float(clipped.total), float(sums[0]), is_rate(one.unit), iter(sums[1:])
        rows.append((one.kind, one.device, one.metric, one.unit, len(value), int(covered), moved / covered,
                     *_quantiles(value, weight, (0.5, 0.95), clipped.exact), float(value.max()),
                     moved / NS_PER_S if rate else np.nan, one.unit[:-2] if rate else "",
                     *(_mean_inside(next(more), found[1]) if found is not None else np.nan for found in inside),
                     low, high))  # fmt: skip
    return _table(STAT_COLUMNS, rows)


def _every(busy: dict[int, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The union of every GPU's busy intervals."""
    return merge(*busy.values())


def _table(names: tuple[str, ...], rows: list[tuple]) -> Table:
    """A Table of `rows` (tuples in `names` order), text columns as objects, numbers as int64 or float64."""
    if not rows:
        return Table({name: np.empty(0, dtype=object if name in _TEXT else np.float64) for name in names})
    columns = list(zip(*rows, strict=True))
    return Table(
        {name: np.array(col, dtype=object if name in _TEXT else None) for name, col in zip(names, columns, strict=True)}
    )


_TEXT = {"kind", "device", "metric", "unit", "total_unit"}


def counter_bins(series: list[Series], window: tuple[int, int], timings: list | None = None) -> Table:
    """Per series and time bin of the window: value x time (value_ns), time covered and the max of the samples."""
    low, high = window
    width = bin_width(high - low)
    count = max(1, -(-(high - low) // width))
    edges = low + width * np.arange(count + 1, dtype=np.int64)
    edges[-1] = min(edges[-1], high)
    timings = timings or _timings(series, low, high)
    shared: dict[int, list[int]] = {}  # the series of each timing (those sharing their times: one walk in C)
    for index, (clipped, value) in enumerate(timings):
        if len(value):
            shared.setdefault(id(clipped), []).append(index)
    found = {}
    for indices in shared.values():
        clipped, values = timings[indices[0]][0], [timings[i][1] for i in indices]
        first, last = (clipped.start - low) // width, (clipped.end - 1 - low) // width  # the bins each sample overlaps
        spans, ones, where = last - first + 1, np.ones(len(clipped.start)), {}
        # C: the integrals and maxima of every series in one walk, and of ones (the time covered per bin)
        walked = counterstats.bin_walk([*values, ones], clipped.weight, *clipped.marks(edges), first, spans, count)
        if walked is not None:
            sums, maxima = list(np.diff(walked[0], axis=1)), list(walked[1])
        else:
            sums = [np.diff(clipped.integral(value, edges)) for value in [*values, ones]]
            maxima = [_bin_maxima(value, first, spans, count, where) for value in values]
        covered = sums[-1]
        held = covered > 0
        kept = np.flatnonzero(held)
        for position, index in enumerate(indices):
            found[index] = (series[index], kept, sums[position][held], covered[held], maxima[position][held])
    parts = [found[index] for index in sorted(found)]
    n = sum(len(p[1]) for p in parts)

    def text(pick) -> np.ndarray:
        """A text column: each series' value, once per bin it has."""
        out = np.empty(n, dtype=object)
        out[:] = [v for p in parts for v in [pick(p[0])] * len(p[1])]
        return out

    cat = (lambda i, dtype: np.concatenate([p[i] for p in parts]).astype(dtype)) if parts else (
        lambda i, dtype: np.empty(0, dtype=dtype))  # fmt: skip
    return Table({
        "kind": text(lambda s: s.kind), "device": text(lambda s: s.device), "metric": text(lambda s: s.metric),
        "bin": cat(1, np.int64), "bin_ns": np.full(n, width, dtype=np.int64), "value_ns": cat(2, np.float64),
        "covered_ns": cat(3, np.float64), "max": cat(4, np.float64),
    })  # fmt: skip


def _bin_maxima(value: np.ndarray, first: np.ndarray, spans: np.ndarray, count: int, where: dict) -> np.ndarray:
    """Each of `count` bins' max of the values of the samples overlapping it (sample i: bins first[i] ..
    first[i] + spans[i] - 1), -inf where none; `where`: the bin of each (sample, bin) pair, kept for the timing."""
    if not where:
        at = np.repeat(first, spans) + (np.arange(spans.sum()) - np.repeat(np.cumsum(spans) - spans, spans))
        where.update(at=at, cuts=np.flatnonzero(np.diff(at)) + 1 if (np.diff(at) >= 0).all() else None)
    at, cuts = where["at"], where["cuts"]
    highest = np.full(count, -np.inf)
    if cuts is not None and len(at):  # bins in order (samples that do not overlap): a max per run of a bin
        runs = np.r_[0, cuts]
        highest[at[runs]] = np.maximum.reduceat(value if len(at) == len(value) else np.repeat(value, spans), runs)
    else:
        np.maximum.at(highest, at, np.repeat(value, spans))
    return highest


def step_totals(series: list[Series], steps: Table) -> Table:
    """What each network rate counter (EFA, NIC; a rate per second) moved in each window step (bytes for B/s)."""
    rows = []
    if len(steps):
        begin = steps["start_ns"].astype(np.int64)
        finish = begin + steps["duration_ns"].astype(np.int64)
        for one in series:
            if one.kind not in (EFA, NIC) or not is_rate(one.unit):
                continue
            keep = (one.end > one.start) & ~np.isnan(one.value)
            start, end, value = one.start[keep], one.end[keep], one.value[keep]
            if not len(value):
                continue
            moved = (_integral(start, end, value, finish) - _integral(start, end, value, begin)) / NS_PER_S
            rows += [(int(s), one.kind, one.device, one.metric, one.unit[:-2], float(m))
                     for s, m in zip(steps["step"], moved, strict=True)]  # fmt: skip
    return _table(STEP_COLUMNS, rows)


def heat_map(bins: Table, metric: str, groups: tuple[np.ndarray, list[str]] | None = None
             ) -> tuple[list[str], int, np.ndarray]:  # fmt: skip
    """(row labels 'rank R device', bin width, matrix of time-weighted means: NaN where nothing was sampled) of one
    metric over every rank's bins, brought to the widest width (whole bins added: exact). With `groups` (an index
    array from rank number to group, and each group's label), a row per group: the time-weighted mean of its ranks'
    devices."""
    mine = bins.take(bins["metric"] == metric) if len(bins) else bins
    if not len(mine):
        return [], BASE_BIN_NS, np.empty((0, 0))
    width = int(mine["bin_ns"].max())
    column = mine["bin"] * mine["bin_ns"] // width  # a bin of width w lies whole inside bin (b * w) // width
    if groups is not None:
        row, names = groups[0][mine["rank"]], groups[1]
    else:  # a row per rank and device, by rank, then device name: keys made of codes, a label per row drawn
        devices, code = factorize(mine["device"].tolist())
        by_name = np.argsort(np.argsort(np.array(devices, dtype=str), kind="stable"))  # each device's place by name
        keys, row = np.unique(mine["rank"].astype(np.int64) * len(devices) + by_name[code], return_inverse=True)
        device_of = np.array(devices, dtype=object)[np.argsort(by_name)]
        names = [f"rank {k // len(devices)} {device_of[k % len(devices)]}" for k in keys.tolist()]
    shape = (len(names), int(column.max()) + 1)
    value, covered = np.zeros(shape), np.zeros(shape)
    np.add.at(value, (row, column), mine["value_ns"])
    np.add.at(covered, (row, column), mine["covered_ns"])
    with np.errstate(invalid="ignore", divide="ignore"):
        return names, width, np.where(covered > 0, value / covered, np.nan)


def counter_window(steps: Table, kernels, series: list[Series]) -> tuple[int, int] | None:
    """The rank's analyzed window: its window steps' span, else its kernels' span, else its samples' (None: none)."""
    if len(steps):
        begin = steps["start_ns"].astype(np.int64)
        return int(begin.min()), int((begin + steps["duration_ns"].astype(np.int64)).max())
    if len(kernels):
        return int(kernels.start.min()), int(kernels.end.max())
    spans = [(int(s.start.min()), int(s.end.max())) for s in series if len(s.start)]
    return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None


def rank_tables(series: list[Series], kernels, nccl_ids: np.ndarray, steps: Table) -> dict[str, Table]:
    """The rank's counter tables over its window: stats ('counters'), time bins ('counter_bins') and what the
    network counters moved per window step ('counter_steps'); empty tables without samples."""
    window = counter_window(steps, kernels, series)
    if window is None or window[1] <= window[0] or not series:
        return {"counters": _table(STAT_COLUMNS, []), "counter_bins": counter_bins([], (0, 1)),
                "counter_steps": _table(STEP_COLUMNS, [])}  # fmt: skip
    busy = {int(d): union(kernels.start[kernels.device == d], kernels.end[kernels.device == d])
            for d in np.unique(kernels.device)} if len(kernels) else {}  # fmt: skip
    is_nccl = (
        np.isin(kernels.extra["name"], nccl_ids) if len(kernels) and "name" in kernels.extra else np.zeros(0, bool)
    )
    nccl = union(kernels.start[is_nccl], kernels.end[is_nccl]) if is_nccl.any() else (np.empty(0, np.int64),) * 2
    timings = _timings(series, *window)  # clipped once for the stats and the bins
    # the bins beside the stats: their numpy over every sample releases the GIL (a free core halves the wait)
    with ThreadPoolExecutor(max_workers=1) as pool:
        bins = pool.submit(counter_bins, series, window, timings)
        stats = counter_stats(series, window, busy, nccl, timings)
        return {"counters": stats, "counter_bins": bins.result(), "counter_steps": step_totals(series, steps)}


def shares(series: list[Series], devices: list[np.ndarray]) -> list[list[Series]]:
    """A file of several ranks (`devices`: the GPUs each rank's kernels ran on): each GPU's metrics go to the first
    rank that used that GPU, the rest (network counters, GPUs no rank used) to the file's first rank; each series
    once."""
    owner: dict[int, int] = {}
    for index in reversed(range(len(devices))):
        owner.update(dict.fromkeys((int(d) for d in devices[index]), index))
    out: list[list[Series]] = [[] for _ in devices]
    for one in series:
        out[owner.get(one.device_id, 0)].append(one)
    return out


def outside_line(source: str, series: list[Series]) -> str:
    """The one line for a report whose counters hold no sample inside its window: how many, and when they were."""
    spans = [(int(s.start.min()), int(s.end.max())) for s in series if len(s.start)]
    sampled = f"{min(a for a, _b in spans)}-{max(b for _a, b in spans)} ns" if spans else "no time"
    return (f"{source}: {len(series)} counter series (GPU/EFA/NIC metrics) hold no sample inside the analyzed window "
            f"(samples cover {sampled}); the counter tables leave them out; fix: sample during the profiled steps "
            "(nsys --gpu-metrics-devices / --nic-metrics with the capture range)")  # fmt: skip
