"""The C grouping helpers (groups.c): the counting sort and the middle values are numpy's, on random inputs, and the
duration statistics and every real export's analysis are the same without them."""

from __future__ import annotations

import numpy as np
import pytest
from native_built import do_without, require_built
from test_launches_native import _comparable

from nsyskit.analysis import trace
from nsyskit.analysis.compute import analyzers
from nsyskit.native import groups as compiled


@pytest.fixture(scope="module", autouse=True)
def built():
    """groups.c built."""
    require_built(compiled, compiled.functions, "groups.c")


@pytest.fixture
def numpy_only(monkeypatch):
    """The helpers absent, as on a machine without a compiler."""
    do_without(monkeypatch, compiled, compiled.functions)


def test_values_are_grouped_by_key_in_their_order_as_a_stable_sort_groups_them():
    rng = np.random.default_rng(1)
    for _ in range(400):
        span = int(rng.integers(1, 50))
        keys = rng.integers(0, rng.integers(1, span + 1), rng.integers(0, 300))  # keys absent from the span too
        values = rng.integers(-(1 << 40), 1 << 40, len(keys))
        grouped, first = compiled.grouped(keys, values, span)
        order = np.argsort(keys, kind="stable")
        assert grouped.tolist() == values[order].tolist()
        assert first.tolist() == np.r_[0, np.cumsum(np.bincount(keys, minlength=span))].tolist()


def test_a_key_outside_the_span_sends_the_grouping_to_numpy():
    values = np.arange(3, dtype=np.int64)
    assert compiled.grouped(np.asarray([0, 3, 1]), values, 3) is None
    assert compiled.grouped(np.asarray([0, -1, 1]), values, 3) is None


@pytest.mark.parametrize("shape", ["random", "sorted", "reversed", "equal", "two values"])
def test_the_middle_values_of_each_group_are_those_of_the_sorted_group(shape):
    rng = np.random.default_rng(len(shape))
    for _ in range(200):
        counts = rng.integers(1, 60, rng.integers(1, 8))
        values = rng.integers(-1000, 1000, int(counts.sum()))
        values = {"random": values, "sorted": np.sort(values), "reversed": np.sort(values)[::-1].copy(),
                  "equal": np.full(len(values), 7), "two values": rng.integers(0, 2, len(values))}[shape]  # fmt: skip
        firsts = np.r_[0, np.cumsum(counts)[:-1]]
        before = values.copy()
        low, high = compiled.middles(values, firsts, counts)
        for group, (first, count) in enumerate(zip(firsts, counts, strict=True)):
            ordered = np.sort(values[first : first + count])
            assert (low[group], high[group]) == (ordered[(count - 1) // 2], ordered[count // 2])
        assert values.tolist() == before.tolist()  # the groups are read, not reordered


def test_duration_statistics_are_numpys_to_the_last_bit(monkeypatch):
    """Totals, medians, minima, maxima and the stddev's float sums: the same numbers with and without the helpers,
    for few keys (the counting path) and for many (the sort)."""
    rng = np.random.default_rng(9)
    for keys_span in [1, 3, 200, 70_000]:
        for _ in range(20):
            keys = rng.integers(0, keys_span, rng.integers(1, 5000)) + int(rng.integers(-5, 5))
            durations = rng.integers(0, 1 << int(rng.integers(4, 40)), len(keys))
            ids, stats = analyzers.duration_stats(keys, durations)
            monkeypatch.setattr(compiled, "_loaded", [None])
            numpy_ids, numpy_stats = analyzers.duration_stats(keys, durations)
            monkeypatch.setattr(compiled, "_loaded", [])
            assert ids.tolist() == numpy_ids.tolist()
            for name, column in stats.items():
                assert column.dtype == numpy_stats[name].dtype and column.tolist() == numpy_stats[name].tolist(), name


def test_a_real_export_gives_the_same_analysis_without_the_helpers(real_export, monkeypatch):
    with_helpers = _comparable(trace.analyze_file(0, real_export))
    monkeypatch.setattr(compiled, "_loaded", [None])
    assert _comparable(trace.analyze_file(0, real_export)) == with_helpers


def test_without_a_compiler_the_helpers_step_aside(numpy_only):
    values = np.arange(4, dtype=np.int64)
    assert compiled.grouped(values, values, 4) is None
    assert compiled.middles(values, np.asarray([0]), np.asarray([4])) is None
