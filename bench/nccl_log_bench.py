"""Benchmark 'invoke nccl-log' against the public nsys-profiling grep + awk pipeline, side by side.

Two inputs, each written into a temporary folder (deleted afterwards) and read once to warm the page cache:
  synthetic   one NCCL_DEBUG=INFO log of --size-mb (NeMo step lines, an INIT block, COLL lines of 16 GPUs on 2 hosts,
              TUNING lines, some NCCL_DEBUG_TIMESTAMP prefixes): one file, which 'invoke nccl-log' splits over the
              cores (also timed pinned to one core with taskset)
  real mix    a folder of --mix-mb made by repeating each real log of ../shared/real-data/nccl-logs into its own
              file: several files, so 'invoke nccl-log' reads them on several cores
and times, interleaved (every command sees the same machine load), best of --repeat:
  grep -c 'NCCL INFO'          the I/O ceiling: one pass of the fastest line matcher
  awk pipeline (grep + mawk)   tests/data/nccl/awk_pipeline.sh (window, sizes, per-op, histogram, aggregate, steps),
                               once per file
  invoke nccl-log --json       this command (process start included)
for the whole log and a --steps window (synthetic) and the whole folder (real mix), printing MB/s of wall and CPU
time, the ratio to the awk pipeline, the peak memory (largest process), and whether both report the same per-op
totals; and first both tools' start-up (a one-line log: the fixed cost of every run).  Usage: .venv/bin/python bench/nccl_log_bench.py [--size-mb 1024] [--mix-mb 256] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "tests" / "data" / "nccl" / "awk_pipeline.sh"
REAL_LOGS = (ROOT.parent / "shared" / "real-data" / "nccl-logs").resolve()
INVOKE = [sys.executable, "-m", "invoke", "nccl-log"]

OPS = (
    ("AllReduce", 9),
    ("AllReduce", 7),
    ("AllGather", 9),
    ("ReduceScatter", 9),
    ("Broadcast", 7),
    ("Send", 6),
    ("Recv", 6),
)
COUNTS = (1, 256, 4096, 65536, 262144, 1048576, 4194304, 16777216)
GPUS = [(f"ip-10-1-0-{1 + g // 8}", 4100 + g, g % 8) for g in range(16)]


def init_block() -> str:
    """The INIT/NET/GRAPH lines every rank prints once."""
    lines = []
    for host, pid, dev in GPUS:
        prefix = f"{host}:{pid}:{pid + 100} [{dev}] NCCL INFO "
        lines += [
            prefix + "NCCL version 2.23.4+cuda12.6",
            prefix + "NET/OFI Initializing aws-ofi-nccl 1.13.2-aws",
            prefix + "NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)",
            prefix + "Using network Libfabric",
            prefix
            + f"comm 0x55{pid:04x}0000 rank {pid - 4100} nRanks 16 nNodes 2 localRanks 8 localRank {dev} MNNVL 0",
            prefix + "Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1",
            prefix
            + "32 coll channels, 32 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer",
            prefix
            + f"comm 0x55{pid:04x}0000 rank {pid - 4100} nranks 16 cudaDev {dev} nvmlDev {dev} busId 53000 commId 0xabc - Init COMPLETE",
        ]
    return "\n".join(lines) + "\n"


def step_block(rng: random.Random, calls: int) -> str:
    """The NCCL lines of one training step: `calls` collectives on each of a few GPUs, TUNING lines on rank 0."""
    lines = []
    for i in range(calls):
        op, dtype = OPS[i % len(OPS)]
        count = rng.choice(COUNTS)
        host, pid, dev = GPUS[rng.randrange(len(GPUS))]
        stamp = "[2025-01-02 03:04:05] " if i % 5 == 0 else ""
        lines.append(
            f"{stamp}{host}:{pid}:{pid} [{dev}] NCCL INFO {op}: opCount {i:x} sendbuff 0x7f3a2c000000 recvbuff 0x7f3a2e000000 "
            f"count {count} datatype {dtype} op 0 root 0 comm 0x55d0c8a4e2b0 [nranks=16] stream 0x55d0c8a51230"
        )
        if dev == 0 and i % 3 == 0:
            lines.append(
                f"{host}:{pid}:{pid} [0] NCCL INFO {op}: {count * 2} Bytes -> Algo Ring proto Simple channel{{Lo..Hi}}={{0..31}}"
            )
    return "\n".join(lines) + "\n"


def write_log(path: Path, size_mb: int) -> int:
    """Write the synthetic log; returns the number of step lines."""
    rng = random.Random(7)
    templates = [step_block(rng, 150 + 25 * k) for k in range(8)]
    target, written, iteration = size_mb * 1024 * 1024, 0, 0
    with open(path, "w") as f:
        written += f.write(
            "[NeMo I 2025-01-02 03:00:00 nemo_logging:381] Experiments will be logged at /results\n" + init_block()
        )
        while written < target:
            iteration += 1
            written += f.write(templates[iteration % len(templates)])
            written += f.write(
                f"Training epoch 0, iteration {iteration}/1000000 | lr: 0.0001 | global_batch_size: 512 | "
                f"train_step_timing in s: {1 + (iteration % 7) / 10:.1f} | TFLOPS_per_GPU: {400 + iteration % 9}.5 | consumed_samples: {512 * iteration}\n"
            )
    return iteration


def write_mix(folder: Path, size_mb: int) -> int:
    """One file per real log, each the log repeated to about size_mb / (number of logs); returns the bytes written."""
    logs = sorted(REAL_LOGS.glob("*.log"))
    if not logs:
        raise SystemExit(f"no real logs in {REAL_LOGS}")
    folder.mkdir()
    share, total = size_mb * 1024 * 1024 // len(logs), 0
    for log in logs:
        text = log.read_bytes()
        text += b"" if text.endswith(b"\n") else b"\n"
        copies = max(1, share // len(text))
        (folder / log.name).write_bytes(text * copies)
        total += len(text) * copies
    return total


def timed(command: list[str], env: dict | None = None) -> tuple[float, float, float, str]:
    """Wall time, CPU time (user + system of the command and its children), peak memory of its largest process
    (MB) and stdout of one run."""
    started = time.perf_counter()
    # stdout is always read: GNU grep stops at the first match when its output is /dev/null
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}): {stderr[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, stdout


def race(commands: dict[str, list[str]], repeat: int, env: dict) -> dict[str, tuple[float, float, float, str]]:
    """Each command `repeat` times, interleaved so that every one sees the same machine load; best wall and CPU,
    the largest peak memory."""
    results: dict[str, list[tuple[float, float, float, str]]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, command in commands.items():
            results[name].append(timed(command, env))
    return {
        name: (min(r[0] for r in runs), min(r[1] for r in runs), max(r[2] for r in runs), runs[-1][3])
        for name, runs in results.items()
    }


def awk_totals(output: str) -> dict:
    """op -> (calls, total bytes) from the awk pipeline's per-op sections (summed over files)."""
    totals: dict[str, tuple[int, int]] = {}
    for op, calls, total in re.findall(r"^(\S+) calls=(\d+) min=\S+ avg=\S+ max=\S+ total=(\d+)$", output, re.M):
        before = totals.get(op, (0, 0))
        totals[op] = (before[0] + int(calls), before[1] + int(total))
    return totals


