"""launches.c bound with ctypes: the launch join and the NVTX-to-GPU projection in one pass each, or None to use numpy.

Built into the wheel or compiled once per machine (nsyskit.native.build); without a compiler, or with
NSYSKIT_NATIVE_LAUNCHES=0, every function here returns None and its caller's numpy path gives the same numbers.
"""

from __future__ import annotations

import ctypes

import numpy as np

from nsyskit import native

DISABLE_VARIABLE = "NSYSKIT_NATIVE_LAUNCHES"
NOT_INTEGER = -2  # nsk_join_launches: a wanted call's start is not an INTEGER

_loaded: list = []  # [(join, project) or None] once looked for in this process


def functions():
    """The compiled (nsk_join_launches, nsk_project), typed; None when they cannot be built here."""
    size, pointer = ctypes.c_int64, ctypes.c_void_p
    return native.load(_loaded, "launches", DISABLE_VARIABLE, {
        "nsk_join_launches": (size, [size, *(pointer,) * 6, size, pointer, size, pointer, size, size, *(pointer,) * 3]),
        "nsk_project": (ctypes.c_int, [size, *(pointer,) * 3, size, *(pointer,) * 3, size, *(pointer,) * 7]),
    })  # fmt: skip


def _address(array: np.ndarray | None):
    return None if array is None else array.ctypes.data


def join(
    thread: np.ndarray, start: np.ndarray, corr: np.ndarray, kinds: tuple[np.ndarray | None, ...],
    threads: np.ndarray, kernel_corr: np.ndarray, low: int, high: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | int | None:  # fmt: skip
    """(thread, start, kernel row) of the calls on `threads` (sorted, distinct) that launched a kernel, by a lookup
    table over [low, high] (the kernels' correlationId span); `kinds` (thread, start, corr) as pagescan gives
    them, None where all are INTEGERs. NOT_INTEGER when a wanted call's start is not an INTEGER; None: use numpy."""
    compiled = functions()
    if compiled is None:
        return None
    arrays = [np.ascontiguousarray(a, dtype=np.int64) for a in (thread, start, corr, threads, kernel_corr)]
    thread, start, corr, threads, kernel_corr = arrays
    kinds = tuple(None if k is None else np.ascontiguousarray(k, dtype=np.uint8) for k in kinds)
    outs = [np.empty(len(start), dtype=np.int64) for _ in range(3)]
    found = compiled[0](
        len(start), _address(thread), _address(start), _address(corr), *(_address(k) for k in kinds),
        len(threads), _address(threads), len(kernel_corr), _address(kernel_corr), low, high, *(_address(o) for o in outs),
    )  # fmt: skip
    if found == NOT_INTEGER:
        return NOT_INTEGER
    if found < 0:
        return None
    return outs[0][:found], outs[1][:found], outs[2][:found]


def project(
    thread: np.ndarray, start: np.ndarray, end: np.ndarray, launch_thread: np.ndarray, launch_start: np.ndarray,
    launch_kernel: np.ndarray, kernel_start: np.ndarray, kernel_end: np.ndarray, only: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:  # fmt: skip
    """(count, total, first, last) per range of projection.project, launches sorted by (thread, start); None: use
    numpy (no compiler, or launches out of that order)."""
    compiled = functions()
    if compiled is None:
        return None
    ints = [np.ascontiguousarray(a, dtype=np.int64) for a in
            (thread, start, end, launch_thread, launch_start, launch_kernel, kernel_start, kernel_end)]  # fmt: skip
    mask = None if only is None else np.ascontiguousarray(only.view(np.uint8) if only.dtype == bool else only, dtype=np.uint8)
    if mask is not None and len(mask) != len(kernel_start):
        return None
    outs = [np.empty(len(start), dtype=np.int64) for _ in range(4)]
    done = compiled[1](
        len(start), *(_address(a) for a in ints[:3]), len(launch_start), *(_address(a) for a in ints[3:6]),
        len(kernel_start), _address(ints[6]), _address(ints[7]), _address(mask), *(_address(o) for o in outs),
    )  # fmt: skip
    return None if done != 0 else (outs[0], outs[1], outs[2], outs[3])
