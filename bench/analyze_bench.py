"""Benchmark 'invoke analyze' on synthetic GPU-shaped exports: N ranks x M kernel rows (+ memcpy, memset, NVTX).

Baselines, side by side with ratios:
- `nsys stats -r gpukernsum` (2023.1+: cuda_gpu_kern_sum) on the same files vs nsyskit's kernel summary, checked to give
  the same numbers. How both run: nsys stats takes one file per call and uses one core, so it runs once per file, one
  file after another; nsyskit's summary (open the export, read, summarize) runs on the same files one after another in
  one thread too: a core against a core;
- the straightforward breakdown (fetch all intervals with their names, merge in Python) vs nsyskit's
  vectorized breakdown, checked to give the same numbers;
- end-to-end `invoke analyze --no-html` wall time and its peak memory (max RSS of that process).

Usage: .venv/bin/python bench/analyze_bench.py [--ranks 8] [--kernels 2000000] [--nsys-ranks N] [--repeat N] [--out bench/out]
       .venv/bin/python bench/analyze_bench.py --realistic [--kernels 1000000]   # one real-shaped rank (see below)

--realistic: one rank shaped like a real PyTorch capture (bench/realistic_export.py: a runtime row per launch, NCCL
domain ranges with payloads, tens of thousands of `nccl:<op>, op_id = N` ranges, steps): `invoke analyze --json
--no-html` (everything) against `nsys stats -r gpukernsum` alone on the same file, kernel totals checked equal.
Both modes end with the scaling of analyze_run over the rank files from 1 to N worker processes.
Per file, nsyskit's run and the baseline's run follow each other (the load of a shared machine then weighs on both);
--repeat N does that N times and keeps each side's fastest run per file, the one least disturbed by others.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "unit" / "analysis"), str(ROOT / "bench")]

from realistic_export import make_realistic_rank  # noqa: E402
from synthetic_export import make_rank  # noqa: E402

from nsyskit.analysis.compute import analyzers  # noqa: E402
from nsyskit.analysis.read import blobagg  # noqa: E402
from nsyskit.analysis.read import nsys as nsys_cli  # noqa: E402
from nsyskit.analysis.read.reader import ExportReader  # noqa: E402
from nsyskit.analysis.read.sqlitefile import sqlite3 as reader_sqlite3  # noqa: E402


def straightforward_breakdown(path: Path) -> dict[int, dict[str, int]]:
    """The obvious algorithm: fetch every interval with its name, classify, sort and merge in Python, sweep overlaps.

    It reads with the SQLite module nsyskit's reader uses, so that the ratio measures the algorithm, not the library.
    """
    con = reader_sqlite3.connect(path)
    kernels = con.execute(
        "SELECT k.start, k.end, k.deviceId, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
    ).fetchall()
    memory = con.execute(
        "SELECT start, end, deviceId FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL SELECT start, end, deviceId FROM CUPTI_ACTIVITY_KIND_MEMSET"
    ).fetchall()
    con.close()
    per_device: dict[int, dict[str, list[tuple[int, int]]]] = {}
    for start, end, device, name in kernels:
        per_device.setdefault(device, {"compute": [], "comm": [], "memory": []})[
            "comm" if "nccl" in name.lower() else "compute"
        ].append((start, end))
    for start, end, device in memory:
        per_device.setdefault(device, {"compute": [], "comm": [], "memory": []})["memory"].append((start, end))

    def merge(spans):
        merged = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        return merged

    def overlap(a, b):
        i = j = total = 0
        while i < len(a) and j < len(b):
            low, high = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
            total += max(0, high - low)
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return total

    result = {}
    for device, spans in per_device.items():
        c, n, m = merge(spans["compute"]), merge(spans["comm"]), merge(spans["memory"])
        busy = merge([tuple(x) for x in c + n + m])
        result[device] = {
            "compute_ns": sum(e - s for s, e in c),
            "comm_ns": sum(e - s for s, e in n),
            "memory_ns": sum(e - s for s, e in m),
            "busy_ns": sum(e - s for s, e in busy),
            "compute_comm_overlap_ns": overlap(c, n),
            "compute_memory_overlap_ns": overlap(c, m),
            "comm_memory_overlap_ns": overlap(n, m),
        }
    return result


def vectorized_breakdown(path: Path) -> dict[int, dict[str, int]]:
    """nsyskit's breakdown of one file (reader + analyzer)."""
    reader = ExportReader(path)
    kernels = reader.kernels()
    names = reader.strings(kernels.extra["name"])
    table = analyzers.gpu_breakdown(kernels, analyzers.nccl_name_ids(names), [reader.memcpys(), reader.memsets()])
    return {
        row["device"]: {
            k: row[k]
            for k in (
                "compute_ns",
                "comm_ns",
                "memory_ns",
                "busy_ns",
                "compute_comm_overlap_ns",
                "compute_memory_overlap_ns",
                "comm_memory_overlap_ns",
            )
        }
        for row in table.rows()
    }


