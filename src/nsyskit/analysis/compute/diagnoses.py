"""Each rank's evidence for the host-side diagnoses: why its GPU idles (syncs, launches, allocator, module loads, long
gaps, data loading), measured in the map (compute.evidence's extractors) and judged across ranks by judge/diagnoses.

Time is measured per iteration: the rank's window steps ('step N' ranges) when it has them, else one iteration per
data-loader range (a loop annotated only by PyTorch's DataLoader), else the GPU's active span as one iteration.
Every measure is numpy over whole arrays: interval unions, prefix sums and binary searches, no loop per call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from nsyskit.analysis.compute import evidence, sweep
from nsyskit.analysis.compute.intervals import covered, length, merge, union
from nsyskit.analysis.read.apicalls import ALLOC, MODULE, OSRT_TABLES, SYNC, ApiCalls

SYNC_STALL, LAUNCH_BOUND, ALLOCATOR = "sync_stall", "launch_bound", "allocator"
MODULE_LOADING, GPU_GAPS, DATA_LOADING = "module_loading", "gpu_gaps", "data_loading"
RULES = (SYNC_STALL, LAUNCH_BOUND, ALLOCATOR, MODULE_LOADING, GPU_GAPS, DATA_LOADING)

# NVTX ranges of a data loader: PyTorch's own (`enumerate(DataLoader)#_...Iter.__next__`) or a user's range naming
# data, batch or input loading, fetching or reading ('Data loading', 'load_batch', 'get_batch', 'data_fetch' ...).
DATA_LOADER = re.compile(
    r"enumerate\(DataLoader\)#.*__next__|.*dataloader|.*\b(data|batch|input)[ _-]?(load|fetch|read)"
    r"|.*\b(load|fetch|read|get|next)[ _-]?(data|batch|input)",
    re.IGNORECASE,
)
GPU_GAP_NS = 500_000_000  # a single GPU idle gap this long is a finding (nsys analyze's GPU gaps rule)
LAUNCH_GAP_NS = 1_000_000  # gaps between kernels shorter than this that a launch call overlaps wait on the launch
# launch_bound's threshold (judge/diagnoses.py quotes it): GPU idle waiting on launches, % of the window. Where the
# short gaps add up to less, the launch calls' overlap with them is not measured (it cannot reach it): NaN.
LAUNCH_IDLE_PCT = 10.0
STEP_RANGES, LOADER_ITERATIONS, WHOLE_WINDOW = 0, 1, 2  # what a rank's iterations are (the `basis` row)
STEPS_LISTED = 8  # steps named per rank (as "step=N" keys) where a rule concerns some steps only


@dataclass
class Rank:
    """What the rules share on one rank: its GPU busy time, its iterations, its host calls and its data loading."""

    busy: tuple[np.ndarray, np.ndarray]  # union of the rank's kernels, memcpys and memsets
    iterations: tuple[np.ndarray, np.ndarray]  # start, end of each iteration (sorted)
    numbers: np.ndarray  # step number of each iteration (-1: not a step range)
    basis: int  # what the iterations are: STEP_RANGES, LOADER_ITERATIONS or WHOLE_WINDOW
    calls: ApiCalls
    loading: tuple[np.ndarray, np.ndarray]  # union of the data loader's ranges and the waits between steps
    waiting: tuple[np.ndarray, np.ndarray]  # union of the launching threads' OS waits and the data loader's ranges
    loader_ns: int  # of which in the data loader's NVTX ranges
    kernel_spans: object  # the rank's kernels (records.Intervals): their durations are read only where needed
    launch_spans: Callable[[], tuple[np.ndarray, np.ndarray]]  # the launch calls' (start, end), read when called

    @property
    def window(self) -> tuple[int, int]:
        """First iteration's start, last iteration's end."""
        return int(self.iterations[0][0]), int(self.iterations[1][-1])

    @property
    def count(self) -> int:
        """The number of iterations."""
        return len(self.iterations[0])

    def within(self, calls: ApiCalls) -> ApiCalls:
        """The calls that lie inside the window."""
        low, high = self.window
        keep = (calls.start >= low) & (calls.end <= high)
        return ApiCalls(calls.thread[keep], calls.start[keep], calls.end[keep], calls.kind[keep])

    def steps_of(self, times: np.ndarray) -> np.ndarray:
        """The iteration index of each time (-1 outside every iteration)."""
        starts, ends = self.iterations
        index = np.searchsorted(starts, times, side="right") - 1
        inside = (index >= 0) & (times < ends[np.maximum(index, 0)])
        return np.where(inside, index, -1)

    def cycles_of(self, times: np.ndarray) -> np.ndarray:
        """The iteration each time belongs to, a time between two iterations to the next one (the loop's work before
        a step is that step's); -1 after the last."""
        index = np.searchsorted(self.iterations[1], times, side="right")  # the first iteration ending after it
        return np.where(index < self.count, index, -1)


def idle_after(busy: tuple[np.ndarray, np.ndarray], times: np.ndarray, high: int) -> np.ndarray:
    """How long the GPU stays idle from each time on (0 where it is busy then), up to `high`."""
    starts, ends = busy
    following = np.searchsorted(ends, times, side="right")  # the first busy interval that ends after the time
    nxt = (
        np.where(following < len(starts), starts[np.minimum(following, len(starts) - 1)], high) if len(starts) else high
    )
    return np.clip(np.minimum(nxt, high) - times, 0, None)


def gpu_busy(kernels, memcpys, memsets) -> tuple[np.ndarray, np.ndarray]:
    """The union of a rank's kernels, memcpys and memsets (the map may compute it beside its other tables)."""
    return sweep.union([(a.start, a.end) for a in (kernels, memcpys, memsets) if a is not None])


def rank_view(inputs: evidence.RankInputs) -> Rank | None:
    """The rank's shared measures (None: no GPU activity, nothing to diagnose)."""
    if inputs.kernels is None or not len(inputs.kernels):
        return None
    busy = inputs.busy if inputs.busy is not None else gpu_busy(inputs.kernels, inputs.memcpys, inputs.memsets)
    reader = inputs.reader
    calls = reader.api_calls(inputs.pid) if reader is not None else ApiCalls.empty()
    loader = _loader_ranges(inputs)
    iterations, numbers, basis = _iterations(inputs, busy, loader)
    stepped = basis == STEP_RANGES
    low, high = int(iterations[0][0]), int(iterations[1][-1])
    waits = _clip(_waits(inputs, calls), low, high)
    between = waits
    if stepped:  # inside a step the loop computes; its waits between steps are for the next batch
        outside = covered(*iterations, *waits) == 0
        between = waits[0][outside], waits[1][outside]
    loading = _clip(merge(loader, between), low, high)
    loader_ns = length(*_clip(loader, low, high))
    waiting = _clip(merge(loader, waits), low, high)
    return Rank(
        _clip(busy, low, high),
        iterations,
        numbers,
        basis,
        calls,
        loading,
        waiting,
        loader_ns,
        inputs.kernels,
        lambda: reader.launch_spans(inputs.pid) if reader is not None else (np.empty(0, dtype=np.int64),) * 2,
    )


def _clip(intervals: tuple[np.ndarray, np.ndarray], low: int, high: int) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted intervals cut to [low, high) (slices found by binary search; the two cut ends copied)."""
    start, end = intervals
    first, last = np.searchsorted(end, low, side="right"), np.searchsorted(start, high, side="left")
    start, end = start[first:last], end[first:last]
    if len(start) and start[0] < low:
        start = start.copy()
        start[0] = low
    if len(end) and end[-1] > high:
        end = end.copy()
        end[-1] = high
    return start, end


def _kernels_within(kernels, low: int, high: int) -> tuple[int, Callable[[], np.ndarray]]:
    """How many kernels start inside [low, high], and a function giving their durations (a slice by binary search
    when they are in start order, as nsys writes them: the count costs no pass)."""
    start = kernels.start
    if (start[1:] >= start[:-1]).all():
        first, last = int(np.searchsorted(start, low)), int(np.searchsorted(start, high, side="right"))
        return last - first, lambda: kernels.end[first:last] - start[first:last]
    inside = (start >= low) & (start <= high)
    return int(inside.sum()), lambda: (kernels.end - start)[inside]


def _loader_ranges(inputs: evidence.RankInputs) -> tuple[np.ndarray, np.ndarray]:
    """The union of the rank's data-loader NVTX ranges."""
    nvtx, labels = inputs.nvtx, inputs.nvtx_labels
    if nvtx is None or not len(nvtx) or labels is None or not len(labels[0]):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    names, codes = labels
    loaders = [index for index, name in enumerate(names) if DATA_LOADER.match(name)]
    mine = np.isin(codes, loaders)
    return union(nvtx.start[mine], nvtx.end[mine])


def _iterations(
    inputs: evidence.RankInputs, busy: tuple[np.ndarray, np.ndarray], loader: tuple[np.ndarray, np.ndarray]
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray, int]:
    """(start, end) of each iteration, their step numbers, and what they are (STEP_RANGES ...)."""
    steps = inputs.steps
    if steps is not None and len(steps):
        order = np.argsort(steps["start_ns"], kind="stable")
        start = steps["start_ns"][order].astype(np.int64)
        return (start, start + steps["duration_ns"][order].astype(np.int64)), steps["step"][order], STEP_RANGES
    first, last = int(busy[0][0]), int(busy[1][-1])
    if len(loader[0]) >= 2:  # an iteration from each loader range to the next (the last one to the GPU's end)
        start = loader[0]
        end = np.append(start[1:], max(last, int(loader[1][-1])))
        return (start, end), np.full(len(start), -1, dtype=np.int64), LOADER_ITERATIONS
    return (np.asarray([first]), np.asarray([last])), np.asarray([-1]), WHOLE_WINDOW


def _waits(inputs: evidence.RankInputs, calls: ApiCalls) -> tuple[np.ndarray, np.ndarray]:
    """The union of the OS waits (poll, futex, pthread_cond_wait, read...) of the threads that call CUDA (the
    training loop's; not its DataLoader workers')."""
    nothing = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    reader = inputs.reader
    if reader is None or not len(calls.cuda_threads) or not reader.table(OSRT_TABLES):
        return nothing
    waits = reader.os_waits(inputs.pid)
    mine = np.isin(waits.thread, calls.cuda_threads)
    return union(waits.start[mine], waits.end[mine])


def _per_step(rank: Rank, rule: str, **values: float) -> Iterator[tuple[str, str, float]]:
    """Rows of one rule: the given values plus the iterations and their mean length."""
    low, high = rank.window
    yield rule, "steps", float(rank.count)
    yield rule, "basis", float(rank.basis)
    yield rule, "step_ns", (high - low) / rank.count
    for key, value in values.items():
        yield rule, key, float(value)


def _steps_listed(rank: Rank, rule: str, times: np.ndarray, weights: np.ndarray) -> Iterator[tuple[str, str, float]]:
    """'step=N' rows (time concerned in each) for up to STEPS_LISTED steps the times fall in (step ranges only)."""
    index = rank.steps_of(times)
    keep = index >= 0
    if not keep.any() or (rank.numbers < 0).all():
        return
    numbers = rank.numbers[index[keep]]
    found, where = np.unique(numbers, return_inverse=True)
    sums = np.bincount(where, weights=weights[keep])
    for number, spent in list(zip(found.tolist(), sums.tolist(), strict=True))[:STEPS_LISTED]:
        yield rule, f"step={number}", spent


def diagnose(inputs: evidence.RankInputs) -> Iterator[tuple[str, str, float]]:
    """Every host-side rule's evidence rows of one rank (nothing on a rank without GPU activity)."""
    rank = rank_view(inputs)
    if rank is None:
        return
    yield from sync_stall(rank)
    yield from launch_bound(rank)
    yield from allocator(rank)
    yield from module_loading(rank)
    yield from gpu_gaps(rank)
    yield from data_loading(rank)


def sync_stall(rank: Rank) -> Iterator[tuple[str, str, float]]:
    """Sync calls inside the window: time blocked, and GPU idle after they return (the drained queue) while the host
    works (not while it waits for data or in an OS wait)."""
    syncs = rank.within(rank.calls.of(SYNC))
    high = rank.window[1]
    idle = idle_after(rank.busy, syncs.end, high)
    after = union(syncs.end, syncs.end + idle)
    exposed = length(*after) - int(covered(*rank.waiting, *after).sum())
    yield from _per_step(rank, SYNC_STALL, calls=len(syncs), blocked_ns=int((syncs.end - syncs.start).sum()),
                         idle_after_ns=exposed)  # fmt: skip


def launch_bound(rank: Rank) -> Iterator[tuple[str, str, float]]:
    """Short gaps between kernels that a launch call overlaps (the GPU waited while the host was launching); the
    kernels' count and median duration inside the window."""
    starts, ends = rank.busy
    gap_start, gap_end = ends[:-1], starts[1:]
    spans = gap_end - gap_start
    short = spans < LAUNCH_GAP_NS
    low, high = rank.window
    count, durations = _kernels_within(rank.kernel_spans, low, high)
    starved = median = float("nan")
    if 100.0 * int(spans[short].sum()) >= LAUNCH_IDLE_PCT * (high - low):  # else it cannot reach the threshold
        median = _median(durations())
        launches = rank.launch_spans()  # read now: only a rank whose short gaps could reach the threshold
        starved = _starved(*launches, gap_start[short], gap_end[short])
    yield from _per_step(rank, LAUNCH_BOUND, kernels=count, median_kernel_ns=median,
                         launches=rank.calls.launches, busy_ns=length(starts, ends), starved_ns=starved)  # fmt: skip


def _starved(launches: np.ndarray, launch_end: np.ndarray, gap_start: np.ndarray, gap_end: np.ndarray) -> int:
    """The length of the gaps a launch call overlaps (calls in start order; those outside the window overlap no gap
    inside it)."""
    if not len(launches):
        return 0
    # The first call (in start order) reaching past a gap's start overlaps the gap when it starts before its end.
    sorted_ends = (launch_end[1:] >= launch_end[:-1]).all()  # one thread's calls never overlap: no accumulate
    reach = launch_end if sorted_ends else np.maximum.accumulate(launch_end)
    first = np.searchsorted(reach, gap_start, side="right")
    overlapped = (first < len(launches)) & (launches[np.minimum(first, len(launches) - 1)] < gap_end)
    return int((gap_end - gap_start)[overlapped].sum())


def _median(values: np.ndarray) -> float:
    """The median of an array this module owns (partitioned in place: no copy of a million durations)."""
    if not len(values):
        return float("nan")
    half = len(values) // 2
    kth = [half] if len(values) % 2 else [half - 1, half]
    values.partition(kth)
    return float(values[kth].mean())


def allocator(rank: Rank) -> Iterator[tuple[str, str, float]]:
    """Allocator calls inside the iterations: calls, CPU time, iterations with any, GPU idle beside them."""
    calls = rank.within(rank.calls.of(ALLOC))
    index = rank.cycles_of(calls.start)
    spans = union(calls.start, calls.end)
    idle = length(*spans) - int(covered(*rank.busy, *spans).sum())
    yield from _per_step(rank, ALLOCATOR, calls=len(calls), cpu_ns=int((calls.end - calls.start).sum()),
                         steps_with_calls=len(np.unique(index[index >= 0])), idle_beside_ns=idle)  # fmt: skip


def module_loading(rank: Rank) -> Iterator[tuple[str, str, float]]:
    """Module loads and JIT compilation inside the window: calls and host time."""
    calls = rank.within(rank.calls.of(MODULE))
    spent = calls.end - calls.start
    yield from _per_step(rank, MODULE_LOADING, calls=len(calls), load_ns=int(spent.sum()))
    yield from _steps_listed(rank, MODULE_LOADING, calls.start, spent)


def gpu_gaps(rank: Rank) -> Iterator[tuple[str, str, float]]:
    """GPU idle gaps of GPU_GAP_NS or more inside the window, and what the host did meanwhile (ns in each kind)."""
    low, high = rank.window
    starts, ends = rank.busy
    gap_start = np.concatenate(([low], ends))
    gap_end = np.concatenate((starts, [high]))
    long = (gap_end - gap_start) >= GPU_GAP_NS
    gap_start, gap_end = gap_start[long], gap_end[long]
    doing = {}
    for name, kind in (("sync", SYNC), ("alloc", ALLOC), ("module", MODULE)):  # a launch lasts microseconds
        mine = rank.calls.of(kind)
        doing[f"host_{name}_ns"] = int(covered(*union(mine.start, mine.end), gap_start, gap_end).sum())
    doing["host_waiting_ns"] = int(covered(*rank.waiting, gap_start, gap_end).sum())
    spans = gap_end - gap_start
    yield from _per_step(rank, GPU_GAPS, gaps=len(spans), total_ns=int(spans.sum()),
                         longest_ns=int(spans.max()) if len(spans) else 0, **doing)  # fmt: skip
    yield from _steps_listed(
        rank, GPU_GAPS, gap_start + spans // 2, spans.astype(np.float64)
    )  # the step most of it is in


def data_loading(rank: Rank) -> Iterator[tuple[str, str, float]]:
    """Time in the data loader (its ranges, the launching thread's waits between steps) and GPU idle during it."""
    loading = rank.loading
    spent = length(*loading)
    idle = spent - int(covered(*rank.busy, *loading).sum())
    yield from _per_step(rank, DATA_LOADING, loading_ns=spent, loader_ranges_ns=rank.loader_ns, idle_ns=idle)


evidence.EXTRACTORS.append(diagnose)
