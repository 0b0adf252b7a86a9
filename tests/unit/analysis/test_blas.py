"""The analysis process loads numpy with one OpenBLAS thread, and the commands it starts do not inherit the setting."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# The facade the analysis tasks load their stages through (analyze-part, analyze-merge; answer() calls it first too)
PROBE = "import os, nsyskit.analysis as a; a.map_reports; import numpy; print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))"


def threads_and_variable(**extra: str) -> str:
    """The thread count and OPENBLAS_NUM_THREADS of a fresh process that imported nsyskit.analysis."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | extra
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.strip()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: OpenBLAS starts no worker to leave out")
def test_numpy_loads_without_blas_workers_and_the_variable_is_gone_after():
    assert threads_and_variable() == "1 None"


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: OpenBLAS starts no worker to leave out")
def test_a_value_the_user_set_is_left_as_it_is():
    assert threads_and_variable(OPENBLAS_NUM_THREADS="2") == "2 2"
