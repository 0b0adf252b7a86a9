"""The counters' C passes (native/counterstats.c): the weighted quantiles and the time bins' running sums and maxima
give numpy's numbers bit for bit, and so does every counter table, on random series, edge cases (an empty window,
one sample, unsorted, overlapping and straddling samples, missing values, fractions, wide and huge values) and the
real A100 export's 22 GPU metrics x 76,502 samples."""

from __future__ import annotations

import numpy as np
import pytest
from native_built import do_without, require_built
from real_exports import decompress

from nsyskit.analysis.compute import counters
from nsyskit.analysis.compute.intervals import covered, union
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.read.counterread import GPU, NIC, Series, held
from nsyskit.analysis.read.reader import ExportReader
from nsyskit.analysis.trace import RankTrace
from nsyskit.native import counterstats as compiled

A100 = "aiprofiler_a100_secondOptimization.sqlite"
QS = (0.5, 0.95)


@pytest.fixture(scope="module", autouse=True)
def built():
    """counterstats.c built."""
    require_built(compiled, compiled.functions, "counterstats.c")


def tables(series, window, busy, nccl, steps=None) -> list:
    """The stats and bins tables of `series` (and the per-step totals where steps are given)."""
    found = [counters.counter_stats(series, window, busy, nccl), counters.counter_bins(series, window)]
    return found + ([counters.step_totals(series, steps)] if steps is not None else [])


def both_ways(monkeypatch, make) -> tuple[list, list]:
    """make() with the C helper, then without it (numpy only, as on a machine without a compiler)."""
    with_c = make()
    with monkeypatch.context() as patched:
        do_without(patched, compiled, compiled.functions)
        without = make()
    compiled._loaded.clear()
    return with_c, without


def assert_same(first: list, second: list) -> None:
    """Every table alike: the same columns, types and values bit for bit (NaN where NaN, the sign of zeros)."""
    for a, b in zip(first, second, strict=True):
        assert list(a.columns) == list(b.columns)
        for name in a.columns:
            x, y = np.asarray(a[name]), np.asarray(b[name])
            assert x.dtype == y.dtype, name
            if x.dtype == object:
                assert x.tolist() == y.tolist(), name
            else:
                assert np.array_equal(x, y, equal_nan=True), (name, x, y)
                assert np.array_equal(np.signbit(x), np.signbit(y)), name


def gpu(start, value, end=None, metric="m") -> Series:
    """A GPU metric series whose samples hold until the next (or over [start, end) where given)."""
    start = np.asarray(start, dtype=np.int64)
    end = held(start) if end is None else np.asarray(end, dtype=np.int64)
    return Series(GPU, "GPU 0", metric, "%", start, end, np.asarray(value, dtype=np.float64), 0)


def no_union() -> tuple[np.ndarray, np.ndarray]:
    return np.empty(0, np.int64), np.empty(0, np.int64)


def random_series(rng, count: int) -> list[Series]:
    """Series sharing their times (as GPU metrics do) with values of each kind the counters hold, and a NIC series of
    overlapping intervals, from random sample times (repeated times: samples holding no time)."""
    times = np.sort(rng.integers(0, 10**9, count))
    values = [rng.integers(0, 101, count), rng.integers(0, 3, count) * 50_000, rng.integers(-5, 5, count),
              1_100_000_000 + rng.integers(0, 9_000_000, count), rng.random(count) * 100,
              np.where(rng.random(count) < 0.9, 0, rng.integers(1, 1 << 40, count)),
              np.full(count, 7.0), rng.integers(0, 2, count) * 2.0**60 + 1]  # fmt: skip
    values = [np.asarray(v, dtype=np.float64) for v in values]
    values[0][rng.random(count) < 0.1] = np.nan  # a field some events lack
    series = [gpu(times, v, metric=f"m{i}") for i, v in enumerate(values)]
    start = np.sort(rng.integers(0, 10**9, count))
    nic = Series(NIC, "nic0", "bytes", "B/s", start, start + rng.integers(1, 10**8, count), rng.random(count) * 1e9)
    return [*series, nic]


