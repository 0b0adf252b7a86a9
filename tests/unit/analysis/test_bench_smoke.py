"""The benchmark script runs end to end on a tiny size (its numbers are only meaningful at full size)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_bench_smoke(tmp_path):
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "analyze_bench.py"),
        "--ranks",
        "2",
        "--kernels",
        "3000",
        "--nsys-ranks",
        "1",
        "--out",
        str(tmp_path),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "breakdown+overlaps vs straightforward" in result.stdout and "peak memory" in result.stdout
