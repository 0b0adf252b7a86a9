"""Benchmark the split analysis (issue 25): the map of one realistic rank, the merge of 1,024 parts, the projection.

Side by side, with ratios:
- the map of one realistic rank (bench/realistic_export.py: 1M kernels, a runtime row per launch, NCCL and op_id
  ranges, NCCL kernels of 5 us - 2 ms with nearly every duration distinct) inside a process that maps several ranks one after another, as a job-array element does (start-up paid
  once, so the per-rank time is what 1,024 ranks wait for) vs `nsys stats -r gpukernsum` alone on the same file;
- the merge of 1,024 parts of realistic ranks (copies of one realistic rank's part under rank names, each its own
  rank): wall time and peak memory in a fresh process (goal: < 10 s and < 1 GB), the NCCL sizes table's time
  alone, and the part size per rank; with
  --parts 4096 16384 those merges beside it, each in its own process, and the time per part against 1,024's
  (issue 41's goals: 4,096 in < 10 s and < 1 GB, 16,384 in < 40 s and < 2 GB, within 1.3x per part);
- with --jitter: copies whose NCCL durations differ as real ranks' do (each copy's raised at random), so nearly every
  duration of every rank is distinct and the fold meets its budget of distinct durations per kind (issue 41);
- with --tree N: each count's merge as a tree (issue 41): N partial merges of its blocks (the slowest and their sum:
  on a cluster they run side by side), then the final merge of the N partials in a fresh process (goal at 4,096
  parts in 8 blocks: < 3 s), beside the merge of the parts themselves;
- the projection of a 1,024-rank analysis' wall time on N nodes (array elements, CORES maps at once per node) vs
  on one machine (invoke analyze's 8 workers), from the measured per-rank map time and merge time.

Usage: .venv/bin/python bench/mapreduce_bench.py [--kernels 1000000] [--map-ranks 8] [--nsys-runs 3] [--parts 1024 4096 16384]
       [--merge-only] [--cores 8] [--tree 8] [--jitter]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "unit" / "analysis"), str(ROOT / "bench")]

from analyze_bench import nsys_stats_timed  # noqa: E402
from part_copies import copy_part  # noqa: E402
from realistic_export import make_realistic_rank  # noqa: E402

from nsyskit.analysis.read import nsys as nsys_cli  # noqa: E402

ONE_MACHINE_WORKERS = 8  # invoke analyze's MAX_WORKERS
REFERENCE_PARTS = 1024  # the merge every other count is compared with, per part
# parts -> (seconds, MB) the merge should stay under (issue 25 at 1,024; issue 41 beyond)
MERGE_GOALS = {1024: (10.0, 1024), 4096: (10.0, 1024), 16384: (40.0, 2048)}
PER_PART_GOAL = 1.3  # seconds per part at 16,384 over seconds per part at 1,024


def map_times(rank_file: Path, ranks: int, work: Path) -> list[float]:
    """Seconds per rank of analyze-part's map over `ranks` copies of the rank, in this one process (one element)."""
    from nsyskit.analysis.mapreduce.parts import map_reports

    run = work / "run"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    for rank in range(ranks):
        os.link(rank_file, run / f"rank_{rank}.sqlite")  # one file, several names: each its own rank
    times = []
    for index in range(ranks):  # the element maps its reports one after another, as --array-index does
        start = time.perf_counter()
        map_reports([run], work / "parts", index, ranks)
        times.append(time.perf_counter() - start)
    return times


def child_partials(folder: str, blocks: int) -> None:
    """Run in a child process: the partial merges of the parts of `folder` in `blocks` blocks, one after another
    (each an array element on a cluster); print the slowest block's time, their sum and the peak RSS."""
    from nsyskit.analysis.mapreduce.partial import merge_block

    times = []
    for index in range(blocks):
        start = time.perf_counter()
        merge_block(Path(folder), Path(folder) / "partials", index, blocks)
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"slowest_s": max(times), "sum_s": sum(times), "maxrss_kb": peak}))


