"""The analysis keeps the memory it frees for its next arrays, rather than handing it back to the kernel.

A rank's map allocates and frees arrays of millions of rows (kernels, API calls, their sorts and unions). glibc's
malloc serves every block over its mmap threshold with fresh pages and unmaps them on free, and trims the heap's
top whenever a few hundred KiB lie free there; the next array, and the next rank's, then page-faults the same memory
in again, a page at a time. Measured on a 1M-kernel rank: a few thousand faults per map, 10-20% of its time (see
bench/diagnoses_bench.py). With the mmap threshold at glibc's largest (32 MiB) and the heap kept, an array up to that
size reuses memory already mapped. The process's peak memory is unchanged: what it keeps is what it used.
"""

from __future__ import annotations

import ctypes
import os
import sys

VARIABLE = "NSYSKIT_KEEP_FREED_MEMORY"  # 0: leave malloc's settings as they are
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20  # the largest glibc accepts on 64-bit: bigger blocks are still mapped and unmapped
TRIM_THRESHOLD = 1 << 30  # free memory at the heap's top handed back only beyond this

_set: list[bool] = []  # [whether the settings took] once tried in this process


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process, once; False where there is no glibc (musl, macOS)
    or NSYSKIT_KEEP_FREED_MEMORY=0."""
    if not _set:
        took = False
        if os.environ.get(VARIABLE) != "0" and sys.platform.startswith("linux"):
            try:
                mallopt = ctypes.CDLL(None).mallopt
            except (OSError, AttributeError):  # a libc without mallopt
                mallopt = None
            if mallopt is not None:
                mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
                took = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
        _set.append(took)
    return _set[0]
