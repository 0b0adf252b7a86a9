"""Benchmark 'invoke nccl-log' against the public nsys-profiling grep + awk pipeline on a synthetic NCCL log.

Writes a synthetic NCCL_DEBUG=INFO log (NeMo step lines, an INIT block, COLL lines of 16 GPUs on 2 hosts,
TUNING lines, some NCCL_DEBUG_TIMESTAMP prefixes) of --size-mb into a temporary folder (deleted afterwards),
warms the page cache, then times, best of --repeat, side by side:
  grep -c 'NCCL INFO'          the I/O ceiling: one pass of the fastest line matcher
  awk pipeline (mawk)          tests/data/nccl/awk_pipeline.sh: window, sizes, per-op, histogram, aggregate, steps
  invoke nccl-log --json       this command (process start included)
for the whole log and for a --steps window, printing MB/s and the ratio to the awk pipeline, and checks that
both report the same per-op totals.  Usage: .venv/bin/python bench/nccl_log_bench.py [--size-mb 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "tests" / "data" / "nccl" / "awk_pipeline.sh"
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


def timed(command: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """Wall time, CPU time (user + system of the command and its children) and stdout of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # stdout is always read: GNU grep stops at the first match when its output is /dev/null
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def race(commands: dict[str, list[str]], repeat: int, env: dict) -> dict[str, tuple[float, float, str]]:
    """Each command `repeat` times, interleaved so that every one sees the same machine load; best wall and CPU."""
    results: dict[str, list[tuple[float, float, str]]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, command in commands.items():
            results[name].append(timed(command, env))
    return {name: (min(r[0] for r in runs), min(r[1] for r in runs), runs[-1][2]) for name, runs in results.items()}


def awk_totals(output: str) -> dict:
    """op -> (calls, total bytes) from the awk pipeline's per-op section."""
    return {
        m[0]: (int(m[1]), int(m[2]))
        for m in re.findall(r"^(\S+) calls=(\d+) min=\S+ avg=\S+ max=\S+ total=(\d+)$", output, re.M)
    }


def main() -> int:
    """Generate, time, print, clean up."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="size of the synthetic log (default 1024)")
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
        print(
            f"awk: {awk} ({version[0] if version else 'unknown version'}); best of {args.repeat} runs; {os.cpu_count()} CPUs"
        )
        window = (steps // 2, steps // 2 + max(1, steps // 10))
        env = dict(os.environ, AWK=awk, LC_ALL="C")
        for label, awk_args, our_args in (
            ("whole log", [], []),
            (
                f"--steps {window[0]}-{window[1]}",
                [str(window[0]), str(window[1])],
                ["--steps", f"{window[0]}-{window[1]}"],
            ),
        ):
            runs = race(
                {
                    "grep -c 'NCCL INFO' (I/O ceiling)": ["grep", "-c", "NCCL INFO", str(log)],
                    "awk pipeline (grep + mawk)": [str(PIPELINE), str(log), *awk_args],
                    "invoke nccl-log --json": [*INVOKE, str(log), *our_args, "--json"],
                },
                args.repeat,
                env,
            )
            awk_wall, awk_cpu, awk_out = runs["awk pipeline (grep + mawk)"]
            ours = {
                r["op"]: (r["calls"], r["total_bytes"]) for r in json.loads(runs["invoke nccl-log --json"][2])["per_op"]
            }
            same = "same per-op totals" if ours == awk_totals(awk_out) else "DIFFERENT per-op totals"
            print(f"\n{label}  ({same})")
            print(f"  {'command':<36}{'wall s':>8}{'MB/s':>8}{'vs awk':>8}{'CPU s':>8}{'MB/CPU-s':>10}{'vs awk':>8}")
            for name, (wall, cpu, _) in runs.items():
                print(
                    f"  {name:<36}{wall:>8.2f}{size / wall / 1e6:>8.0f}{awk_wall / wall:>7.2f}x"
                    f"{cpu:>8.2f}{size / max(cpu, 1e-3) / 1e6:>10.0f}{awk_cpu / max(cpu, 1e-3):>7.2f}x"
                )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
