"""bench/counters_bench.py, blas_bench.py and ncclpayload_bench.py run end to end on small inputs (their numbers
mean something at their default inputs: the A100 export, 1M payload blobs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from counter_fixtures import Counters
from test_counters import MS, SM, export_with

ROOT = Path(__file__).resolve().parents[3]


# blas_bench.py borrows counters_bench's timing: both run on the same small export
@pytest.mark.parametrize(("script", "printed"), [
    ("counters_bench.py", ("analyze without counters (NSYSKIT_COUNTERS=0)", "ratio")),
    ("blas_bench.py", ("one BLAS thread (the default)", "one thread against one per core")),
])  # fmt: skip
def test_the_bench_prints_both_times_and_their_ratio(tmp_path, script, printed):
    path = export_with(tmp_path / "r.sqlite", Counters(gpu={SM: {0: [(t * MS, t) for t in range(100)]}}))
    result = subprocess.run([sys.executable, str(ROOT / "bench" / script), str(path), "--repeat", "1"],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert all(text in result.stdout for text in printed)


def test_the_payload_bench_prints_both_maps_their_ratio_and_that_they_agree():
    # bench/ncclpayload_bench.py on a small rank (its figures mean something at the default 1M ranges)
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "ncclpayload_bench.py"), "--ranges", "2000",
                             "--repeat", "1"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "map, sizes as payload blobs (binaryData)" in result.stdout and "ratio" in result.stdout
    assert "same collectives table from both: yes" in result.stdout
