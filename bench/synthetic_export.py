"""The plain synthetic ranks of bench/analyze_bench.py: M kernels on 3 overlapping streams (NCCL ~1/10), memcpys,
memsets and NVTX steps, made by SQLite itself (recursive CTEs); rank 5 is a 25 % straggler."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nsys_fixtures import Export, Kernel, write_export

KERNEL_NAMES = [f"void gemm_kernel_{i}<float, 128>(float const*, float*, int)" for i in range(36)] + [
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm *, unsigned long, ncclWork *)",
    "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm *, unsigned long, ncclWork *)",
    "ncclKernel_ReduceScatter_RING_LL_Sum_float(ncclDevComm *, unsigned long, ncclWork *)",
    "ncclDevKernel_Broadcast_RING_LL(ncclDevComm *, unsigned long, ncclWork *)",
]


def make_rank(path: Path, rank: int, kernels: int) -> Path:
    """One synthetic export (deterministic: no random(), which SQLite may evaluate once per reference): `kernels` kernels on 3 streams (overlapping), NCCL ~1/10, memcpys/memsets, NVTX steps."""
    if path.exists() and path.stat().st_size > kernels * 20:
        return path
    seed = [Kernel(0, 1, name) for name in KERNEL_NAMES]  # registers every name in StringIds
    write_export(path, Export(kernels=seed, hostname=f"node-{rank // 8}"))
    con = sqlite3.connect(path)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    ids = dict(con.execute("SELECT value, id FROM StringIds"))
    first, nccl_first = ids[KERNEL_NAMES[0]], ids[KERNEL_NAMES[36]]
    slow = 1.25 if rank == 5 else 1.0  # rank 5 is the straggler
    con.execute(
        f"""WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < {kernels - 1})
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL
        SELECT start, start + dur, 0, 1, 7 + (i % 3), i, 1234, name, name, NULL, 0, 0, 32, 64, 1, 1, 128, 1, 1, 0, 0, 0, 0, i, 0, NULL, NULL
        FROM (SELECT i, 1000000 + CAST(i * 600 * {slow} AS INTEGER) + ((i * 7919) % 400) AS start,
                     200 + ((i * 104729) % 1400) AS dur,
                     CASE WHEN i % 10 = 0 THEN {nccl_first} + ((i / 10) % 4) ELSE {first} + ((i * 31 + i / 7) % 36) END AS name
              FROM seq)"""
    )
    copies = kernels // 10
    con.execute(
        f"""WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < {copies - 1})
        INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, globalPid, bytes, copyKind)
        SELECT s, s + 300 + ((i * 7907) % 3000), 0, 1, 20, 1234, 1024 * (1 + ((i * 613) % 4096)),
               CASE i % 4 WHEN 0 THEN 1 WHEN 1 THEN 2 WHEN 2 THEN 8 ELSE 10 END
        FROM (SELECT i, 1000000 + CAST(i * 6000 * {slow} AS INTEGER) AS s FROM seq)"""
    )
    con.execute(
        f"""WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < {copies // 10 - 1})
        INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET SELECT s, s + 500, 0, 1, 21, NULL, 1234, 0, 4096, NULL, 2
        FROM (SELECT i, 1000000 + CAST(i * 60000 * {slow} AS INTEGER) AS s FROM seq)"""
    )
    steps = max(1, kernels // 2000)
    step_ns = int(2000 * 600 * slow)
    rows = []
    for step in range(steps):
        start = 1000000 + step * step_ns
        rows.append((start, start + step_ns - 50, f"step {step}", None))
        for phase, (a, b) in {"forward": (0, 0.3), "backward": (0.3, 0.8), "optimizer": (0.8, 0.95)}.items():
            rows.append((start + int(a * step_ns), start + int(b * step_ns), phase, None))
        rows.append((start + int(0.5 * step_ns), start + int(0.6 * step_ns), "ncclAllReduce", 1 << (10 + step % 16)))
    con.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, uint64Value) VALUES (?, ?, 59, ?, 281474976711890, ?)",
        rows,
    )
    con.commit()
    con.close()
    return path
