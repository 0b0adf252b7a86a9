"""Benchmark the host-side diagnoses' cost in the map: one realistic rank (1M kernels, a runtime row per launch) mapped
with every rule vs a baseline tree's map (another checkout's src, e.g. main before the rules), side by side.

Each round runs one fresh process per tree, alternating; a process maps --map-ranks copies of the rank one after
another, as bench/mapreduce_bench.py and an array element do, and gives its median warm map (wall and CPU time).
The medians over the rounds and their ratio are printed, and the ratio of the fastest (on a shared machine the
least noisy). The analysis keeps freed memory (nsyskit/analysis/process.py), which a baseline before it does not:
for the rules' own cost on equal terms, run with MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824
in the environment (both trees' processes then run with those settings). Figures: docs/benchmarks.md.

Usage: .venv/bin/python bench/diagnoses_bench.py --baseline /path/to/main/src [--kernels 1000000] [--rounds 3]
       [--map-ranks 6]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "unit" / "analysis"), str(ROOT / "bench")]

from realistic_export import make_realistic_rank  # noqa: E402

CHILD = """
import os, shutil, statistics, sys, time
from pathlib import Path
from nsyskit.analysis.mapreduce.parts import map_reports
run, parts, ranks = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
shutil.rmtree(parts, ignore_errors=True)
walls, cpus = [], []
for index in range(ranks):  # as an array element maps its reports one after another (the first pays warm-up)
    start, cpu = time.perf_counter(), time.process_time()
    map_reports([run], parts, index, ranks)
    walls.append(time.perf_counter() - start)
    cpus.append(time.process_time() - cpu)
print(statistics.median(walls[1:]), statistics.median(cpus[1:]))
"""


def map_seconds(src: Path, run: Path, parts: Path, ranks: int) -> tuple[float, float]:
    """(wall, CPU) seconds per rank of the map (median of the warm ones) of `ranks` copies of the rank, one after
    another in one fresh process with the package of `src` (CPU time: every thread's, what other processes on a
    shared machine disturb least)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(run), str(parts), str(ranks)], env=env, check=True,
                         capture_output=True, text=True)  # fmt: skip
    wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="src folder of the tree to compare against")
    parser.add_argument("--kernels", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="processes per tree, alternating (medians compared)")
    parser.add_argument("--map-ranks", type=int, default=6, help="ranks each process maps (the first pays warm-up)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rank = make_realistic_rank(args.out / f"realistic_{args.kernels}.sqlite", args.kernels)
    work = Path(tempfile.mkdtemp(prefix="diagnoses-bench-"))
    try:
        run = work / "run"
        run.mkdir()
        for index in range(args.map_ranks):
            os.link(rank, run / f"rank_{index}.sqlite")  # one file, several names: each its own rank
        trees = {"baseline": args.baseline.resolve(), "with rules": ROOT / "src"}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
        map_seconds(trees["with rules"], run, work / "warm", 2)  # the page cache warm for both
        for _ in range(args.rounds):
            for name, src in trees.items():
                times[name].append(map_seconds(src, run, work / name.replace(" ", "_"), args.map_ranks))
        for index, what in enumerate(("wall", "CPU")):
            base, mine = ([one[index] for one in times[name]] for name in trees)
            for name, runs in zip(trees, (base, mine), strict=True):
                print(f"{name:>10}: {what} time of the warm map of one {args.kernels:,}-kernel rank: median "
                      f"{statistics.median(runs):.3f} s, fastest {min(runs):.3f} s")  # fmt: skip
            print(f"{what} ratio with rules / baseline: {statistics.median(mine) / statistics.median(base):.3f} of the "
                  f"medians, {min(mine) / min(base):.3f} of the fastest runs (goal: <= 1.15)")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
