"""A rank shaped like a real PyTorch DDP capture, for bench/analyze_bench.py --realistic.

What real exports have (see ../shared/real-data/README.md) and the plain synthetic ranks lack: a CUDA runtime row per
kernel launch (same correlationId, on the launching thread), the NCCL NVTX domain with a message-size payload around
each NCCL launch, PyTorch's `nccl:<op>, op_id = N` range (unique per call) around that, step/forward/backward/
optimizer ranges, and a profile_window range. Rows are made by SQLite itself (recursive CTEs): seconds for 1M kernels.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nsys_fixtures import Export, Kernel, write_export

NAMES = [f"void gemm_kernel_{i}<float, 128>(float const*, float*, int)" for i in range(60)] + [
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
]
NCCL_API = ("ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclSend")
TORCH_OPS = ("nccl:all_reduce", "nccl:_all_gather_base", "nccl:_reduce_scatter_base", "nccl:send")
PID = (1 << 56) | (4242 << 24)  # a globalPid: VM 1, process 4242
TID = PID | 4242  # the main thread launches everything
NCCL_EVERY = 25  # one kernel in 25 is an NCCL kernel: 40k NCCL launches per 1M kernels
KERNELS_PER_STEP = 2000
GAP = 600  # ns between kernel starts


def make_realistic_rank(path: Path, kernels: int, spread_nccl: bool = False) -> Path:
    """Write (or reuse) one realistic rank of `kernels` kernels at `path`. `spread_nccl`: NCCL kernels take 5 us to
    2 ms, nearly every duration distinct (as measured ones are), instead of the compute kernels' 1,400 values: what
    the size of a part and the merge's medians depend on."""
    if path.exists() and path.stat().st_size > kernels * 40:
        return path
    write_export(path, Export(kernels=[Kernel(0, 1, name) for name in NAMES], hostname="node-r"))
    con = sqlite3.connect(path)
    ids = dict(con.execute("SELECT value, id FROM StringIds"))
    first, nccl = ids[NAMES[0]], ids[NAMES[60]]
    launch = max(ids.values()) + 1
    con.execute("INSERT INTO StringIds VALUES (?, 'cudaLaunchKernel_v7000')", (launch,))
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    seq = f"WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < {kernels - 1})"
    duration = "200 + ((i * 104729) % 1400)"
    if spread_nccl:
        duration = f"CASE WHEN i % {NCCL_EVERY} = 0 THEN 5000 + ((i * 2654435761) % 1995001) ELSE {duration} END"
    con.execute(
        f"""{seq} INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL
        SELECT s, s + {duration}, 0, 1, 7 + (i % 3), i + 1, {PID},
               CASE WHEN i % {NCCL_EVERY} = 0 THEN {nccl} + ((i / {NCCL_EVERY}) % 4) ELSE {first} + ((i * 31 + i / 7) % 60) END,
               0, NULL, 0, 0, 32, 64, 1, 1, 128, 1, 1, 0, 0, 0, 0, i, 0, NULL, NULL
        FROM (SELECT i, 10000000 + i * {GAP} + ((i * 7919) % 400) AS s FROM seq)"""
    )
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = demangledName")
    # One runtime row per launch (a 400 ns call), on the launching thread, 5 us before its kernel starts.
    con.execute(
        f"""INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME
        SELECT start - 5000, start - 4600, 0, {TID}, correlationId, {launch}, 0, NULL FROM CUPTI_ACTIVITY_KIND_KERNEL"""
    )
    con.execute(
        f"""{seq.replace(str(kernels - 1), str(kernels // 10 - 1))}
        INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, globalPid, bytes, copyKind)
        SELECT 10000000 + i * {GAP * 10}, 10000000 + i * {GAP * 10} + 300 + ((i * 7907) % 3000), 0, 1, 20, {PID},
               1024 * (1 + ((i * 613) % 4096)), CASE i % 4 WHEN 0 THEN 1 WHEN 1 THEN 2 WHEN 2 THEN 8 ELSE 10 END FROM seq"""
    )
    _nvtx(con, kernels)
    con.commit()
    con.close()
    return path


def _nvtx(con: sqlite3.Connection, kernels: int) -> None:
    """NCCL-domain ranges (payload = message size) and PyTorch nccl:<op> ranges around every NCCL launch; steps."""
    con.execute(
        "INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (0, 75, 'NCCL', ?, 1)", (TID,)
    )
    api = "CASE (i / {n}) % 4 " + " ".join(f"WHEN {k} THEN '{t}'" for k, t in enumerate(NCCL_API)) + " END"
    torch = "CASE (i / {n}) % 4 " + " ".join(f"WHEN {k} THEN '{t}'" for k, t in enumerate(TORCH_OPS)) + " END"
    launches = f"SELECT i, 10000000 + i * {GAP} + ((i * 7919) % 400) - 5000 AS s FROM seq WHERE i % {NCCL_EVERY} = 0"
    seq = f"WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < {kernels - 1})"
    con.execute(
        f"""{seq} INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId, uint64Value)
        SELECT s - 100, s + 450, 59, {api.format(n=NCCL_EVERY)}, {TID}, 1, 1024 << ((i / {NCCL_EVERY}) % 16) FROM ({launches})"""
    )
    con.execute(
        f"""{seq} INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId)
        SELECT s - 250, s + 550, 59, {torch.format(n=NCCL_EVERY)} || ', op_id = ' || (1000 + i), {TID}, 0 FROM ({launches})"""
    )
    step_ns, rows = KERNELS_PER_STEP * GAP, []
    for step in range(max(1, kernels // KERNELS_PER_STEP)):
        start = 10000000 - 6000 + step * step_ns
        rows.append((start, start + step_ns - 100, f"step {step}"))
        for phase, (a, b) in {"forward": (0, 0.35), "backward": (0.35, 0.85), "optimizer": (0.85, 0.98)}.items():
            rows.append((start + int(a * step_ns), start + int(b * step_ns), phase))
    rows.append((10000000 - 10000, 10000000 + kernels * GAP + 10000, "profile_window"))
    con.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, ?, 59, ?, ?, 0)",
        [(*row, TID) for row in rows],
    )