def agreement(ours: dict, theirs: dict, exact: bool) -> str:
    """Whether both tools counted the same: per op exactly (synthetic logs); on real logs the calls and bytes in all,
    since the awk pipeline misreads some real lines (it takes srun's '0:' for the op, and mawk prints byte counts
    above 2^31 with 6 significant digits)."""
    if exact:
        return "same per-op totals" if ours == theirs else "DIFFERENT per-op totals"
    calls, total = (sum(v[i] for v in ours.values()) for i in (0, 1))
    awk_calls, awk_total = (sum(v[i] for v in theirs.values()) for i in (0, 1))
    close = calls == awk_calls and abs(total - awk_total) <= 1e-6 * max(total, 1)
    return f"{'same' if close else 'DIFFERENT'} calls and bytes in all ({calls:,} calls; awk's bytes within its float precision)"


def report(label: str, size: int, runs: dict[str, tuple[float, float, float, str]], exact: bool = True) -> None:
    """One table: wall and CPU MB/s, ratios to the awk pipeline, peak memory; and whether both counted the same."""
    awk_wall, awk_cpu, _, awk_out = runs[AWK_ROW]
    ours = {r["op"]: (r["calls"], r["total_bytes"]) for r in json.loads(runs[OURS_ROW][3])["per_op"]}
    same = agreement(ours, awk_totals(awk_out), exact)
    print(f"\n{label}  ({same})")
    print(
        f"  {'command':<36}{'wall s':>8}{'MB/s':>8}{'vs awk':>8}{'CPU s':>8}{'MB/CPU-s':>10}{'vs awk':>8}{'peak MB':>9}"
    )
    for name, (wall, cpu, peak, _) in runs.items():
        print(
            f"  {name:<36}{wall:>8.2f}{size / wall / 1e6:>8.0f}{awk_wall / wall:>7.2f}x"
            f"{cpu:>8.2f}{size / max(cpu, 1e-3) / 1e6:>10.0f}{awk_cpu / max(cpu, 1e-3):>7.2f}x{peak:>9.0f}"
        )