def child_merge(folder: str, workers: int) -> None:
    """Run in a child process: merge the parts of `folder` with `workers` processes (analyze-merge --workers); print
    wall time, the peak memory of this process and its workers together (sampled) and the ranks merged."""
    from nsyskit.analysis.compute.ncclsizes import size_summary
    from nsyskit.analysis.mapreduce.sidebyside import merged_parts

    sampler = TreeMemory()
    start = time.perf_counter()
    with merged_parts(Path(folder), workers=workers) as (analysis, _facts):
        wall = time.perf_counter() - start
    peak = max(sampler.stop(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    start = time.perf_counter()  # the NCCL sizes table again, alone: it grew faster than the ranks before the fold
    size_summary(analysis.nccl)
    sizes_s = time.perf_counter() - start
    print(json.dumps({"wall_s": wall, "maxrss_kb": peak, "ranks": len(analysis.ranks), "sizes_s": sizes_s,
                      "load": os.getloadavg()[0]}))  # fmt: skip


class TreeMemory:
    """The peak of the summed resident memory of this process and its children (the merge's workers), sampled every
    20 ms in a thread (Linux /proc), in KB: ru_maxrss gives each process's peak alone, not the workers' together."""

    def __init__(self) -> None:
        self.peak = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.done.wait(0.02):
            self.peak = max(self.peak, sum(_rss_kb(pid) for pid in [os.getpid(), *_children(os.getpid())]))

    def stop(self) -> int:
        self.done.set()
        self.thread.join()
        return self.peak


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
                for child in (task / "children").read_text().split()]  # fmt: skip
    except OSError:
        return []


def _rss_kb(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # a worker that just ended
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)


def projection(map_s: float, merge_s: float, ranks: int, cores: int) -> None:
    """Wall time of a `ranks`-rank analysis on N nodes (an array, `cores` maps at once per node) vs one machine."""
    one = math.ceil(ranks / ONE_MACHINE_WORKERS) * map_s + merge_s
    print(f"\nprojection: {ranks:,} realistic ranks, {map_s:.2f} s map per rank (measured), merge {merge_s:.2f} s")
    print(f"{'where':34} {'wall s':>9}  vs one machine")
    print(f"{f'one machine, {ONE_MACHINE_WORKERS} workers':34} {one:9.1f}  1.0x")
    for nodes in (1, 2, 4, 8, 16, 32, 64, 128):
        wall = math.ceil(ranks / (nodes * cores)) * map_s + merge_s
        print(f"{f'{nodes} node(s) x {cores} array elements':34} {wall:9.1f}  {one / wall:.1f}x")
    print("(excludes the export of .nsys-rep reports, 30 s - minutes each, which the array spreads the same way "
          "and one machine pays in full)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=1_000_000)
    parser.add_argument("--map-ranks", type=int, default=8, help="ranks one process maps (the first pays warm-up)")
    parser.add_argument("--nsys-runs", type=int, default=3, help="runs of nsys stats (its median is the baseline)")
    parser.add_argument("--parts", type=int, nargs="+", default=[REFERENCE_PARTS],
                        help=f"parts merged, each count in its own process beside {REFERENCE_PARTS:,} (e.g. 4096 16384)")
    parser.add_argument("--merge-only", action="store_true", help="time the merges only (one map makes the part)")
    parser.add_argument("--cores", type=int, default=8, help="array elements running at once per node (projection)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--tree", type=int, default=0, help="also merge each count as a tree of this many partial merges")
    parser.add_argument("--jitter", action="store_true", help="copies whose NCCL durations differ (real ranks' jitter)")
    parser.add_argument("--workers", type=int, default=None,
                        help="processes per merge, as analyze-merge --workers (default: its default here)")
    parser.add_argument("--child-merge", help=argparse.SUPPRESS)
    parser.add_argument("--child-partials", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_merge:
        child_merge(args.child_merge, args.workers)
        return
    if args.child_partials:
        child_partials(args.child_partials, args.tree)
        return
    work = args.out / "mapreduce"
    work.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    # NCCL durations spread as measured ones are (nearly all distinct): the part's size and the merge's medians
    rank = make_realistic_rank(args.out / f"realistic_{args.kernels}_spread_rank_0.sqlite", args.kernels, spread_nccl=True)
    times = map_times(rank, 1 if args.merge_only else args.map_ranks, work)
    part = next((work / "parts").glob("*.part.npz"))
    map_s = statistics.median(times[1:] or times)
    if not args.merge_only:
        map_against_nsys(rank, times, args.nsys_runs)
    print(f"part size per rank: {part.stat().st_size / 1024:.0f} KB (export: {rank.stat().st_size / 2**20:.0f} MB)")
    from nsyskit.analysis.mapreduce.sidebyside import default_workers

    workers = args.workers or default_workers()
    print(f"merges with {workers} worker process(es) each (analyze-merge --workers; side by side from 512 parts)")
    merges = {count: merge_in_child(part, count, work, args.tree, workers, args.jitter)
              for count in sorted({REFERENCE_PARTS, *args.parts})}  # fmt: skip
    merge_table(merges)
    if args.tree:
        tree_table(merges, args.tree)
    if not args.merge_only:
        projection(map_s, merges[REFERENCE_PARTS]["wall_s"], REFERENCE_PARTS, args.cores)


def map_against_nsys(rank: Path, times: list[float], runs: int) -> None:
    """The map's warm time per rank against nsys stats gpukernsum on the same file (medians; fastest beside)."""
    warm = times[1:] or times
    map_s = statistics.median(warm)
    binary = nsys_cli.find_nsys()
    # The same statistic on both sides (medians; the fastest runs are printed too): this machine's speed drifts.
    nsys_runs = [nsys_stats_timed(rank)[0] for _ in range(runs)] if binary else [float("nan")]
    nsys_s = statistics.median(nsys_runs)
    print(f"\nrealistic rank; map times in one process: {', '.join(f'{t:.2f}' for t in times)} s "
          f"(the first pays the warm-up)")  # fmt: skip
    print(f"{'seconds, one realistic rank':48} {'nsyskit':>9} {'baseline':>9}   ratio")
    print(f"{'map (analyze-part, warm) vs nsys stats gpukernsum':48} {map_s:9.2f} {nsys_s:9.2f}   {nsys_s / map_s:5.1f}x"
          f"   (medians of {len(warm)} and {len(nsys_runs)} runs; fastest: {min(warm):.2f} vs {min(nsys_runs):.2f} s, "
          f"{min(nsys_runs) / min(warm):.1f}x)")  # fmt: skip
    print("target: map >= 10x nsys stats: " + ("n/a (no nsys)" if not binary else "PASS" if nsys_s / map_s >= 10 else "FAIL"))


def merge_in_child(part: Path, count: int, work: Path, tree: int = 0, workers: int = 1, jitter: bool = False) -> dict:
    """Wall time, peak memory and ranks of the merge of `count` copies of the part (`jitter`: their NCCL durations
    made to differ), in a fresh process with `workers`; with `tree`, also its partial merges in `tree` blocks
    ("partials") and the final merge of those ("final")."""
    folder = work / f"parts{count}"
    copy_part(part, count, folder)
    if jitter:
        jitter_copies(folder)
    try:
        merged = _child("--child-merge", str(folder), "--workers", str(workers))
        if tree:
            merged["partials"] = _child("--child-partials", str(folder), "--tree", str(tree))
            merged["final"] = _child("--child-merge", str(folder / "partials"), "--workers", "1")
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # 16,384 copies take 10 GB
    return merged


def jitter_copies(folder: Path, seed: int = 0) -> None:
    """Make the copies' NCCL durations differ as real ranks' do: each copy's duration steps (partpack._steps) raised by
    0-399 ns at half the places, at random, so the durations drift apart and nearly all of them are distinct."""
    import numpy as np

    from nsyskit.analysis.mapreduce.partfile import write_npz
    from nsyskit.analysis.mapreduce.partpack import _steps, _unsteps, decode_results, encode_results

    rng = np.random.default_rng(seed)
    for path in sorted(folder.glob("*.part.npz")):
        with np.load(path) as data:
            arrays = dict(data)
            results = decode_results(data, json.loads(str(data["results"])))
        for result in results:
            steps = _steps(result["nccl"].durations)
            steps += rng.integers(0, 2, len(steps), dtype=steps.dtype) * rng.integers(0, 400, len(steps), dtype=steps.dtype)
            result["nccl"].durations = _unsteps(steps)
        arrays.update(encode_results(results))
        with open(path, "wb") as out:
            write_npz(out, arrays)


def _child(*words: str) -> dict:
    """The JSON line a child run of this script prints last."""
    child = subprocess.run([sys.executable, __file__, *words], capture_output=True, text=True)
    if child.returncode:
        raise SystemExit(child.stderr[-2000:])
    return json.loads(child.stdout.strip().splitlines()[-1])


def tree_table(merges: dict[int, dict], blocks: int) -> None:
    """Each count merged as a tree beside its merge of the parts: the partial merges and the final merge's time."""
    print(f"\n{'tree of parts':>15} {'blocks':>7} {'slowest':>8} {'all':>8} {'final s':>8} {'final MB':>8} "
          f"{'parts s':>8}   goal")  # fmt: skip
    for count, merged in merges.items():
        partials, final = merged["partials"], merged["final"]
        goal = "< 3 s final" if (count, blocks) == (4096, 8) else "-"
        ok = "" if goal == "-" else ": PASS" if final["wall_s"] < 3 else ": FAIL"
        print(f"{count:>15,} {blocks:>7} {partials['slowest_s']:8.2f} {partials['sum_s']:8.2f} {final['wall_s']:8.2f} "
              f"{final['maxrss_kb'] / 1024:8.0f} {merged['wall_s']:8.2f}   {goal}{ok}")  # fmt: skip
    print("(slowest: the longest block, what a cluster waits for with the blocks side by side; all: their sum on one "
          "process; parts s: the merge of the parts themselves, one process)")  # fmt: skip


def merge_table(merges: dict[int, dict]) -> None:
    """The merges side by side: time, peak memory, time per part against the reference count's, and the goals."""
    reference = merges[REFERENCE_PARTS]["wall_s"] / REFERENCE_PARTS
    print(f"\n{'merge of parts':>15} {'wall s':>8} {'peak MB':>8} {'ms/part':>8} {'vs 1,024':>8} {'sizes s':>8} {'load':>5}   goal")
    for count, merged in merges.items():
        per_part = merged["wall_s"] / count
        goal_s, goal_mb = MERGE_GOALS.get(count, (float("inf"), float("inf")))
        ok = merged["wall_s"] < goal_s and merged["maxrss_kb"] / 1024 < goal_mb
        ok = ok and (count < 16384 or per_part / reference <= PER_PART_GOAL)
        goal = f"< {goal_s:.0f} s, < {goal_mb:,} MB" + (f", <= {PER_PART_GOAL}x per part" if count >= 16384 else "")
        print(f"{count:>15,} {merged['wall_s']:8.2f} {merged['maxrss_kb'] / 1024:8.0f} {per_part * 1000:8.2f} "
              f"{per_part / reference:7.2f}x {merged['sizes_s']:8.2f} {merged['load']:5.1f}   {goal if count in MERGE_GOALS else '-'}: "
              f"{'PASS' if ok else 'FAIL'}")  # fmt: skip
    print("(peak MB: the merge's process and its workers together, sampled every 20 ms; sizes s: the NCCL sizes table "
          "computed again from the merged run, alone; load: the 1-minute load average as the merge ended)")  # fmt: skip


if __name__ == "__main__":
    main()
