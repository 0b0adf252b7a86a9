"""The compiled line reader (linescan.c, built on first use by nsyskit.native), and INFO_LINE's findings through it.

findings() gives exactly what Counter(INFO_LINE.findall(...)) gives, plus the range's newline and 'NCCL INFO'/'NCCL
WARN' counts: the C code counts the plain lines (most of a log) itself and leaves the others to INFO_LINE. Without a
compiler, or with NSYSKIT_NATIVE_SCAN=0, available() is False and the scanner uses INFO_LINE alone.
"""

from __future__ import annotations

import ctypes
import os
from array import array
from collections import Counter

from nsyskit import native
from nsyskit.nccllog.scan.lines import INFO_LINE

DISABLE_VARIABLE = "NSYSKIT_NATIVE_SCAN"
FIELDS = 9  # per finding: source, op, tail, message as [a, b) offsets, then the calls
MAX_FINDINGS = 1 << 16  # distinct findings per range (more: the range is read by INFO_LINE alone)
MAX_RUNS = 1 << 16  # runs of other lines per range (likewise)

_loaded: list = []  # [the C function or None] once looked for in this process
_readers: list = []  # [this process's Reader or None]
_finds: list = []  # [the compiled nsk_find] when it could be built


def source() -> str:
    """The C source shipped with the package."""
    return native.source("linescan")


def function():
    """The compiled nsk_scan (built and cached on first use), or None when it cannot be built here."""
    if not _loaded:
        scan = find = None
        path = None if os.environ.get(DISABLE_VARIABLE) == "0" else native.build("linescan", source(), "nccl-log")
        if path is not None:
            try:
                library = ctypes.CDLL(path)
                scan, find = library.nsk_scan, library.nsk_find
            except (OSError, AttributeError):
                scan = find = None
        if find is not None:
            find.restype = ctypes.c_int64
            find.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p, ctypes.c_int64]
            _finds.append(find)
        if scan is not None:
            scan.restype = ctypes.c_int64
            pointer, size = ctypes.c_void_p, ctypes.c_int64
            # buffer, start, end, counts, runs, max runs, findings, max findings, hash slots, slots
            scan.argtypes = [pointer, size, size, pointer, pointer, size, pointer, size, pointer, size]
        _loaded.append(scan)
    return _loaded[0]


def find(block: bytearray, needle: bytes, start: int, end: int) -> int:
    """block.find(needle, start, end), with glibc's memmem when the C code is here (several times faster over a
    block without the needle)."""
    if _finds and _readers and _readers[0] is not None:
        return _finds[0](_address(block), start, min(end, len(block)), needle, len(needle))
    return block.find(needle, start, end)


def reader() -> Reader | None:
    """This process's reader (its arrays are reused by every file), or None when the C code is unavailable."""
    if not _readers:
        _readers.append(Reader() if function() is not None else None)
    return _readers[0]


class Reader:
    """The output arrays of the C function, allocated once per scanner (a few MB)."""

    def __init__(self) -> None:
        self.counts = array("q", bytes(8 * 4))
        self.runs = array("q", bytes(8 * 2 * MAX_RUNS))
        self.out = array("q", bytes(8 * FIELDS * MAX_FINDINGS))
        self.slots = array("i", bytes(4 * 2 * MAX_FINDINGS))

    def findings(self, block: bytearray, start: int, end: int) -> tuple[Counter, int, int, int] | None:
        """(Counter of INFO_LINE's findings, newlines, 'NCCL INFO's, 'NCCL WARN's) of block[start:end] (start: a
        newline), or None when the C reader's arrays overflowed (the caller then uses INFO_LINE alone)."""
        address = _address(block)
        n = function()(
            address, start, end, self.counts.buffer_info()[0], self.runs.buffer_info()[0], MAX_RUNS,
            self.out.buffer_info()[0], MAX_FINDINGS, self.slots.buffer_info()[0], 2 * MAX_FINDINGS,
        )  # fmt: skip
        if n < 0:
            return None
        newlines, info, warn, nruns = self.counts
        # Counter(findall) keeps the findings in order of first appearance (ties in the facts' counts go to the
        # first seen): the C findings (in order of first appearance) and the runs' findings are merged by position
        found: Counter = Counter()
        values, runs = self.out[: FIELDS * n].tolist(), self.runs[: 2 * nruns].tolist()
        view = memoryview(block)
        try:
            k, r, hits = 0, 0, []  # hits: the runs' findings not yet counted
            while k < len(values) or r < len(runs):
                if r < len(runs) and (k >= len(values) or runs[r] < values[k]):
                    hits += INFO_LINE.findall(block, runs[r], runs[r + 1])
                    r += 2
                    continue
                if hits:
                    found.update(hits)
                    hits = []
                sa, sb, oa, ob, ta, tb, ma, mb, calls = values[k : k + FIELDS]
                key = (
                    view[sa:sb].tobytes(),
                    view[oa:ob].tobytes() if ob else b"",
                    view[ta:tb].tobytes() if tb else b"",
                    view[ma:mb].tobytes() if mb else b"",
                )
                found[key] += calls
                k += FIELDS
            found.update(hits)
        finally:
            view.release()
        return found, newlines, info, warn


def _address(block: bytearray) -> int:
    """The address of the bytearray's bytes (no copy, no export kept: the reader may resize it later)."""
    holder = (ctypes.c_char * 1).from_buffer(block)
    try:
        return ctypes.addressof(holder)
    finally:
        del holder
