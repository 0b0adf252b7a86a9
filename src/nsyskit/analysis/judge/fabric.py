"""Is the fabric the limit? With --fabric, a message-size bucket that carries a good share of the communication
time but reaches well under the bus bandwidth nccl-tests measured on the same fabric at that size."""

from __future__ import annotations

import math

import numpy as np

from nsyskit.analysis.compute.metrics import RunView
from nsyskit.analysis.judge.finding import Finding, document

FABRIC_SHARE_PCT = 10.0  # a bucket matters from this share of the NCCL time on
FABRIC_RATIO_PCT = 50.0  # its median busbw under this percent of the measured ceiling fires the finding
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
    f"a bucket carrying at least {FABRIC_SHARE_PCT:g}% of the NCCL time reaches under {FABRIC_RATIO_PCT:g}% of it",
    f"under {SMALL_BYTES >> 10} KB: {LATENCY_ADVICE}; larger: {BANDWIDTH_ADVICE}",
)  # fmt: skip


def below_fabric(view: RunView) -> Finding | None:
    """The bucket (op, message size, n) with the most NCCL time among those that carry at least FABRIC_SHARE_PCT of
    it and reach under FABRIC_RATIO_PCT of nccl-tests' busbw at their size; None without --fabric."""
    sizes = view.nccl_sizes
    if view.inputs.get("fabric") is None or sizes is None or "fabric_ratio" not in sizes or not len(sizes):
        return None
    total = float(sizes["total_ns"].sum())
    share = sizes["total_ns"] * 100.0 / total if total > 0 else np.zeros(len(sizes))
    ratio_pct = sizes["fabric_ratio"] * 100.0
    firing = np.flatnonzero((share >= FABRIC_SHARE_PCT) & (ratio_pct < FABRIC_RATIO_PCT))  # NaN ratios never fire
    if not len(firing):
        return None
    worst = int(firing[np.argmax(sizes["total_ns"][firing])])
    row = next(sizes.take(np.asarray([worst])).rows())
    average_size = row["bytes"] / row["count"]
    steps = len(view.all_steps)
    # Per step and rank: the bucket's time, less the time it would take at the ceiling.
    at_stake = row["total_ns"] * (1.0 - row["fabric_ratio"]) / steps if steps else math.nan
    others = len(firing) - 1
    return Finding(
        "below_fabric", "warning",
        f"{row['op']} {row['bucket']} messages (n={row['nranks']}, {share[worst]:.0f}% of NCCL time) reach "
        f"{row['busbw_median_gbps']:.2f} GB/s busbw: {ratio_pct[worst]:.0f}% of the {row['fabric_busbw_gbps']:.2f} "
        f"GB/s nccl-tests measured at that size" + (f" ({others} more bucket(s) alike)" if others else ""),
        float(ratio_pct[worst]), FABRIC_RATIO_PCT, _cause(row, average_size),
        evidence={"busbw_median_gbps": row["busbw_median_gbps"], "fabric_busbw_gbps": row["fabric_busbw_gbps"],
                  "fabric_ratio_pct": float(ratio_pct[worst]), "nccl_time_share_pct": float(share[worst]),
                  "average_message_bytes": float(average_size), "buckets_below": float(len(firing))},
        at_stake_ns=at_stake,
    )  # fmt: skip


def _cause(row: dict, average_size: float) -> str:
    """What usually makes a bucket slower than the fabric it runs on."""
    return LATENCY_ADVICE if average_size < SMALL_BYTES else BANDWIDTH_ADVICE
