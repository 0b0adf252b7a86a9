"""Which GPU work each NVTX range launched, for all ranges at once: a join of CUDA launches and kernels, no SQL per range.

A kernel belongs to a range when the CUDA API call that launched it ran on the range's thread inside the range (the
rule of Nsight Systems' nvtx_gpu_proj_sum recipe). Launches are sorted by (thread, call start) once; each range is
then two binary searches, and its kernels' first start, last end and total time are prefix/segment reductions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsyskit.analysis.read.records import Intervals, Launches
from nsyskit.native import launches as compiled


@dataclass(frozen=True)
class Projection:
    """Per range: kernels launched, their total time, and the GPU span they cover (gpu_start/gpu_end -1 when none)."""

    kernels: np.ndarray
    kernel_ns: np.ndarray
    gpu_start: np.ndarray
    gpu_end: np.ndarray

    @property
    def span_ns(self) -> np.ndarray:
        """GPU time each range projects onto the GPU: last kernel end - first kernel start (0 without kernels)."""
        return np.where(self.kernels > 0, self.gpu_end - self.gpu_start, 0)


def project(thread: np.ndarray, start: np.ndarray, end: np.ndarray, launches: Launches, kernels: Intervals,
            only: np.ndarray | None = None) -> Projection:  # fmt: skip
    """The GPU projection of ranges (thread, start, end), counting only kernels where `only` (a kernel mask) is set."""
    n = len(start)
    if n and len(launches):  # one C pass (launches.c) where it is built; launches out of order are sorted first
        args = (kernels.start, kernels.end, only)
        found = compiled.project(thread, start, end, launches.thread, launches.start, launches.kernel, *args)
        if found is None and compiled.functions() and not _in_order(launches.thread, launches.start):
            order = np.lexsort((launches.start, launches.thread))
            sorted_calls = (launches.thread[order], launches.start[order], launches.kernel[order])
            found = compiled.project(thread, start, end, *sorted_calls, *args)
        if found is not None:
            return Projection(*found)
    counts, totals = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    first, last = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    keep = np.ones(len(launches), dtype=bool) if only is None else only[launches.kernel]
    if n == 0 or not keep.any():
        return Projection(counts, totals, first, last)
    l_thread, l_start, kernel = launches.thread, launches.start, launches.kernel
    if only is not None:
        l_thread, l_start, kernel = l_thread[keep], l_start[keep], kernel[keep]
    if not _in_order(l_thread, l_start):  # one launching thread (the usual loop): calls are in time order already
        order = np.lexsort((l_start, l_thread))
        l_thread, l_start, kernel = l_thread[order], l_start[order], kernel[order]
    k_start, k_end = kernels.start[kernel], kernels.end[kernel]
    lo, hi = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    for tid in np.unique(thread):  # few threads: per thread, every range's launches are one contiguous slice
        a, b = np.searchsorted(l_thread, tid, "left"), np.searchsorted(l_thread, tid, "right")
        mine = thread == tid
        lo[mine] = a + np.searchsorted(l_start[a:b], start[mine], "left")
        hi[mine] = a + np.searchsorted(l_start[a:b], end[mine], "right")
    counts = hi - lo
    prefix = np.concatenate(([0], np.cumsum(k_end - k_start)))
    totals = prefix[hi] - prefix[lo]
    some = counts > 0
    if some.any():
        first[some] = _segment(np.minimum, k_start, lo[some], hi[some])
        last[some] = _segment(np.maximum, k_end, lo[some], hi[some])
    return Projection(counts, totals, first, last)


def _in_order(thread: np.ndarray, start: np.ndarray) -> bool:
    """Whether the calls are sorted by (thread, start), as np.lexsort((start, thread)) would order them."""
    if len(thread) < 2:
        return True
    later_thread, same_thread = thread[1:] > thread[:-1], thread[1:] == thread[:-1]
    return bool((later_thread | (same_thread & (start[1:] >= start[:-1]))).all())


def _segment(ufunc: np.ufunc, values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """ufunc.reduce over each non-empty slice values[lo:hi], all at once (reduceat over interleaved bounds)."""
    padded = np.append(values, values[:1])  # hi may equal len(values): keep every index valid
    bounds = np.empty(2 * len(lo), dtype=np.int64)
    bounds[0::2], bounds[1::2] = lo, hi
    return ufunc.reduceat(padded, bounds)[0::2]
