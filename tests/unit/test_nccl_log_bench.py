"""Smoke test of bench/nccl_log_bench.py on a 2 MB log: it runs, both tools agree, every row has its MB/s."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_runs_and_both_tools_agree():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "nccl_log_bench.py"), "--size-mb", "2", "--repeat", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(same per-op totals)") == 2
    for row in ("grep -c 'NCCL INFO' (I/O ceiling)", "awk pipeline (grep + mawk)", "invoke nccl-log --json"):
        assert done.stdout.count(row) == 2
    workdir = Path(re.search(r"\((\S+)/nccl\.log\)", done.stdout).group(1))
    assert workdir.name.startswith("nsyskit-nccl-bench-") and not workdir.exists()  # the temporary log is deleted
