"""numpy loaded with one BLAS thread in the analysis process: the analysis does no matrix math, and OpenBLAS's workers cost CPU.

numpy's OpenBLAS starts a worker per core when it loads, whatever the program then does with it; the analysis calls
no BLAS routine (no dot, matmul or linalg), yet on the 2-core dev machine `analyze` of the A100 export takes 0.449 s
of CPU with them and 0.357 s without (the same wall time, 0.33 s, on an idle machine; under load wall follows CPU):
bench/blas_bench.py. OpenBLAS
reads OPENBLAS_NUM_THREADS once, when it loads: so it is set just for numpy's import and then taken away again, and
the commands the process starts (sbatch, the training) never inherit it. A value the user set is left as it is.
"""

from __future__ import annotations

import os
import sys

VARIABLE = "OPENBLAS_NUM_THREADS"


def load_numpy_single_threaded() -> bool:
    """Import numpy with one OpenBLAS thread, unless numpy is loaded already or the user set the variable; whether it did."""
    if "numpy" in sys.modules or VARIABLE in os.environ:
        return False
    os.environ[VARIABLE] = "1"
    try:
        import numpy  # noqa: F401  (loaded here, with the variable set)
    finally:
        del os.environ[VARIABLE]
    return True
