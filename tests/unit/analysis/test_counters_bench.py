"""bench/counters_bench.py runs end to end on a small export with counters (its numbers mean something on the
A100 export it reads by default)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from counter_fixtures import Counters
from test_counters import MS, SM, export_with

ROOT = Path(__file__).resolve().parents[3]


def test_counters_bench_prints_both_times_and_the_ratio(tmp_path):
    path = export_with(tmp_path / "r.sqlite", Counters(gpu={SM: {0: [(t * MS, t) for t in range(100)]}}))
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "counters_bench.py"), str(path), "--repeat", "1"],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "analyze without counters (NSYSKIT_COUNTERS=0)" in result.stdout and "ratio" in result.stdout


def test_blas_bench_prints_both_settings_and_their_ratio(tmp_path):
    # It borrows counters_bench's timing: run it too, on the same small export
    path = export_with(tmp_path / "r.sqlite", Counters(gpu={SM: {0: [(t * MS, t) for t in range(100)]}}))
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "blas_bench.py"), str(path), "--repeat", "1"],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "one BLAS thread (the default)" in result.stdout and "one thread against one per core" in result.stdout
