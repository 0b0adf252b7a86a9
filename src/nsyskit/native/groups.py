"""groups.c bound with ctypes: values grouped by a small integer key and each group's middle values, or None to use
numpy.

Built into the wheel or compiled once per machine (nsyskit.native.build); without a compiler, or with
NSYSKIT_NATIVE_GROUPS=0, every function here returns None and its caller's numpy path gives the same numbers.
"""

from __future__ import annotations

import ctypes

import numpy as np

from nsyskit import native

DISABLE_VARIABLE = "NSYSKIT_NATIVE_GROUPS"

_loaded: list = []  # [(group, middles) or None] once looked for in this process


def functions():
    """The compiled (nsk_group, nsk_middles), typed; None when they cannot be built here."""
    size, pointer = ctypes.c_int64, ctypes.c_void_p
    return native.load(_loaded, "groups", DISABLE_VARIABLE, {
        "nsk_group": (ctypes.c_int, [size, pointer, pointer, size, pointer, pointer]),
        "nsk_middles": (ctypes.c_int, [size, pointer, pointer, pointer, size, *(pointer,) * 3]),
    })  # fmt: skip


def grouped(keys: np.ndarray, values: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(values ordered by key, stably; where each key's values begin, span + 1 entries) for int64 keys in
    [0, span); None: use numpy."""
    compiled = functions()
    if compiled is None:
        return None
    keys, values = np.ascontiguousarray(keys, dtype=np.int64), np.ascontiguousarray(values, dtype=np.int64)
    first, out = np.empty(span + 1, dtype=np.int64), np.empty(len(values), dtype=np.int64)
    if len(keys) != len(values) or compiled[0](len(keys), keys.ctypes.data, values.ctypes.data, span,
                                                first.ctypes.data, out.ctypes.data) != 0:  # fmt: skip
        return None
    return out, first


def middles(grouped: np.ndarray, firsts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per group of `grouped` (counts[g] > 0 values from firsts[g]): its ((count - 1) // 2)-th and (count // 2)-th
    smallest values; None: use numpy."""
    compiled = functions()
    if compiled is None:
        return None
    grouped = np.ascontiguousarray(grouped, dtype=np.int64)
    firsts, counts = np.ascontiguousarray(firsts, dtype=np.int64), np.ascontiguousarray(counts, dtype=np.int64)
    low, high = np.empty(len(counts), dtype=np.int64), np.empty(len(counts), dtype=np.int64)
    scratch = np.empty(int(counts.max()) if len(counts) else 0, dtype=np.int64)
    done = compiled[1](len(counts), firsts.ctypes.data, counts.ctypes.data, grouped.ctypes.data, len(grouped),
                       scratch.ctypes.data, low.ctypes.data, high.ctypes.data)  # fmt: skip
    return (low, high) if done == 0 else None
