"""The C launch helpers (launches.c): the join and the projection give numpy's launches and numbers, on random
inputs and on every real export, and a machine without them gets the same analysis."""

from __future__ import annotations

import numpy as np
import pytest
from native_built import do_without, require_built

from nsyskit.analysis import trace
from nsyskit.analysis.compute import projection
from nsyskit.analysis.read import pagescan
from nsyskit.analysis.read.records import Intervals, Launches, join_launches
from nsyskit.native import launches as compiled

INTEGER, NULL, REAL = pagescan.KIND_CODES["integer"], pagescan.KIND_CODES["null"], pagescan.KIND_CODES["real"]


@pytest.fixture(scope="module", autouse=True)
def built():
    """launches.c built."""
    require_built(compiled, compiled.functions, "launches.c")


@pytest.fixture
def numpy_only(monkeypatch):
    """The helpers absent, as on a machine without a compiler."""
    do_without(monkeypatch, compiled, compiled.functions)


def _random_trace(rng, threads: int, sorted_calls: bool):
    kernels = int(rng.integers(0, 400))
    start = rng.integers(0, 10_000, kernels)
    kernel_set = Intervals(start, start + rng.integers(0, 300, kernels), np.zeros(kernels, dtype=np.int64))
    calls = int(rng.integers(0, kernels + 1))
    thread = rng.integers(1, threads + 1, calls) * 1_000_003
    call_start = rng.integers(0, 10_000, calls)
    if sorted_calls:
        order = np.lexsort((call_start, thread))
        thread, call_start = thread[order], call_start[order]
    launches = Launches(thread, call_start, rng.integers(0, max(kernels, 1), calls) if kernels else np.zeros(0, np.int64))
    ranges = int(rng.integers(0, 60))
    range_start = rng.integers(0, 10_000, ranges)
    range_end = range_start + rng.integers(-50, 4_000, ranges)  # a few end before they start
    range_thread = rng.integers(1, threads + 2, ranges) * 1_000_003  # and some on a thread that launched nothing
    only = rng.random(kernels) < 0.3
    return (range_thread, range_start, range_end, launches, kernel_set), only


def _nested_trace(rng):
    """Ranges as training loops record them: in start order, nested (a window over steps over forward/backward over
    ops), thousands of launches on one or two threads: each launch inside several ranges."""
    calls = int(rng.integers(100, 5_000))
    call_start = np.sort(rng.integers(0, 100_000, calls))
    thread = np.where(rng.random(calls) < 0.9, 7, 9)
    order = np.lexsort((call_start, thread))
    kernel_start = call_start + rng.integers(0, 500, calls)
    kernels = Intervals(kernel_start, kernel_start + rng.integers(0, 300, calls), np.zeros(calls, dtype=np.int64))
    launches = Launches(thread[order], call_start[order], order)
    bounds = [(0, 100_000)]
    for depth in (8, 40, 400):  # steps, then phases, then ops: each inside the one before
        cuts = np.sort(rng.integers(0, 100_000, depth))
        bounds += list(zip(cuts[:-1].tolist(), (cuts[1:] - rng.integers(0, 50, depth - 1)).tolist(), strict=True))
    bounds.sort()
    start = np.asarray([a for a, _ in bounds])
    end = np.asarray([b for _, b in bounds])
    range_thread = np.where(rng.random(len(start)) < 0.95, 7, 9)
    return (range_thread, start, end, launches, kernels), rng.random(calls) < 0.2


def test_the_projection_of_nested_ranges_in_start_order_is_numpys(monkeypatch):
    """The usual shape (the C sums whole blocks of launches once and steps from one range's launches to the next)."""
    rng = np.random.default_rng(23)
    cases = [_nested_trace(rng) for _ in range(60)]
    in_c = [(_fields(projection.project(*args)), _fields(projection.project(*args, only))) for args, only in cases]
    monkeypatch.setattr(compiled, "_loaded", [None])
    in_numpy = [(_fields(projection.project(*args)), _fields(projection.project(*args, only))) for args, only in cases]
    assert in_c == in_numpy
    assert sum(sum(whole[0]) for whole, _ in in_c) > 3 * sum(len(args[3]) for args, _ in cases)  # launches nest


def _fields(result: projection.Projection) -> list[list[int]]:
    return [getattr(result, name).tolist() for name in ("kernels", "kernel_ns", "gpu_start", "gpu_end")]