GREP_ROW, AWK_ROW, OURS_ROW, ONE_CORE_ROW = (
    "grep -c 'NCCL INFO' (I/O ceiling)",
    "awk pipeline (grep + mawk)",
    "invoke nccl-log --json",
    "  the same on one core (taskset)",
)


def startup(workdir: Path, repeat: int, env: dict) -> None:
    """Time both tools on a one-line log: the fixed cost of every run (process start, imports), which weighs on small
    files and on the real mix."""
    tiny = workdir / "one-line.log"
    tiny.write_text(
        "host:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 "
        "root 0 comm 0x3 [nranks=2] stream 0x4\n"
    )
    runs = race({AWK_ROW: [str(PIPELINE), str(tiny)], OURS_ROW: [*INVOKE, str(tiny), "--json"]}, repeat, env)
    print(
        "start-up (a one-line log): "
        + "; ".join(f"{name} {w:.2f} s wall, {c:.2f} s CPU" for name, (w, c, _, _) in runs.items())
    )


def main() -> int:
    """Generate, time, print, clean up."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="size of the synthetic log (default 1024)")
    parser.add_argument("--mix-mb", type=int, default=256, help="size of the real-log mix (default 256; 0: skip it)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per command; the best counts (default 3)")
    args = parser.parse_args()
    awk = shutil.which("mawk") or shutil.which("awk")
    version = (
        subprocess.run([awk, "-W", "version"], capture_output=True, text=True).stdout.splitlines()[:1] if awk else []
    )
    workdir = Path(tempfile.mkdtemp(prefix="nsyskit-nccl-bench-"))
    try:
        log = workdir / "nccl.log"
        started = time.perf_counter()
        steps = write_log(log, args.size_mb)
        size = log.stat().st_size
        print(
            f"synthetic log: {size / 1e6:.0f} MB, {steps} steps, written in {time.perf_counter() - started:.1f} s ({log})"
        )
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # page cache warm for everyone
        load = os.getloadavg()[0]
        print(
            f"awk: {awk} ({version[0] if version else 'unknown version'}); best of {args.repeat} runs; "
            f"{os.cpu_count()} CPUs, load average {load:.1f} at the start"
        )
        window = (steps // 2, steps // 2 + max(1, steps // 10))
        env = dict(os.environ, AWK=awk, LC_ALL="C")
        startup(workdir, args.repeat, env)
        taskset = shutil.which("taskset")
        for label, awk_args, our_args in (
            ("synthetic, whole log (one file: its parts on the cores)", [], []),
            (
                f"synthetic, --steps {window[0]}-{window[1]}",
                [str(window[0]), str(window[1])],
                ["--steps", f"{window[0]}-{window[1]}"],
            ),
        ):
            runs = race(
                {
                    GREP_ROW: ["grep", "-c", "NCCL INFO", str(log)],
                    AWK_ROW: [str(PIPELINE), str(log), *awk_args],
                    OURS_ROW: [*INVOKE, str(log), *our_args, "--json"],
                    # the same pinned to one core (a whole log is otherwise split over the cores)
                    **(
                        {ONE_CORE_ROW: [taskset, "-c", "0", *INVOKE, str(log), "--json"]}
                        if taskset and not our_args
                        else {}
                    ),
                },
                args.repeat,
                env,
            )
            report(label, size, runs)
        log.unlink()
        if args.mix_mb:
            mix = workdir / "real-mix"
            mixed = write_mix(mix, args.mix_mb)
            files = sorted(str(p) for p in mix.iterdir())
            subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)
            each = f'for f in "$@"; do "{PIPELINE}" "$f"; done'
            runs = race(
                {
                    GREP_ROW: ["grep", "-c", "NCCL INFO", *files],
                    AWK_ROW: ["bash", "-c", each, "awk-per-file", *files],
                    OURS_ROW: [*INVOKE, str(mix), "--json"],
                },
                args.repeat,
                env,
            )
            report(
                f"real mix: {len(files)} files repeating {REAL_LOGS} ({mixed / 1e6:.0f} MB; several cores)",
                mixed,
                runs,
                exact=False,
            )
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end (the machine is shared: figures vary with its load)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
