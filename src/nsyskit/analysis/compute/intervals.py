"""Exact, vectorized interval arithmetic: unions of [start, end) intervals and their lengths (numpy, no Python loops)."""

from __future__ import annotations

import numpy as np


def union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted, disjoint (start, end) arrays; touching intervals merge; empty ones vanish."""
    keep = end > start
    if not keep.all():
        start, end = start[keep], end[keep]
    if len(start) == 0:
        return start.astype(np.int64), end.astype(np.int64)
    if not (start[1:] >= start[:-1]).all():  # nsys writes kernels in start order: then no sort, no copies
        order = np.argsort(start, kind="stable")
        start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    # A new merged interval begins where a start lies beyond everything reached before it.
    begins = np.empty(len(start), dtype=bool)
    begins[0] = True
    begins[1:] = start[1:] > reach[:-1]
    first = np.flatnonzero(begins)
    last = np.append(first[1:] - 1, len(start) - 1)
    return start[first], reach[last]


def length(start: np.ndarray, end: np.ndarray) -> int:
    """Total length of disjoint intervals."""
    return int(np.sum(end - start, dtype=np.int64))


def merge(*unions: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The union of several interval sets (each already a union or not)."""
    if not unions:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    return union(np.concatenate([u[0] for u in unions]), np.concatenate([u[1] for u in unions]))


def covered(union_start: np.ndarray, union_end: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How much of each [start, end) the disjoint sorted intervals cover (prefix sums and binary searches)."""
    if not len(union_start):
        return np.zeros(len(start), dtype=np.int64)
    total = np.concatenate(([0], np.cumsum(union_end - union_start)))

    def before(times: np.ndarray) -> np.ndarray:
        index = np.searchsorted(union_start, times, side="right")
        last = np.maximum(index - 1, 0)
        beyond = np.where(index > 0, np.maximum(union_end[last] - times, 0), 0)
        return total[index] - beyond

    return before(np.asarray(end)) - before(np.asarray(start))
