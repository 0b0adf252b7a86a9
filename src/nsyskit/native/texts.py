"""texts.c bound with ctypes: NVTX texts without their per-call suffixes in one C pass, or None to use the regex.

Built into the wheel or compiled once per machine (nsyskit.native.build); without a compiler, or with
NSYSKIT_NATIVE_TEXTS=0, cut_suffixes returns None and its caller's regex gives the same texts.
"""

from __future__ import annotations

import ctypes

import numpy as np

from nsyskit import native

DISABLE_VARIABLE = "NSYSKIT_NATIVE_TEXTS"

_loaded: list = []  # [(nsk_cut_suffixes,) or None] once looked for in this process


def function():
    """The compiled nsk_cut_suffixes, typed; None when it cannot be built here."""
    found = native.load(_loaded, "texts", DISABLE_VARIABLE, {
        "nsk_cut_suffixes": (ctypes.c_int64, [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]),
    })  # fmt: skip
    return found[0] if found else None


def cut_suffixes(texts: list[str]) -> tuple[list[str], np.ndarray] | None:
    """(each text without its per-call suffix, the indexes of the texts left whole because they are not ASCII: the
    caller cuts those); None: use the regex (no compiler, or a text holding a NUL)."""
    compiled = function()
    if compiled is None:
        return None
    if not texts:
        return [], np.empty(0, dtype=np.int64)
    joined = ("\0".join(texts) + "\0").encode("utf-8", "surrogatepass")
    out = np.empty(len(joined), dtype=np.uint8)
    non_ascii = np.zeros(len(texts), dtype=np.uint8)
    written = compiled(joined, len(joined), len(texts), out.ctypes.data, non_ascii.ctypes.data)
    if written < 0:  # a NUL inside a text
        return None
    cut = out[:written].tobytes().decode("utf-8", "surrogatepass").split("\0")[:-1]
    return cut, np.flatnonzero(non_ascii)
