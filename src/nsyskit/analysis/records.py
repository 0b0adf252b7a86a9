"""The clean columns the reader hands to analyzers: GPU activity intervals, NVTX ranges, kernel launches."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Intervals:
    """GPU activities of one kind: start/end (ns), device, and per kind `name` (StringId), `bytes`, `kind`, `correlation`."""

    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.start)

    @classmethod
    def empty(cls, *extra: str) -> Intervals:
        """No activities, with the given extra columns."""
        nothing = np.empty(0, dtype=np.int64)
        return cls(nothing, nothing, nothing, {name: nothing for name in extra})

    def take(self, index: np.ndarray) -> Intervals:
        """The activities at `index` (a mask or index array), every column kept."""
        return Intervals(
            self.start[index], self.end[index], self.device[index], {k: v[index] for k, v in self.extra.items()}
        )


@dataclass(frozen=True)
class NvtxRanges:
    """NVTX ranges with resolved text, domain and numeric payload (NaN when absent)."""

    start: np.ndarray
    end: np.ndarray
    text: np.ndarray  # object array of str
    domain: np.ndarray  # object array of str ('' for the default domain)
    thread: np.ndarray
    payload: np.ndarray  # float64, NaN when the range has no numeric payload
    json: np.ndarray  # object array: JSON payload text or None

    def __len__(self) -> int:
        return len(self.start)

    def take(self, index: np.ndarray) -> NvtxRanges:
        """The ranges at `index` (a mask or index array)."""
        return NvtxRanges(*(getattr(self, name)[index] for name in NVTX_FIELDS))


NVTX_FIELDS = ("start", "end", "text", "domain", "thread", "payload", "json")


@dataclass(frozen=True)
class Launches:
    """CUDA API calls that launched a kernel: calling thread, call start (ns), and the kernel's row in the kernel table."""

    thread: np.ndarray
    start: np.ndarray
    kernel: np.ndarray

    def __len__(self) -> int:
        return len(self.start)


def empty_nvtx() -> NvtxRanges:
    """No NVTX ranges."""
    ints, objs = np.empty(0, dtype=np.int64), np.empty(0, dtype=object)
    return NvtxRanges(ints, ints, objs, objs, ints, np.empty(0, dtype=np.float64), objs)


def distinct(ids: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an integer array; a counting pass instead of a sort when their range is small."""
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) == 0:
        return ids
    low, high = int(ids.min()), int(ids.max())
    if high - low < max(1 << 20, len(ids)):
        return np.flatnonzero(np.bincount(ids - low)) + low
    return np.unique(ids)


def join_launches(thread: np.ndarray, start: np.ndarray, correlation: np.ndarray, kernels: Intervals) -> Launches:
    """CUDA API calls (thread, start, correlationId) matched to the kernels with the same correlationId (sort + search)."""
    if not len(kernels) or "correlation" not in kernels.extra:
        return Launches(*(np.empty(0, dtype=np.int64),) * 3)
    order = np.argsort(kernels.extra["correlation"], kind="stable")
    sorted_corr = kernels.extra["correlation"][order]
    at = np.minimum(np.searchsorted(sorted_corr, correlation), len(sorted_corr) - 1)
    hit = sorted_corr[at] == correlation
    return Launches(thread[hit], start[hit], order[at[hit]])
