"""The breakdown's union lengths and the GPU's busy union: the C sweep (sweep.c), numpy's unions and a plain timeline
count agree."""

from __future__ import annotations

import numpy as np
import pytest
from native_built import require_built

from nsyskit.analysis.compute import analyzers, sweep
from nsyskit.analysis.read.records import Intervals


@pytest.fixture(scope="module", autouse=True)
def compiled():
    """sweep.c built."""
    require_built(sweep, sweep.function, "sweep.c")


def _covered(lists, bits=(sweep.COMPUTE, sweep.COMM, sweep.MEMORY)) -> np.ndarray:
    """Every nanosecond some interval of a category among `bits` covers (small coordinates)."""
    covered = np.zeros(3000, dtype=bool)
    for start, end, category in lists:
        for i, (s, e) in enumerate(zip(start.tolist(), end.tolist(), strict=True)):
            if (category if np.isscalar(category) else int(category[i])) in bits:
                covered[s : max(s, e)] = True
    return covered


def _timeline(lists) -> dict[int, int]:
    """Each mask's union length by marking every covered nanosecond."""
    bits = (sweep.COMPUTE, sweep.COMM, sweep.MEMORY)
    return {mask: int(_covered(lists, [b for b in bits if mask & b]).sum()) for mask in range(1, 8)}


def _random_lists(rng, in_order: bool):
    lists = []
    for category in ("per kernel", sweep.MEMORY, sweep.MEMORY):
        count = int(rng.integers(0, 60))
        start = rng.integers(0, 2800, count)
        start = np.sort(start) if in_order else start
        end = start + rng.integers(-5, 160, count)  # some end before they start: left out, as the unions do
        kinds = rng.choice([sweep.COMPUTE, sweep.COMM], count).astype(np.uint8)
        lists.append((start, end, kinds if category == "per kernel" else category))
    return lists


@pytest.mark.parametrize("in_order", [True, False])
def test_the_sweep_numpy_and_a_timeline_agree(in_order):
    rng = np.random.default_rng(11 if in_order else 12)
    for _ in range(300):
        lists = _random_lists(rng, in_order)
        assert sweep.union_lengths(lists) == sweep._numpy_union_lengths(lists) == _timeline(lists)


def test_without_the_compiled_sweep_the_numbers_are_the_same(monkeypatch):
    rng = np.random.default_rng(13)
    cases = [_random_lists(rng, True) for _ in range(20)]
    compiled = [sweep.union_lengths(lists) for lists in cases]
    monkeypatch.setattr(sweep, "_loaded", [])
    monkeypatch.setenv(sweep.DISABLE_VARIABLE, "0")
    assert sweep.function() is None
    assert [sweep.union_lengths(lists) for lists in cases] == compiled


@pytest.mark.parametrize("in_order", [True, False])
def test_the_busy_union_is_sorted_disjoint_and_covers_what_the_intervals_cover(in_order):
    rng = np.random.default_rng(21 if in_order else 22)
    for _ in range(300):
        lists = _random_lists(rng, in_order)
        start, end = sweep.union([(s, e) for s, e, _ in lists])
        assert (end > start).all() and (start[1:] > end[:-1]).all()  # disjoint, sorted, touching ones merged
        timeline = np.zeros(3000, dtype=bool)
        for s, e in zip(start.tolist(), end.tolist(), strict=True):
            timeline[s:e] = True
        assert (timeline == _covered(lists)).all()


def test_the_busy_union_without_the_compiled_sweep_is_the_same(monkeypatch):
    rng = np.random.default_rng(23)
    cases = [[(s, e) for s, e, _ in _random_lists(rng, False)] for _ in range(30)] + [
        [],
        [(np.array([5]), np.array([5]))],
    ]
    compiled = [sweep.union(lists) for lists in cases]
    monkeypatch.setattr(sweep, "_loaded", [])
    monkeypatch.setenv(sweep.DISABLE_VARIABLE, "0")
    assert sweep.functions() is None
    for lists, (start, end) in zip(cases, compiled, strict=True):
        numpy_start, numpy_end = sweep.union(lists)
        assert numpy_start.tolist() == start.tolist() and numpy_end.tolist() == end.tolist()


def test_breakdown_on_two_gpus_and_a_window():
    # Per device lists (the selection keeps the per-kernel bits with their kernels) and a window that clips.
    start = np.array([0, 5, 10, 40, 2, 30], dtype=np.int64)
    end = np.array([20, 15, 30, 60, 12, 50], dtype=np.int64)
    device = np.array([0, 0, 0, 0, 1, 1], dtype=np.int64)
    names = np.array([1, 2, 1, 2, 2, 1], dtype=np.int64)  # 2 is the NCCL kernel
    kernels = Intervals(start, end, device, {"name": names})
    copies = Intervals(np.array([25, 0], dtype=np.int64), np.array([45, 3], dtype=np.int64), np.array([0, 1]), {})
    table = analyzers.gpu_breakdown(kernels, np.array([2]), [copies])
    gpu0 = next(table.take(table["device"] == 0).rows())
    # compute [0,30), communication [5,15) and [40,60), memory [25,45): all of [0,60) busy
    assert (gpu0["compute_ns"], gpu0["comm_ns"], gpu0["memory_ns"], gpu0["busy_ns"]) == (30, 30, 20, 60)
    assert gpu0["exposed_comm_ns"] == 20 and gpu0["compute_comm_overlap_ns"] == 10
    windowed = analyzers.gpu_breakdown(kernels, np.array([2]), [copies], window=(10, 50))
    gpu1 = next(windowed.take(windowed["device"] == 1).rows())  # [2,12) comm and [30,50) compute, clipped
    assert (gpu1["compute_ns"], gpu1["comm_ns"], gpu1["window_ns"]) == (20, 2, 40)
