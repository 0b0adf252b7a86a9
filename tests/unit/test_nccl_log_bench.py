"""Smoke test of bench/nccl_log_bench.py on a 2 MB log and a 2 MB real-log mix: it runs, both tools agree, every row
has its MB/s and peak memory, the temporary files are deleted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from fixtures.realdata import REAL_DATA, need

ROOT = Path(__file__).resolve().parents[2]


def test_bench_runs_and_both_tools_agree():
    need(REAL_DATA / "nccl-logs")  # the bench's second input is a mix of the real logs
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "nccl_log_bench.py"), "--size-mb", "2", "--mix-mb", "2", "--repeat", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(same per-op totals)") == 2 and "(same calls and bytes in all (" in done.stdout
    logs = len(list((REAL_DATA / "nccl-logs").glob("*.log")))
    assert f"real mix: {logs} files repeating" in done.stdout  # one file per real log
    assert done.stdout.count("the same on one core (taskset)") == 1  # the whole log, pinned to one core
    # the fixed cost of a run of each tool, timed on a one-line log
    assert re.search(
        r"^start-up \(a one-line log\): awk pipeline \(grep \+ mawk\) [\d.]+ s wall, [\d.]+ s CPU; "
        r"invoke nccl-log --json [\d.]+ s wall, [\d.]+ s CPU$", done.stdout, re.M
    )  # fmt: skip
    for row in ("grep -c 'NCCL INFO' (I/O ceiling)", "awk pipeline (grep + mawk)", "invoke nccl-log --json"):
        rows = re.findall(
            re.escape(row) + r"\s+([\d.]+)\s+(\d+)\s+[\d.]+x\s+[\d.]+\s+\d+\s+[\d.]+x\s+(\d+)$", done.stdout, re.M
        )
        assert len(rows) == 3 and all(int(peak) > 0 for *_, peak in rows), row
    workdir = Path(re.search(r"\((\S+)/nccl\.log\)", done.stdout).group(1))
    assert workdir.name.startswith("nsyskit-nccl-bench-") and not workdir.exists()  # the temporary files are deleted
