"""The clean columns the reader hands to analyzers: GPU activity intervals, NVTX ranges, kernel launches."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

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
    payload: np.ndarray  # float64, NaN when the range has no numeric payload (a decoded blob's message size too)
    json: np.ndarray  # object array: JSON payload text or None
    # From extended payloads exported as blobs (payloadblob.py), None when no range has one: the communicator
    # (its 64-bit id as int64, 0 none) and the communicator's size (0 none) the payload states.
    comm: np.ndarray | None = None
    nranks: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.start)

    def take(self, index: np.ndarray) -> NvtxRanges:
        """The ranges at `index` (a mask or index array)."""
        return NvtxRanges(*(None if (v := getattr(self, name)) is None else v[index] for name in NVTX_FIELDS))

    @cached_property
    def texts(self) -> tuple[list[str], np.ndarray]:
        """(distinct texts, code of each range): per-text work (regexes) then runs once per distinct text."""
        return factorize(self.text)

    @cached_property
    def domains(self) -> tuple[list[str], np.ndarray]:
        """(distinct domains, code of each range)."""
        return factorize(self.domain)


NVTX_FIELDS = ("start", "end", "text", "domain", "thread", "payload", "json", "comm", "nranks")


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


def among(ids: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """np.isin(ids, chosen) for StringIds (a small range): one lookup per id instead of a sort."""
    if len(ids) and len(chosen) and ids.min() >= 0 and ids.max() < (1 << 24):
        table = np.zeros(int(ids.max()) + 1, dtype=bool)
        table[chosen[(chosen >= 0) & (chosen <= ids.max())]] = True
        return table[ids]
    return np.isin(ids, chosen)


def distinct(ids: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an integer array; a counting pass instead of a sort when their range is small."""
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) == 0:
        return ids
    low, high = int(ids.min()), int(ids.max())
    if high - low < max(1 << 20, len(ids)):
        return np.flatnonzero(np.bincount(ids - low)) + low
    return np.unique(ids)


def dense_correlations(low: int, high: int, kernels: int) -> bool:
    """Whether the kernels' correlationIds span [low, high] is small enough for a direct lookup table (they count up
    per process: it nearly always is)."""
    return high - low <= 4 * kernels + (1 << 20)


def join_launches(thread: np.ndarray, start: np.ndarray, correlation: np.ndarray, kernels: Intervals) -> Launches:
    """CUDA API calls (thread, start, correlationId) matched to the kernels with the same correlationId (sort + search)."""
    if not len(kernels) or "correlation" not in kernels.extra:
        return Launches(*(np.empty(0, dtype=np.int64),) * 3)
    kernel_corr = kernels.extra["correlation"]
    low, high = int(kernel_corr.min()), int(kernel_corr.max())
    if dense_correlations(low, high, len(kernel_corr)):
        row_of = np.full(high - low + 1, -1, dtype=np.int64)
        row_of[kernel_corr - low] = np.arange(len(kernel_corr))
        inside = (correlation >= low) & (correlation <= high)
        rows = np.full(len(correlation), -1, dtype=np.int64)
        rows[inside] = row_of[correlation[inside] - low]
        hit = rows >= 0
        return Launches(thread[hit], start[hit], rows[hit])
    order = np.argsort(kernel_corr, kind="stable")
    sorted_corr = kernel_corr[order]
    at = np.minimum(np.searchsorted(sorted_corr, correlation), len(sorted_corr) - 1)
    hit = sorted_corr[at] == correlation
    return Launches(thread[hit], start[hit], order[at[hit]])


def factorize(values: Iterable, count: int | None = None) -> tuple[list, np.ndarray]:
    """(distinct values in first-seen order, index of each value among them): a hash pass, no sort of strings."""
    if not isinstance(values, list | np.ndarray):
        values = list(values)
    # dict.fromkeys and map(dict.__getitem__) run in C: only the distinct values see Python code.
    index = dict.fromkeys(values)
    for code, value in enumerate(index):
        index[value] = code
    codes = np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))
    return list(index), codes


def refactorize(values: list, codes: np.ndarray) -> tuple[list, np.ndarray]:
    """factorize([values[c] for c in codes]) with Python work per value, not per code: equal values merge into one
    code, numbered in the order `codes` first reaches them (as factorize numbers them)."""
    distinct_values, merged = factorize(values)
    codes = merged[codes] if len(codes) else np.empty(0, dtype=np.int64)
    first = np.full(len(distinct_values), len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes)))  # each value's first appearance along codes
    seen = np.flatnonzero(first < len(codes))
    seen = seen[np.argsort(first[seen])]
    renumber = np.empty(len(distinct_values), dtype=np.int64)
    renumber[seen] = np.arange(len(seen))
    return [distinct_values[i] for i in seen.tolist()], renumber[codes]
