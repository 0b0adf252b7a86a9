"""The analysis keeps freed memory for its next arrays (analysis/process.py): arrays allocated and freed again and again
reuse mapped pages instead of faulting fresh ones in, and NSYSKIT_KEEP_FREED_MEMORY=0 leaves malloc as it is."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src"
# A rank's map in miniature: arrays of a few sizes up to 24 MiB allocated, freed, allocated again; the minor page
# faults counted after a warm-up round.
CHURN = """
import resource
import numpy as np
from nsyskit.analysis.process import keep_freed_memory
took = keep_freed_memory()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for size in (24, 8, 16):
    np.ones(size << 17)
before = faults()
for _ in range(10):
    for size in (24, 8, 16):
        a, b = np.ones(size << 17), np.ones(size << 17)
        del a, b
print(took, faults() - before)
"""


def churn(**env: str) -> tuple[bool, int]:
    """(whether the settings took, minor faults of the churn) in a fresh process."""
    environ = {**os.environ, "PYTHONPATH": str(SRC), **env}
    out = subprocess.run([sys.executable, "-c", CHURN], env=environ, capture_output=True, text=True, check=True)
    took, faults = out.stdout.split()
    return took == "True", int(faults)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's: no other libc is tuned")
def test_freed_arrays_are_reused_not_faulted_in_again():
    took, kept = churn()
    # glibc's own threshold at its default, held there: left to itself glibc raises it on the first free of a mapped
    # block, so the plain count followed what the imports happened to free first (3,597 or 20,879 faults for the
    # same churn, whether the modules were compiled at import or read from their .pyc)
    untouched, plain = churn(NSYSKIT_KEEP_FREED_MEMORY="0", MALLOC_MMAP_THRESHOLD_="131072")
    assert took and not untouched
    # 60 arrays of 8-24 MiB: about 30,000 faults when each is mapped afresh; with the pages kept, a few hundred
    assert plain > 10_000 and kept * 10 < plain, (kept, plain)
