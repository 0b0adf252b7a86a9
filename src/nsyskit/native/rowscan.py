"""rowscan.c bound with ctypes: the rows of nccl-tests outputs in one C pass, or None to use the regex.

Built into the wheel or compiled once per machine (nsyskit.native.build); without a compiler, or with
NSYSKIT_NATIVE_ROWSCAN=0, scan_rows returns None and nccltests/lines.py's regex gives the same rows.
"""

from __future__ import annotations

import ctypes

import numpy as np

from nsyskit import native

DISABLE_VARIABLE = "NSYSKIT_NATIVE_ROWSCAN"
OTHER = 128  # flags of a line the regex path reads (a row in pieces, noise that starts with a digit)
BATCH = 1 << 16  # records per call: the arrays stay small whatever the file's size

_loaded: list = []  # [(nsk_nt_rows, nsk_nt_texts_size, nsk_nt_texts, nsk_nt_find, nsk_nt_line_numbers) or None]


def functions():
    """The compiled (nsk_nt_rows, nsk_nt_texts_size, nsk_nt_texts, nsk_nt_find, nsk_nt_line_numbers), typed; None
    when they cannot be built here."""
    size, pointer = ctypes.c_int64, ctypes.c_void_p
    return native.load(_loaded, "rowscan", DISABLE_VARIABLE, {
        "nsk_nt_rows": (size, [ctypes.c_char_p, size, size, size, size, *(pointer,) * 9]),
        "nsk_nt_texts_size": (size, []),
        "nsk_nt_texts": (size, [pointer, pointer]),
        "nsk_nt_find": (size, [ctypes.c_char_p, size, ctypes.c_char_p, size, size, size, pointer, pointer]),
        "nsk_nt_line_numbers": (size, [ctypes.c_char_p, size, pointer, size, pointer]),
    })  # fmt: skip


def line_numbers(buffer: bytes, offsets: list[int]) -> list[int] | None:
    """The 1-based line number of each offset (ascending) into BUFFER, in one C pass; None: count in Python."""
    compiled = functions()
    if compiled is None:
        return None
    wanted = np.asarray(offsets, dtype=np.int64)
    out = np.empty(len(wanted), np.int64)
    if compiled[4](buffer, len(buffer), wanted.ctypes.data, len(wanted), out.ctypes.data) < 0:
        return None
    return out.tolist()


def find(buffer: bytes, needle: bytes) -> list[int] | None:
    """Every offset where NEEDLE occurs in BUFFER (memmem); None: use the regex."""
    compiled = functions()
    if compiled is None:
        return None
    offsets: list[int] = []
    at, following = 0, ctypes.c_int64(0)
    while at < len(buffer):
        out = np.empty(BATCH, np.int64)
        written = compiled[3](
            buffer, len(buffer), needle, len(needle), at, BATCH, out.ctypes.data, ctypes.byref(following)
        )
        offsets += out[:written].tolist()
        at = following.value
    return offsets


def _arrays(rows: int) -> tuple[np.ndarray, ...]:
    """The C scanner's output arrays for ROWS rows (starts, lines, ints, nums, codes, flags); of 0 rows for an empty
    input, so the reader's masks and column picks work on it as on any (float arrays of no shape did not)."""
    return (np.empty(rows, np.int64), np.empty(rows, np.int64), np.empty((rows, 3), np.int64),
            np.empty((rows, 6), np.float64), np.empty((rows, 4), np.int16), np.empty(rows, np.uint8))  # fmt: skip


def scan_rows(buffer: bytes) -> dict[str, np.ndarray | list[str]] | None:
    """Every line ROW_START matches, as arrays: starts, lines (1-based), ints (size, count, root), nums (both
    placements' time, algbw, busbw), codes (type, redop, both checks: indexes into texts), flags (1 redop, 2 root,
    128 other); and texts. None: use the regex (no compiler, or more distinct texts than the C table holds)."""
    compiled = functions()
    if compiled is None:
        return None
    rows, texts_size, texts = compiled[:3]
    state = ctypes.create_string_buffer(texts_size())
    parts: list[tuple[np.ndarray, ...]] = []
    offset, line, following, following_line = 0, 1, ctypes.c_int64(0), ctypes.c_int64(1)
    while offset < len(buffer):
        arrays = _arrays(BATCH)
        written = rows(buffer, len(buffer), offset, line, BATCH, *(a.ctypes.data for a in arrays), state,
                       ctypes.byref(following), ctypes.byref(following_line))  # fmt: skip
        if written < 0:
            return None
        parts.append(tuple(a[:written] for a in arrays))
        offset, line = following.value, following_line.value
    names = ("starts", "lines", "ints", "nums", "codes", "flags")
    found: dict = {
        name: np.concatenate([part[i] for part in parts or [_arrays(0)]]) for i, name in enumerate(names)
    }
    out = ctypes.create_string_buffer(256 * 16)
    count = texts(state, out)
    found["texts"] = out.raw.split(b"\0")[:count]
    found["texts"] = [text.decode("ascii") for text in found["texts"]]
    return found
