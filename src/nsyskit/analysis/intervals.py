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


def covered(union_start: np.ndarray, union_end: np.ndarray, points: np.ndarray) -> np.ndarray:
    """For each point x, the length of the union (sorted, disjoint) that lies before x: a prefix sum and a search."""
    before = np.zeros(len(union_start) + 1, dtype=np.int64)
    np.cumsum(union_end - union_start, out=before[1:])
    index = np.searchsorted(union_start, points, side="right")  # unions starting at or before x
    last = np.maximum(index - 1, 0)
    inside = np.where(index > 0, np.minimum(points, union_end[last]) - union_start[last], 0)
    return before[np.maximum(index - 1, 0)] + np.maximum(inside, 0)


def overlap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """The length of A ∩ B for two unions (sorted, disjoint): per interval of the smaller one, B's length inside it."""
    if len(a[0]) > len(b[0]):
        a, b = b, a
    if not len(a[0]) or not len(b[0]):
        return 0
    return int(np.sum(covered(*b, a[1]) - covered(*b, a[0]), dtype=np.int64))


def merge(*unions: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The union of several interval sets (each already a union or not)."""
    if not unions:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    return union(np.concatenate([u[0] for u in unions]), np.concatenate([u[1] for u in unions]))


def clip(start: np.ndarray, end: np.ndarray, low: int, high: int) -> tuple[np.ndarray, np.ndarray]:
    """Intervals clipped to [low, high)."""
    return np.clip(start, low, high), np.clip(end, low, high)
