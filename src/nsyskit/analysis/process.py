"""The analysis process's settings: malloc keeps the memory it frees, and numpy loads with one BLAS thread.

Freed memory. The analysis keeps the memory it frees for its next arrays, rather than handing it back to the kernel.

A rank's map allocates and frees arrays of millions of rows (kernels, API calls, their sorts and unions). glibc's
malloc serves every block over its mmap threshold with fresh pages and unmaps them on free, and trims the heap's
top whenever a few hundred KiB lie free there; the next array, and the next rank's, then page-faults the same memory
in again, a page at a time. With the mmap threshold at glibc's largest (32 MiB) and the heap kept, an array up to
that size reuses memory already mapped; one arena for every thread keeps the threads' freed memory in one place
(each thread's own arena would keep its own). On the 1M-kernel rank of bench/diagnoses_bench.py, mapped again and
again: ~2,300 page faults per map instead of ~20,000, 0.14-0.17 s instead of 0.18-0.23 s, and a peak of ~315 MB
instead of ~270 MB (what is kept beside what is used).

One BLAS thread: the analysis does no matrix math, and OpenBLAS's workers cost CPU. numpy's OpenBLAS starts a worker per core when it loads, whatever the program then does with it; the analysis calls
no BLAS routine (no dot, matmul or linalg), yet on the 2-core dev machine `analyze` of the A100 export takes 0.449 s
of CPU with them and 0.357 s without (the same wall time, 0.33 s, on an idle machine; under load wall follows CPU):
bench/blas_bench.py. OpenBLAS reads OPENBLAS_NUM_THREADS once, when it loads: so it is set just for numpy's import and then taken away again, and
the commands the process starts (sbatch, the training) never inherit it. A value the user set is left as it is.
"""

from __future__ import annotations

import ctypes
import os
import sys

MALLOC_VARIABLE = "NSYSKIT_KEEP_FREED_MEMORY"  # 0: leave malloc's settings as they are
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20  # the largest glibc accepts on 64-bit: bigger blocks are still mapped and unmapped
TRIM_THRESHOLD = 1 << 30  # free memory at the heap's top handed back only beyond this

_set: list[bool] = []  # [whether the settings took] once tried in this process


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds and keep one arena for this process, once (threads started later share
    it); False where there is no glibc (musl, macOS) or NSYSKIT_KEEP_FREED_MEMORY=0."""
    if not _set:
        took = False
        if os.environ.get(MALLOC_VARIABLE) != "0" and sys.platform.startswith("linux"):
            try:
                mallopt = ctypes.CDLL(None).mallopt
            except (OSError, AttributeError):  # a libc without mallopt
                mallopt = None
            if mallopt is not None:
                mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
                settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_ARENA_MAX, 1))
                took = all([mallopt(parameter, value) == 1 for parameter, value in settings])
        _set.append(took)
    return _set[0]


BLAS_VARIABLE = "OPENBLAS_NUM_THREADS"


def load_numpy_single_threaded() -> bool:
    """Import numpy with one OpenBLAS thread, unless numpy is loaded already or the user set the variable; whether it did."""
    if "numpy" in sys.modules or BLAS_VARIABLE in os.environ:
        return False
    os.environ[BLAS_VARIABLE] = "1"
    try:
        import numpy  # noqa: F401  (loaded here, with the variable set)
    finally:
        del os.environ[BLAS_VARIABLE]
    return True
