"""Smoke test of bench/nccltests_bench.py on 2 MB: it runs, nsyskit and awk print the same columns, every row of
its table has its figures, the temporary files are deleted."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.realdata import REAL_DATA, need

ROOT = Path(__file__).resolve().parents[2]


def test_bench_runs_and_both_readers_agree():
    need(REAL_DATA / "nccl-tests")
    if not (shutil.which("mawk") or shutil.which("awk")):
        pytest.skip("no awk on this machine")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "nccltests_bench.py"), "--size-mb", "2", "--repeat", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    same = re.search(r"^  same columns: ([\d,]+) rows, ([\d,]+) averages$", done.stdout, re.M)
    assert same and int(same.group(1).replace(",", "")) > 1000, done.stdout
    for row in ("awk (", "nsyskit.nccltests.read_file", "of which read_file (after start-up)"):
        assert re.search(re.escape(row) + r".*?\s[\d.]+\s+\d+\s+[\d.]+\s+\d+\s+[\d.]+x$", done.stdout, re.M), row
    workdir = Path(re.search(r"\((\S+)/nccl-tests\.log\)", done.stdout).group(1))
    assert workdir.name.startswith("nsyskit-nccltests-bench-") and not workdir.exists()
