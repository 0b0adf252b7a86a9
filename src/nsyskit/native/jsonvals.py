"""jsonvals.c bound with ctypes: the values of flat JSON objects in one C pass, or None to use numpy or json.loads.

Built into the wheel or compiled once per machine (nsyskit.native.build); without a compiler, or with
NSYSKIT_NATIVE_JSONVALS=0, values returns None and its caller's paths give the same numbers.
"""

from __future__ import annotations

import ctypes

import numpy as np

from nsyskit import native

DISABLE_VARIABLE = "NSYSKIT_NATIVE_JSONVALS"

_loaded: list = []  # [(nsk_json_values,) or None] once looked for in this process


def function():
    """The compiled nsk_json_values, typed; None when it cannot be built here."""
    found = native.load(_loaded, "jsonvals", DISABLE_VARIABLE, {
        "nsk_json_values": (ctypes.c_int64, [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]),
    })  # fmt: skip
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
