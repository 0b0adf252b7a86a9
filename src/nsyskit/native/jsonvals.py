"""jsonvals.c bound with ctypes: the values of flat JSON objects in one C pass, or None to use numpy or json.loads.

Built into the wheel or compiled once per machine (nsyskit.native.build); without a compiler, or with
NSYSKIT_NATIVE_JSONVALS=0, values returns None and its caller's paths give the same numbers.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from nsyskit import native

DISABLE_VARIABLE = "NSYSKIT_NATIVE_JSONVALS"
SPLIT_AT = 16_384  # objects from which spans() reads in two threads (a thread's start costs ~0.1 ms)

_loaded: list = []  # [(nsk_json_values, nsk_json_spans) or None] once looked for in this process


def functions():
    """The compiled (nsk_json_values, nsk_json_spans), typed; None when they cannot be built here."""
    size, pointer = ctypes.c_int64, ctypes.c_void_p
    return native.load(_loaded, "jsonvals", DISABLE_VARIABLE, {
        "nsk_json_values": (size, [ctypes.c_char_p, size, size, size, pointer]),
        "nsk_json_spans": (size, [pointer, pointer, pointer, size, size, size, size, pointer]),
    })  # fmt: skip


def function():
    """The compiled nsk_json_values, typed; None when it cannot be built here."""
    found = functions()
    return found[0] if found else None


def values(text: bytes, count: int, width: int) -> np.ndarray | None:
    """A (count, width) float64 matrix of the objects' values (NaN where one is not a number); None: the objects are
    not all alike (see jsonvals.c) or the helper is not built here."""
    compiled = function()
    if compiled is None or count <= 0 or width <= 0:
        return None
    out = np.empty((count, width), dtype=np.float64)
    done = compiled(text, len(text), count, width, out.ctypes.data)
    return out if done == count else None


def spans(address: int, size: int, starts: np.ndarray, ends: np.ndarray, width: int) -> np.ndarray | None:
    """values() of the objects at [starts[i], ends[i]) of the `size` bytes at `address` (a C buffer: pagescan's
    texts), none copied, as a (count, width) matrix in Fortran order (each field's values contiguous: a series); None
    as for values(), or when a span lies outside the buffer. From SPLIT_AT objects on,
    the second half is read by a second thread (the GIL released): the same numbers, sooner where a core is free."""
    found = functions()
    count = len(starts)
    if found is None or count <= 0 or width <= 0 or not address or len(ends) != count:
        return None
    starts, ends = np.ascontiguousarray(starts, dtype=np.int64), np.ascontiguousarray(ends, dtype=np.int64)
    if starts.min() < 0 or ends.max() > size or (ends < starts).any():
        return None
    columns = np.empty((width, count), dtype=np.float64)  # a field's values contiguous: out is (count, width), F order
    out = columns.T
    middle = count // 2 if count >= SPLIT_AT else count
    done = [0, 0]

    def read(index: int, low: int, high: int) -> None:
        done[index] = found[1](address, starts.ctypes.data, ends.ctypes.data, low, high, width, count,
                               columns.ctypes.data)  # fmt: skip

    second = threading.Thread(target=read, args=(1, middle, count)) if middle < count else None
    if second is not None:
        second.start()
    read(0, 0, middle)
    if second is not None:
        second.join()
    return out if done[0] == middle and done[1] == count - middle else None