def kernel_summary(path: Path):
    """nsyskit's kernel summary of one file (the narrow read a summary needs)."""
    reader = ExportReader(path)
    names, durations = reader.kernel_durations()
    return analyzers.summary_by_name(names, durations, reader.strings(names))


def timed(fn, *args):
    """(wall time, value) of one call."""
    start = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - start, value


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children and their waited-for descendants."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def nsys_stats_timed(path: Path) -> tuple[float, float, list[dict[str, str]]]:
    """(wall, CPU seconds, rows) of one `nsys stats -r gpukernsum` run on `path`."""
    cpu = children_cpu()
    wall, rows = timed(nsys_cli.stats, path, "kernel")
    return wall, children_cpu() - cpu, rows


def fastest(runs: list[tuple[int, float, object]]) -> list[float]:
    """The fastest time per file index of (file index, seconds, value) runs."""
    best: dict[int, float] = {}
    for index, seconds, _ in runs:
        best[index] = min(best.get(index, seconds), seconds)
    return list(best.values())


def check_same_as_nsys(nsys_rows: list[dict[str, str]], ours, path: Path) -> None:
    """Exit unless nsyskit's kernel summary gives nsys stats' numbers (as printed: one decimal) for every kernel."""
    mine = {row["name"]: row for row in ours.rows()}
    if len(mine) != len(nsys_rows):
        raise SystemExit(f"{path}: nsys stats lists {len(nsys_rows)} kernels, nsyskit {len(mine)}")
    for row in nsys_rows:
        got = mine[row["Name"]]
        same = (
            int(row["Total Time (ns)"]) == got["total_ns"] and int(row["Instances"]) == got["instances"]
            and int(row["Min (ns)"]) == got["min_ns"] and int(row["Max (ns)"]) == got["max_ns"]
            and all(float(row[col]) == round(got[key], 1) for col, key in (
                ("Time (%)", "time_pct"), ("Avg (ns)", "avg_ns"), ("Med (ns)", "median_ns"), ("StdDev (ns)", "stddev_ns")))
        )  # fmt: skip
        if not same:
            raise SystemExit(f"{path}: kernel summaries differ for {row['Name']}: nsys {row} vs nsyskit {got}")