@pytest.mark.parametrize("seed", range(12))
def test_random_series_give_numpys_tables(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    series = random_series(rng, int(rng.integers(1, 3000)))
    low = int(rng.integers(-(10**8), 5 * 10**8))
    window = (low, low + int(rng.integers(1, 10**9)))
    kernels = np.sort(rng.integers(0, 10**9, (2, 40)), axis=0)
    busy = {0: union(kernels[0], kernels[0] + rng.integers(0, 10**7, 40))}
    nccl = union(kernels[1][:5], kernels[1][:5] + 10**6)
    steps = Table({"step": np.arange(3), "start_ns": np.array([0, 3, 6]) * 10**8,
                            "duration_ns": np.full(3, 2 * 10**8)})  # fmt: skip
    with_c, without = both_ways(monkeypatch, lambda: tables(series, window, busy, nccl, steps))
    assert len(with_c[0]) and len(with_c[1])
    assert_same(with_c, without)


@pytest.mark.parametrize(
    "case",
    ["empty window", "one sample", "unsorted", "straddling", "overlapping", "window inside one sample", "no time"],
)
def test_edge_cases_give_numpys_tables(monkeypatch, case):
    ms = 1_000_000
    series, window = {
        "empty window": ([gpu([0, 10 * ms, 20 * ms], [1, 2, 3])], (50 * ms, 90 * ms)),
        "one sample": ([gpu([5 * ms], [42], end=[15 * ms])], (0, 100 * ms)),
        "unsorted": ([gpu([30 * ms, 10 * ms, 20 * ms, 0], [3, 1, 2, 9], end=[40 * ms, 20 * ms, 30 * ms, 10 * ms])],
                     (0, 40 * ms)),
        "straddling": ([gpu([-5 * ms, 3 * ms, 70 * ms, 99 * ms], [10, 20, 30, 40], end=[3 * ms, 70 * ms, 99 * ms,
                                                                                     150 * ms])], (0, 100 * ms)),
        "overlapping": ([gpu([0, 1 * ms, 2 * ms, 64 * ms], [5, 9, 1, 3], end=[90 * ms, 3 * ms, 70 * ms, 66 * ms])],
                        (0, 100 * ms)),
        "window inside one sample": ([gpu([0, 100 * ms], [12, 0])], (40 * ms, 41 * ms)),
        "no time": ([gpu([5 * ms, 5 * ms], [1, 2])], (0, 10 * ms)),
    }[case]  # fmt: skip
    busy = {0: (np.array([2 * ms, 50 * ms]), np.array([20 * ms, 60 * ms]))}
    with_c, without = both_ways(monkeypatch, lambda: tables(series, window, busy, no_union()))
    assert_same(with_c, without)
    if case == "empty window":
        assert not len(with_c[0]) and not len(with_c[1])


def test_the_quantiles_are_numpys_on_each_path():
    """By value (0..65535), by block of 2^16 (clocks), weights summed as integers or in numpy's order; a fraction
    leaves the values to numpy's sort."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        count = int(rng.integers(1, 400))
        base = float(rng.choice([0, 1_100_000_000, -70_000, 2.0**45]))
        span = int(rng.choice([3, 100, 65_535, 1 << 20, (1 << 32) - 1]))
        values = base + rng.integers(0, span + 1, count).astype(np.float64)
        weights = rng.integers(0, 10**6, count).astype(np.float64)
        if rng.random() < 0.3:
            weights = weights + rng.random(count)  # not whole: summed in numpy's order
        weights[0] = max(weights[0], 1.0)
        low, high = values.min(), values.max()
        if low == high:
            continue
        exact = compiled.exact_weights(weights)
        assert exact == bool((weights == np.floor(weights)).all())
        found = compiled.quantiles(values, weights, exact, float(low), float(high), QS)
        assert found == counters._counted_quantiles(values, weights, QS, low, high)
        assert found == counters._quantiles(values, weights, QS, exact)
    fractions = np.array([0.5, 1.0, 2.0])
    assert compiled.quantiles(fractions, np.ones(3), True, 0.5, 2.0, QS) is False


def test_weights_whose_sums_may_round_are_not_added_as_integers():
    assert not compiled.exact_weights(np.array([3.0, 2.0**51, 2.0**51]))  # total 2^52 + 3
    assert not compiled.exact_weights(np.array([1.0, -1.0]))
    assert not compiled.exact_weights(np.array([1.0, np.nan]))
    assert not compiled.exact_weights(np.array([1.5]))
    assert compiled.exact_weights(np.full(9, 1e9))


def test_the_bin_walk_gives_numpys_integrals_and_maxima():
    rng = np.random.default_rng(3)
    for _ in range(200):
        count, bins = int(rng.integers(1, 300)), int(rng.integers(1, 70))
        start = np.sort(rng.integers(0, 10**9, count))
        end = start + rng.integers(0, 10**7, count)
        clipped = counters._Clipped(start, end, int(start[0]), int(end.max()) + 1)
        values = [rng.integers(-50, 50, count).astype(np.float64) * rng.choice([1.0, 0.37]) for _ in range(5)]
        values = [value[clipped.keep] for value in values]
        first = rng.integers(0, bins, len(clipped.start))
        spans = np.minimum(rng.integers(1, 4, len(clipped.start)), bins - first)
        at = np.sort(rng.integers(int(start[0]) - 10, int(end.max()) + 10, int(rng.integers(1, 70))))
        integral, highest = compiled.bin_walk(values, clipped.weight, *clipped.marks(at), first, spans, bins)
        for row, value in enumerate(values):
            assert integral[row].tolist() == clipped.integral(value, at).tolist()
            assert highest[row].tolist() == counters._bin_maxima(value, first, spans, bins, {}).tolist()
    one, k = [np.array([1.0, np.nan])], np.array([2])
    assert compiled.bin_walk(one, np.ones(2), k, k, np.zeros(2, np.int64), np.ones(2, np.int64), 1) is None
    k = np.array([3])  # a mark past the samples
    assert compiled.bin_walk([np.ones(2)], np.ones(2), k, k, np.zeros(2, np.int64), np.ones(2, np.int64), 1) is None


@pytest.fixture(scope="module")
def a100(tmp_path_factory):
    return decompress(A100, tmp_path_factory.mktemp("a100-counterstats"))


def test_the_real_export_gives_numpys_tables(a100, monkeypatch):
    """The A100 export's GPU metrics over its kernels' span, then over five windows of steps with NCCL kernels."""
    reader = ExportReader(a100)
    try:
        trace = RankTrace(0, a100, reader)
        trace.prefetch(with_pid=True)
        series, kernels = trace.counter_series, trace.kernels
        assert len(series) == 22
        names = np.unique(kernels.extra["name"])[::3]  # a third of the kernels standing for NCCL's: a union to use
        no_steps = trace.steps().take(np.zeros(len(trace.steps()), dtype=bool))
        low, high = int(kernels.start.min()), int(kernels.end.max())
        steps = Table({"step": np.arange(5), "start_ns": np.linspace(low + 10**8, high - 2 * 10**9, 5)
                                .astype(np.int64), "duration_ns": np.full(5, 300_000_000)})  # fmt: skip
        for window_steps in (no_steps, steps):

            def make(window_steps=window_steps):
                found = counters.rank_tables(series, kernels, names, window_steps)
                return [found[name] for name in counters.TABLES]

            with_c, without = both_ways(monkeypatch, make)
            assert len(with_c[0]) == 22
            assert_same(with_c, without)
    finally:
        reader.close()


def test_the_time_inside_a_union_is_intervals_covered():
    """Spans in time order (one walk), out of order, outside the union, reversed; an empty union."""
    rng = np.random.default_rng(11)
    for _ in range(300):
        count = int(rng.integers(0, 40))
        starts = np.sort(rng.integers(0, 1000, count))
        ends = starts + rng.integers(0, 60, count)
        spans = np.sort(rng.integers(-100, 1200, int(rng.integers(0, 200))))
        span_end = spans + rng.integers(-5, 80, len(spans))  # some reversed: numpy's numbers all the same
        if rng.random() < 0.5:
            order = rng.permutation(len(spans))
            spans, span_end = spans[order], span_end[order]
        merged = union(starts, ends)
        found = compiled.covered(*merged, spans, span_end)
        assert found.dtype == np.float64
        assert found.tolist() == covered(*merged, spans, span_end).astype(np.float64).tolist()
    assert compiled.covered(np.array([5, 1]), np.array([6, 2]), np.array([0]), np.array([9])) is None  # not sorted


def test_the_time_weighted_sums_are_numpys_bit_for_bit():
    """numpy's pairwise order on every length (blocks of 8 and 128, halves of longer runs), values of any size."""
    rng = np.random.default_rng(5)
    lengths = [*range(0, 300), *rng.integers(300, 150_000, 40).tolist()]
    for count in lengths:
        values = rng.standard_normal(count) * 10.0 ** rng.integers(-8, 12, count)
        weights = [rng.integers(0, 10**6, count).astype(np.float64) for _ in range(int(rng.integers(1, 5)))]
        found = compiled.weighted_sums(values, weights)
        assert found == [float((values * weight).sum()) for weight in weights], count
    assert compiled.weighted_sums(np.ones(3), [np.ones(3)] * 5) is None  # at most four at once
