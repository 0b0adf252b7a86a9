"""Synthetic PyTorch profiler (Kineto) traces shaped like the example's real ones, with and without GPU kernels.

The CPU shape (metadata, distributedInfo, 'ProfilerStep#N' user annotations, cpu_op events, gloo collectives)
follows the traces torch 2.13's CPU build writes for the example (checked by the end-to-end test on the real
ones); the GPU events follow Kineto's documented Chrome-trace form (cat 'kernel' / 'gpu_memcpy' on pid = the
device and tid = the stream, linked to their 'cuda_runtime' launch by args.correlation) and the real H100 trace
(tests/data/torch): each ProfilerStep#N repeated on the GPU as a 'gpu_user_annotation', many launches of each kernel,
more kernel names than HTA's breakdown lists, sub-microsecond memsets at fractional-microsecond timestamps.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

STEP_US = 1000  # each profiled step lasts 1 ms
GEMM = "ampere_sgemm_128x64_nn"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
MEMCPY = "Memcpy HtoD (Pageable -> Device)"


def _event(name, cat, ts, dur, pid, tid, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": float(ts), "dur": float(dur), "args": args}


def kineto_trace(rank: int, world: int, steps: int = 3, gpu: bool = True, slow_us: int = 0) -> dict:
    """One rank's trace: `steps` ProfilerStep#N annotations of STEP_US (+slow_us) each; per step on GPU a GEMM
    (100-500 us, stream 7), an all-reduce (300-700 us, stream 20) and a memcpy (800-850 us, stream 7)."""
    pid, tid, base = 4000 + rank, 4000 + rank, 1_000_000.0
    step_us = STEP_US + slow_us
    events = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": base, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": base, "args": {"name": f"thread {tid} (python)"}},
    ]  # fmt: skip
    correlation = 1
    for step in range(1, steps + 1):
        start = base + (step - 1) * step_us
        events.append(_event(f"ProfilerStep#{step}", "user_annotation", start, step_us - 1, pid, tid, **{"External id": step}))
        if gpu:  # Kineto's GPU-side copy of the step annotation, over the step's kernels (no stream: not a kernel)
            events.append(_event(f"ProfilerStep#{step}", "gpu_user_annotation", start + 100, 750, 0, 7, **{"External id": step}))
        events.append(_event("aten::mm", "cpu_op", start + 10, 50, pid, tid, **{"External id": 100 + step}))
        events.append(_event("gloo:all_reduce", "user_annotation", start + 70, 20, pid, tid))
        if not gpu:
            continue
        for name, cat, offset, dur, stream in ((GEMM, "kernel", 100, 400, 7), (ALLREDUCE, "kernel", 300, 400, 20),
                                               (MEMCPY, "gpu_memcpy", 800, 50, 7)):  # fmt: skip
            launch = "cudaLaunchKernel" if cat == "kernel" else "cudaMemcpyAsync"
            events.append(_event(launch, "cuda_runtime", start + offset - 60, 5, pid, tid, correlation=correlation))
            events.append(_event(name, cat, start + offset, dur, 0, stream, device=0, stream=stream,
                                 correlation=correlation, **{"External id": 100 + step}))  # fmt: skip
            correlation += 1
    distributed = {"backend": "nccl" if gpu else "gloo", "rank": rank, "world_size": world}
    return {
        "schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}] if gpu else [],
        "distributedInfo": distributed, "displayTimeUnit": "ms", "baseTimeNanoseconds": 1_700_000_000_000_000_000,
        "traceEvents": events, "traceName": f"rank{rank}",
    }  # fmt: skip


ELEMENTWISE = [f"void at::native::elementwise_kernel_{i}<float>(int, float*)" for i in range(12)]
MEMSET = "Memset (Device)"
LAUNCHES = 5  # launches of each ELEMENTWISE kernel per step


def launch_heavy_trace(rank: int = 0, world: int = 1, steps: int = 2) -> dict:
    """One rank shaped like the real H100 trace: per step each of 12 kernels (more names than HTA's breakdown lists)
    launched LAUNCHES times, kernel i's j-th launch lasting i + 1 + j/8 us from .25 us past a microsecond, then 4
    memsets of 0.9 us from .05 us past one (HTA's default rounding makes each -1 us: start up to 1, end down to 0.95 -> 0).
    One event per 14 us slot from 100 us into the step, in order."""
    trace = kineto_trace(rank, world, steps=steps, gpu=False)
    trace["distributedInfo"]["backend"] = "nccl"
    pid, tid, base, events = 4000 + rank, 4000 + rank, 1_000_000.0, trace["traceEvents"]
    kernels = [(name, "kernel", 0.25, i + 1 + j / 8) for j in range(LAUNCHES) for i, name in enumerate(ELEMENTWISE)]
    for step in range(1, steps + 1):
        for slot, (name, cat, fraction, dur) in enumerate(kernels + [(MEMSET, "gpu_memset", 0.05, 0.9)] * 4):
            at, correlation = base + (step - 1) * STEP_US + 100 + 14 * slot + fraction, 1000 * step + slot
            events.append(_event("cudaLaunchKernel", "cuda_runtime", at - 60, 2, pid, tid, correlation=correlation))
            events.append(_event(name, cat, at, dur, 0, 7, device=0, stream=7, correlation=correlation))
    return trace


def write_run(folder: Path, world: int = 2, gpu: bool = True, slow_rank: int | None = None, **kwargs) -> list[Path]:
    """A run folder's traces as the wrapper names them: job_node0_rankR_host.pt.trace.json.gz, one per rank."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(world):
        trace = kineto_trace(rank, world, gpu=gpu, slow_us=300 if rank == slow_rank else 0, **kwargs)
        path = folder / f"job_node0_rank{rank}_host.pt.trace.json.gz"
        path.write_bytes(gzip.compress(json.dumps(trace).encode()))
        paths.append(path)
    return paths