def child_analyze(files: list[Path], *flags: str) -> None:
    """Run in a child process: 'invoke analyze --no-html FLAGS' on the files; print wall time, peak RSS and stdout."""
    invoke = str(Path(sys.executable).parent / "invoke")
    start = time.perf_counter()
    result = subprocess.run(
        [invoke, "--search-root", str(ROOT), "analyze", "--no-html", *flags, ",".join(map(str, files))],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # the only child: invoke analyze (and its workers)
    if result.returncode != 0:
        raise SystemExit(f"invoke analyze failed: {result.stderr[-2000:]}")
    print(json.dumps({"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "maxrss_kb": usage.ru_maxrss,
                      "stdout": result.stdout if "--json" in flags else ""}))  # fmt: skip


def run_child(*args: str) -> dict:
    """The JSON line a child run of this script (--child / --child-workers) prints."""
    child = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if child.returncode != 0:
        raise SystemExit(child.stdout + child.stderr)
    return json.loads(child.stdout.strip().splitlines()[-1])


def child_workers(workers: int, files: list[Path]) -> None:
    """Run in a child process: analyze_run over the files with `workers` worker processes; print the wall time."""
    from nsyskit.analysis.trace import analyze_run

    start = time.perf_counter()
    analyze_run(files, workers=workers)
    print(json.dumps({"wall_s": time.perf_counter() - start}))


def scaling(files: list[Path]) -> None:
    """Wall time of analyze_run over `files` with 1..N worker processes (N = cores, at most the files)."""
    top = max(1, min(os.cpu_count() or 1, len(files)))
    base = None
    print(
        f"\nscaling over {len(files)} rank files (analyze_run, worker processes; load average {os.getloadavg()[0]:.1f}):"
    )
    for workers in range(1, top + 1):
        wall = run_child("--child-workers", str(workers), *map(str, files))["wall_s"]
        base = base or wall
        print(f"  {workers} process(es): {wall:7.2f} s   speed-up {base / wall:4.2f}x")


def realistic(args: argparse.Namespace) -> None:
    """One real-shaped rank: invoke analyze --json (everything) vs nsys stats -r gpukernsum alone, side by side."""
    t0 = time.perf_counter()
    path = make_realistic_rank(args.out / f"realistic_{args.kernels}_rank_0.sqlite", args.kernels)
    print(f"realistic rank: {args.kernels:,} kernels, a runtime row each, {args.kernels // 25:,} NCCL launches each in an "
          f"NCCL-domain and a PyTorch nccl:<op> range ({time.perf_counter() - t0:.1f} s to make): {path}")  # fmt: skip
    ours, theirs = [], []
    for _ in range(args.repeat):
        ours.append(run_child("--child", str(path), "--json"))
        if nsys_cli.find_nsys():
            theirs.append(nsys_stats_timed(path))
    best = min(ours, key=lambda r: r["wall_s"])
    data = json.loads(best["stdout"])
    if theirs:
        rows = theirs[0][2]
        mine = {r["name"]: r for r in data["kernel_summary"]["0"]}
        for row in rows:  # nsys splits a name by grid/block; totals per name must agree
            got = mine.get(row["Name"])
            assert got is not None, row["Name"]
        for name, got in mine.items():
            total = sum(int(r["Total Time (ns)"]) for r in rows if r["Name"] == name)
            count = sum(int(r["Instances"]) for r in rows if r["Name"] == name)
            assert (total, count) == (got["total_ns"], got["instances"]), (name, total, count, got)
    nsys_s = min(t for t, _, _ in theirs) if theirs else float("nan")
    nsys_cpu = min(c for _, c, _ in theirs) if theirs else float("nan")
    ours_cpu = min(r["cpu_s"] for r in ours)
    peak_mb = max(r["maxrss_kb"] for r in ours) / 1024
    print(f"\n{'seconds, one realistic rank':44} {'nsyskit':>9} {'baseline':>9}   ratio")
    print(
        f"{'invoke analyze --json vs nsys stats gpukernsum':44} {best['wall_s']:9.2f} {nsys_s:9.2f}   {nsys_s / best['wall_s']:5.1f}x"
    )
    print(
        f"{'  the same in CPU seconds (user + system)':44} {ours_cpu:9.2f} {nsys_cpu:9.2f}   {nsys_cpu / ours_cpu:5.1f}x"
    )
    ratio = nsys_s / best["wall_s"]
    print(f"kernel totals and instances equal nsys stats' per name: {'yes' if theirs else 'n/a (no nsys)'}; "
          f"peak memory (max RSS) {peak_mb:.0f} MB; fastest of {args.repeat}; load average now {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("targets: analyze >= 3x nsys stats: " + ("n/a" if not theirs else "PASS" if ratio >= 3 else "FAIL")
          + "; peak <= 1 GB: " + ("PASS" if peak_mb <= 1024 else "FAIL"))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--kernels", type=int, default=2_000_000)
    parser.add_argument(
        "--nsys-ranks", type=int, default=None, help="run the nsys stats baseline on this many files (default: all)"
    )
    parser.add_argument(
        "--straightforward-ranks",
        type=int,
        default=None,
        help="run the straightforward baseline on this many files (default: all)",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="time each per-file measurement this many times, keep the fastest"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--realistic", action="store_true", help="one real-shaped rank instead of --ranks synthetic")
    parser.add_argument("--no-scaling", action="store_true", help="skip the 1..N worker processes scaling runs")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    # The .pyc files an installed package has (pip compiles them): with PYTHONDONTWRITEBYTECODE set (CI sandboxes) an
    # editable checkout would otherwise compile nsyskit's source at every start (~35 ms per invoke analyze).
    compileall.compile_dir(ROOT / "src" / "nsyskit", quiet=1)
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    if args.realistic:
        realistic(args)
        if not args.no_scaling:
            scaling(
                [
                    make_realistic_rank(args.out / f"realistic_{args.kernels}_rank_{r}.sqlite", args.kernels)
                    for r in range(2)
                ]
            )
        return

    t0 = time.perf_counter()
    files = [make_rank(args.out / f"synthetic_rank_{r}.sqlite", r, args.kernels) for r in range(args.ranks)]
    print(
        f"exports: {args.ranks} ranks x {args.kernels:,} kernels (+{args.kernels // 10:,} memcpy, NVTX) in {args.out} ({time.perf_counter() - t0:.1f} s to make)"
    )

    binary = nsys_cli.find_nsys()
    nsys_files = files[: args.nsys_ranks or len(files)] if binary else []
    plain_files = files[: args.straightforward_ranks or len(files)]
    ours_ks, nsys_ks, ours_bd, plain_bd, end_to_end, nsys_cpu = [], [], [], [], [], []
    for _ in range(args.repeat):
        # Each file's own run and its baseline run back to back, and the whole analyze after the round of files
        # it is compared with: on a shared machine both sides then see the same load.
        for index, path in enumerate(files):
            ours_ks.append((index, *timed(kernel_summary, path)))
            if path in nsys_files:
                wall, cpu, rows = nsys_stats_timed(path)
                nsys_ks.append((index, wall, rows))
                nsys_cpu.append((index, cpu, None))
                check_same_as_nsys(rows, ours_ks[-1][2], path)
            ours_bd.append((index, *timed(vectorized_breakdown, path)))
            if path in plain_files:
                plain_bd.append((index, *timed(straightforward_breakdown, path)))
                assert ours_bd[-1][2] == plain_bd[-1][2], f"breakdowns differ: {ours_bd[-1][2]} vs {plain_bd[-1][2]}"
        end_to_end.append(run_child("--child", *map(str, files)))
    ours_ks, nsys_ks, ours_bd, plain_bd, nsys_cpu = (
        fastest(runs) for runs in (ours_ks, nsys_ks, ours_bd, plain_bd, nsys_cpu)
    )
    peak_mb = max(run["maxrss_kb"] for run in end_to_end) / 1024
    end_to_end = min(end_to_end, key=lambda run: run["wall_s"])

    def per_file(times):
        return sum(times) / len(times) if times else float("nan")

    nsys_total = per_file(nsys_ks) * len(files)  # per-file mean scaled when --nsys-ranks ran on fewer files
    nsys_cpu_total = per_file(nsys_cpu) * len(files)
    plain_total = per_file(plain_bd) * len(files)
    rows = [
        (
            "kernel summary (nsyskit) vs nsys stats " + ("" if binary else "(nsys not installed)"),
            sum(ours_ks),
            nsys_total,
        ),
        ("breakdown+overlaps vs straightforward", sum(ours_bd), plain_total),
        ("invoke analyze (everything) vs nsys stats", end_to_end["wall_s"], nsys_total),
        ("  the same in CPU seconds (user + system)", end_to_end["cpu_s"], nsys_cpu_total),
    ]
    print(
        f"nsys stats: one process per file, sequential ({len(nsys_ks)} of {len(files)} files run, per-file mean "
        f"scaled to {len(files)}); nsyskit: per file, sequential, one thread, each run right before its baseline's; "
        f"fastest of {args.repeat} run(s) per file; "
        f"invoke analyze: one run over all files (files in worker processes), fastest of {args.repeat}; "
        f"nsyskit's SQLite {reader_sqlite3.sqlite_version}, int64s aggregate: {'yes' if blobagg.library() else 'no'}"
    )
    print(f"\n{'seconds for all ' + str(len(files)) + ' rank files':44} {'nsyskit':>9} {'baseline':>9}   ratio")
    for name, ours, base in rows:
        print(f"{name:44} {ours:9.2f} {base:9.2f}   {base / ours:5.1f}x")
    print(
        f"invoke analyze --no-html peak memory (max RSS): {peak_mb:.0f} MB; load average now: {os.getloadavg()[0]:.1f}"
    )
    ks_ratio, bd_ratio = nsys_total / sum(ours_ks), plain_total / sum(ours_bd)
    print(
        "targets: kernel summary >= 10x nsys stats: " + ("n/a" if not nsys_ks else ("PASS" if ks_ratio >= 10 else "FAIL"))
        + "; breakdown >= 5x straightforward: " + ("PASS" if bd_ratio >= 5 else "FAIL")
        + "; analyze (everything) >= 10x nsys stats: " + ("n/a" if not nsys_ks else ("PASS" if nsys_total / end_to_end["wall_s"] >= 10 else "FAIL"))
        + "; peak <= 1 GB per rank analyzed at once: " + ("PASS" if peak_mb <= 1024 * min(len(files), os.cpu_count() or 1) else "FAIL")
    )  # fmt: skip
    if not args.no_scaling:
        scaling(files)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_analyze(
            [Path(p) for p in sys.argv[2:] if not p.startswith("--")], *(p for p in sys.argv[2:] if p.startswith("--"))
        )
    elif len(sys.argv) > 2 and sys.argv[1] == "--child-workers":
        child_workers(int(sys.argv[2]), [Path(p) for p in sys.argv[3:]])
    else:
        main()
