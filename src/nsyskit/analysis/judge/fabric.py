"""Is the fabric the limit? With --fabric, the message-size buckets that reach well under the bus bandwidth nccl-tests
measured on the same fabric at their size, when together they carry a good share of the communication time."""

from __future__ import annotations

import math

import numpy as np

from nsyskit.analysis.compute.metrics import RunView
from nsyskit.analysis.judge.finding import Finding, document

FABRIC_SHARE_PCT = 10.0  # the buckets under the ceiling matter, together, from this share of the NCCL time on
FABRIC_RATIO_PCT = 50.0  # a bucket is under the ceiling when its median busbw is under this percent of it
SMALL_BYTES = 64 << 10  # nccl-tests' curve itself is latency-bound under about this size
LATENCY_ADVICE = ("small messages are latency-bound: the training issues them where nccl-tests runs them back to back; "
                  "fuse them (larger DDP buckets, bucket_cap_mb; FSDP's wrap policy) or overlap them with compute")  # fmt: skip
BANDWIDTH_ADVICE = ("usually the run's NCCL kernels share the GPU with compute (fewer SMs and memory bandwidth than in "
                    "nccl-tests), another network path than the test's (NET/Socket instead of NET/OFI or NET/IB in the "
                    "NCCL log, GPUDirect RDMA off), a communicator laid out across nodes differently from the test's, or "
                    "fewer channels (NCCL_MIN_NCHANNELS); compare the NCCL log's NET/ and channel lines with the "
                    "nccl-tests run's")  # fmt: skip
DOC = document(
    "below_fabric", "with --fabric: each collective's median bus bandwidth per message-size bucket against the busbw "
    "nccl-tests measured on the same fabric at that size (out-of-place, interpolated on log size)",
    f"the buckets reaching under {FABRIC_RATIO_PCT:g}% of it carry, together, at least {FABRIC_SHARE_PCT:g}% of the "
    "NCCL time (several small slow buckets count as much as one big one); the worst (most time lost) is named",
    f"under {SMALL_BYTES >> 10} KB: {LATENCY_ADVICE}; larger: {BANDWIDTH_ADVICE}",
)  # fmt: skip


def below_fabric(view: RunView) -> Finding | None:
    """The buckets (op, message size, n) reaching under FABRIC_RATIO_PCT of nccl-tests' busbw at their size, when
    together they carry at least FABRIC_SHARE_PCT of the NCCL time: the worst named (the most time lost against
    the ceiling), the time at stake summed over them all; None without --fabric."""
    sizes = view.nccl_sizes
    if view.inputs.get("fabric") is None or sizes is None or "fabric_ratio" not in sizes or not len(sizes):
        return None
    total = float(sizes["total_ns"].sum())
    share = sizes["total_ns"] * 100.0 / total if total > 0 else np.zeros(len(sizes))
    ratio_pct = sizes["fabric_ratio"] * 100.0
    slow = np.flatnonzero(ratio_pct < FABRIC_RATIO_PCT)  # NaN ratios (no ceiling at that op) are never slow
    slow_share = float(share[slow].sum())
    if not len(slow) or slow_share < FABRIC_SHARE_PCT:
        return None
    # Each bucket's time less its time at the ceiling: what reaching the ceiling would give back.
    lost = sizes["total_ns"][slow] * (1.0 - sizes["fabric_ratio"][slow])
    worst = int(slow[np.argmax(lost)])
    row = next(sizes.take(np.asarray([worst])).rows())
    average_size = row["bytes"] / row["count"]
    steps = len(view.all_steps)
    at_stake = float(lost.sum()) / steps if steps else math.nan  # per step and rank, over every slow bucket
    others = len(slow) - 1
    together = (f"; {len(slow)} buckets under {FABRIC_RATIO_PCT:g}% of the ceiling hold {slow_share:.0f}% of NCCL "
                "time together") if others else ""  # fmt: skip
    return Finding(
        "below_fabric", "warning",
        f"{row['op']} {row['bucket']} messages (n={row['nranks']}, {share[worst]:.0f}% of NCCL time) reach "
        f"{row['busbw_median_gbps']:.2f} GB/s busbw: {ratio_pct[worst]:.0f}% of the {row['fabric_busbw_gbps']:.2f} "
        f"GB/s nccl-tests measured at that size" + together,
        float(ratio_pct[worst]), FABRIC_RATIO_PCT, _cause(row, average_size),
        evidence={"busbw_median_gbps": row["busbw_median_gbps"], "fabric_busbw_gbps": row["fabric_busbw_gbps"],
                  "fabric_ratio_pct": float(ratio_pct[worst]), "nccl_time_share_pct": float(share[worst]),
                  "average_message_bytes": float(average_size), "buckets_below": float(len(slow)),
                  "buckets_below_time_share_pct": slow_share},
        at_stake_ns=at_stake,
    )  # fmt: skip


def _cause(row: dict, average_size: float) -> str:
    """What usually makes a bucket slower than the fabric it runs on."""
    return LATENCY_ADVICE if average_size < SMALL_BYTES else BANDWIDTH_ADVICE