@pytest.mark.parametrize("sorted_calls", [True, False])
def test_the_projection_is_numpys_for_any_ranges_and_launches(sorted_calls, monkeypatch):
    rng = np.random.default_rng(21 if sorted_calls else 22)
    cases = [_random_trace(rng, int(rng.integers(1, 4)), sorted_calls) for _ in range(300)]
    in_c = [(_fields(projection.project(*args)), _fields(projection.project(*args, only))) for args, only in cases]
    monkeypatch.setattr(compiled, "_loaded", [None])
    in_numpy = [(_fields(projection.project(*args)), _fields(projection.project(*args, only))) for args, only in cases]
    assert in_c == in_numpy
    assert any(sum(whole[0]) for whole, _ in in_c) and any(sum(masked[0]) for _, masked in in_c)  # kernels were found


def _numpy_join(rows, kinds, threads, kernels):
    """read_launch_calls' filter over pages' rows, then join_launches: the path without the helper."""
    thread_kind, start_kind, corr_kind = kinds
    calls = (corr_kind == INTEGER) & (thread_kind == INTEGER) & np.isin(rows["thread"], threads)
    if not (start_kind[calls] == INTEGER).all():
        return compiled.NOT_INTEGER
    found = join_launches(rows["thread"][calls], rows["start"][calls], rows["corr"][calls], kernels)
    return [found.thread.tolist(), found.start.tolist(), found.kernel.tolist()]


def test_the_join_is_numpys_with_nulls_duplicates_and_other_threads():
    rng = np.random.default_rng(23)
    joined = 0
    for _ in range(300):
        kernels = int(rng.integers(1, 300))
        corr = rng.integers(1_000, 1_000 + 2 * kernels, kernels)  # some ids twice: the last kernel wins, as in numpy
        kernel_set = Intervals(*(np.zeros(kernels, dtype=np.int64),) * 3, {"correlation": corr})
        calls = int(rng.integers(0, 600))
        rows = {"thread": rng.integers(1, 5, calls) * 7, "start": rng.integers(0, 10**9, calls),
                "corr": rng.integers(900, 1_100 + 2 * kernels, calls)}  # fmt: skip
        # NULL threads and ids (calls that launched nothing); now and then a NULL or REAL start (read through SQLite)
        kinds = tuple(np.where(rng.random(calls) < 0.05, NULL, INTEGER).astype(np.uint8) for _ in range(3))
        kinds[1][:] = INTEGER
        if calls and rng.random() < 0.1:
            kinds[1][rng.integers(0, calls, 3)] = rng.choice([NULL, REAL])
        threads = np.unique(rng.integers(1, 5, int(rng.integers(1, 4))) * 7)
        expected = _numpy_join(rows, kinds, threads, kernel_set)
        found = compiled.join(rows["thread"], rows["start"], rows["corr"], kinds, threads, corr, int(corr.min()), int(corr.max()))
        assert (found if found == compiled.NOT_INTEGER else [a.tolist() for a in found]) == expected
        joined += isinstance(found, tuple) and len(found[0]) > 0
    assert joined > 100


def _comparable(results: list[dict]) -> str:
    """Every number of analyze_file's results, as text (tables' columns, NCCL digests, summaries)."""
    flat = []
    for result in results:
        for key, value in sorted(result.items()):
            if hasattr(value, "columns"):
                value = {name: np.asarray(column).tolist() for name, column in value.columns.items()}
            elif hasattr(value, "groups"):
                value = ({n: np.asarray(c).tolist() for n, c in value.groups.columns.items()}, value.durations.tolist(), value.sums)
            flat.append((key, value))
    return repr(flat)


def test_a_real_export_gives_the_same_analysis_without_the_helpers(real_export, monkeypatch):
    with_helpers = _comparable(trace.analyze_file(0, real_export))
    monkeypatch.setattr(compiled, "_loaded", [None])
    assert _comparable(trace.analyze_file(0, real_export)) == with_helpers


def test_without_a_compiler_the_helpers_step_aside(numpy_only):
    args, only = _random_trace(np.random.default_rng(24), 2, True)
    assert compiled.project(*args[:3], args[3].thread, args[3].start, args[3].kernel, args[4].start, args[4].end, only) is None
    ids = np.arange(3, dtype=np.int64)
    assert compiled.join(ids, ids, ids, (None, None, None), ids, ids, 0, 2) is None
