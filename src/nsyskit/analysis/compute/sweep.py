"""A GPU's busy time by C sweeps over start-sorted interval lists (sweep.c): the breakdown's union lengths, and the
union itself (the diagnoses'); numpy's unions otherwise.

For compute (C), communication (N) and memory (M) intervals of one GPU, the breakdown needs |C|, |N|, |M|, |C∪N|,
|C∪M|, |N∪M| and |C∪N∪M|. numpy builds each union as arrays (a sort and several passes per set, four merges); the
sweep walks the lists once in start order (a k-way merge) and keeps a running union per combination. The C is
compiled once per machine (nsyskit.native); without a compiler, or with NSYSKIT_NATIVE_SWEEP=0, union_lengths
and union use the numpy unions: the same numbers.
"""

from __future__ import annotations

import ctypes

import numpy as np

from nsyskit import native
from nsyskit.analysis.compute import intervals as iv

DISABLE_VARIABLE = "NSYSKIT_NATIVE_SWEEP"
MAX_STREAMS = 8
COMPUTE, COMM, MEMORY = 1, 2, 4

_loaded: list = []  # [(the compiled functions) or None] once looked for in this process


def functions():
    """The compiled (nsk_union_lengths, nsk_union) (built and cached on first use), or None when they cannot be built
    here."""
    return native.load(_loaded, "sweep", DISABLE_VARIABLE, {
        "nsk_union_lengths": (ctypes.c_int, [ctypes.c_int64, *(ctypes.c_void_p,) * 6]),
        "nsk_union": (ctypes.c_int64, [ctypes.c_int64, *(ctypes.c_void_p,) * 5]),
    })  # fmt: skip


def function():
    """The compiled nsk_union_lengths, or None when it cannot be built here."""
    found = functions()
    return found[0] if found else None


def union(lists: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The union of several (start, end) interval lists as sorted, disjoint (start, end) arrays (intervals.union's
    result): one C merge of the start-sorted lists, else numpy's union of them all."""
    lists = [(s, e) for s, e in lists if len(s)]
    compiled = functions()
    if compiled is not None and 0 < len(lists) <= MAX_STREAMS:
        ordered = [
            _in_start_order(np.asarray(s, dtype=np.int64), np.asarray(e, dtype=np.int64), 0)[:2] for s, e in lists
        ]
        starts = (ctypes.c_void_p * len(ordered))(*(s.ctypes.data for s, _ in ordered))
        ends = (ctypes.c_void_p * len(ordered))(*(e.ctypes.data for _, e in ordered))
        counts = np.asarray([len(s) for s, _ in ordered], dtype=np.int64)
        out_start, out_end = np.empty(int(counts.sum()), dtype=np.int64), np.empty(int(counts.sum()), dtype=np.int64)
        written = compiled[1](len(ordered), starts, ends, counts.ctypes.data, out_start.ctypes.data,
                                 out_end.ctypes.data)  # fmt: skip
        if written >= 0:  # (views: the unused room goes with the arrays, at the end of the rank's map)
            return out_start[:written], out_end[:written]
    empty = np.empty(0, dtype=np.int64)
    return iv.union(np.concatenate([s for s, _ in lists] or [empty]), np.concatenate([e for _, e in lists] or [empty]))


def union_lengths(lists: list[tuple[np.ndarray, np.ndarray, int | np.ndarray]]) -> dict[int, int]:
    """For (start, end, category) lists: the length of the union of each combination of categories (mask 1..7).

    A list's category is a bit (COMPUTE, COMM, MEMORY), or a uint8 array of bits, one per interval.
    """
    compiled = function()
    if compiled is not None and 0 < len(lists) <= MAX_STREAMS:
        ordered = [
            _in_start_order(np.asarray(s, dtype=np.int64), np.asarray(e, dtype=np.int64), c) for s, e, c in lists
        ]
        starts = (ctypes.c_void_p * len(ordered))(*(s.ctypes.data for s, _, _ in ordered))
        ends = (ctypes.c_void_p * len(ordered))(*(e.ctypes.data for _, e, _ in ordered))
        kinds = (ctypes.c_void_p * len(ordered))(*(None if np.isscalar(c) else c.ctypes.data for _, _, c in ordered))
        counts = np.asarray([len(s) for s, _, _ in ordered], dtype=np.int64)
        categories = np.asarray([c if np.isscalar(c) else 1 for _, _, c in ordered], dtype=np.int64)
        out = np.zeros(8, dtype=np.int64)
        done = compiled(len(ordered), starts, ends, counts.ctypes.data, categories.ctypes.data, kinds, out.ctypes.data)
        if done == 0:
            return {mask: int(out[mask]) for mask in range(1, 8)}
    return _numpy_union_lengths(lists)


def _in_start_order(start: np.ndarray, end: np.ndarray, category):
    """The list (start, end, category) sorted by start, as contiguous arrays (nsys writes kernels in start order: then
    as it is)."""
    start, end = np.ascontiguousarray(start), np.ascontiguousarray(end)
    bits = category if np.isscalar(category) else np.ascontiguousarray(category, dtype=np.uint8)
    if len(start) < 2 or (start[1:] >= start[:-1]).all():
        return start, end, bits
    order = np.argsort(start, kind="stable")
    return start[order], end[order], (bits if np.isscalar(bits) else bits[order])


def _numpy_union_lengths(lists: list[tuple[np.ndarray, np.ndarray, int | np.ndarray]]) -> dict[int, int]:
    """union_lengths by numpy's interval unions (the path without a compiler)."""
    parts: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {COMPUTE: [], COMM: [], MEMORY: []}
    for start, end, category in lists:
        for bit in parts:
            mine = None if np.isscalar(category) else (np.asarray(category) & bit) > 0
            if mine is None and category & bit:
                parts[bit].append((start, end))
            elif mine is not None and mine.any():
                parts[bit].append((start[mine], end[mine]))
    empty = np.empty(0, dtype=np.int64)
    unions = {bit: iv.union(np.concatenate([s for s, _ in p] or [empty]), np.concatenate([e for _, e in p] or [empty]))
              for bit, p in parts.items()}  # fmt: skip
    lengths = {}
    for mask in range(1, 8):
        chosen = [unions[bit] for bit in (COMPUTE, COMM, MEMORY) if mask & bit]
        lengths[mask] = iv.length(*(chosen[0] if len(chosen) == 1 else iv.merge(*chosen)))
    return lengths
