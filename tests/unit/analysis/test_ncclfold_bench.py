"""Smoke test of bench/ncclfold_bench.py: its ranks jitter (the case byte copies of one part cannot show), the fold
it times counts every distinct value once, and its table prints each count with its ratio."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parents[3] / "bench" / "ncclfold_bench.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("ncclfold_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_bench_folds_jittered_ranks_to_their_distinct_values():
    bench = load_bench()
    keys = []
    for digest in bench.digests_of(6):  # each operation's cell (group, kind) beside its duration
        group = np.repeat(np.arange(len(digest.groups)), digest.groups["count"])
        keys.append(((group * bench.KINDS + digest.kind_codes) << 32) | digest.durations.astype(np.int64))
    distinct = len(np.unique(np.concatenate(keys)))
    assert distinct > 3 * bench.OPERATIONS  # ranks differ: more distinct values than one rank's
    assert bench.one(6)["distinct"] == distinct


def test_the_bench_prints_each_count_beside_the_first():
    done = subprocess.run([sys.executable, str(BENCH), "--ranks", "2", "4"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "per rank vs 2" in lines[0] and lines[1].split()[0] == "2" and lines[2].split()[0] == "4"
    assert lines[1].endswith("1.00x")
