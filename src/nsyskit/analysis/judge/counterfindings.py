"""The findings the sampled counters support (findings.py lists these rules among the others): tensor cores idle
while the GPU is busy, NIC throughput far under line rate while NCCL kernels run, one EFA device carrying most of a
node's traffic. Each reads the counters table (compute/counters.py: per rank, device and metric, over the window).
As every rule's, a finding's value lies above its threshold: the idle share of the tensor cores, the unused share
of the line rate, the busiest EFA device's share.
"""

from __future__ import annotations

import os
import re

import numpy as np

from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.kernelclass import classify
from nsyskit.analysis.compute.metrics import RunView
from nsyskit.analysis.compute.nccl import NCCL_KERNEL
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.judge.finding import Finding, document, ranks_text
from nsyskit.analysis.read.records import factorize

TENSOR_ACTIVE_PCT = 10.0  # tensor cores active, % of the time the GPU's kernels run ...
TENSOR_MATRIX_PCT = 50.0  # ... while matrix math (GEMM/convolution kernels) holds this much of the compute kernels' time
LINE_RATE_PCT = 25.0  # a network device's busiest direction while NCCL kernels run, % of its line rate
LINE_RATE_GBITS = 100.0  # per device (one EFA device of p4d/p5 instances); NSYSKIT_NIC_LINE_RATE_GBPS overrides
LINE_RATE_VARIABLE = "NSYSKIT_NIC_LINE_RATE_GBPS"
EFA_SHARE_PCT = 50.0  # one EFA device's share of its node's EFA bytes (and 1.5x an even share)
TENSOR = re.compile(r"^Tensor (Pipe )?Active", re.IGNORECASE)
BYTE_RATES = ("B/s", "bytes/s", "Bytes/s", "byte/s")
SHOWN = 3  # devices named in a title

TENSOR_DOC = document(
    "tensor_cores_idle", "GPU metrics (nsys --gpu-metrics-devices): the tensor cores' activity ('Tensor Active') "
    "averaged over the time each GPU's kernels run, where matrix math (GEMM/convolution kernels, by name) is most of "
    "the compute kernels' time", f"it is under {TENSOR_ACTIVE_PCT:g}% on a GPU while GEMM/convolution kernels hold at "
    f"least {TENSOR_MATRIX_PCT:g}% of the compute kernels' time (a GPU busy with elementwise work is not a tensor-core "
    f"problem; the finding's value is the idle share, above {100 - TENSOR_ACTIVE_PCT:g}%)",
    "the matrix math does not keep the tensor cores busy: run it in bf16/fp16 (torch.autocast) or TF32, with "
    "dimensions multiples of 8 (see tensor_cores_unused for the kernels on the CUDA cores), and grow the GEMMs "
    "(batch size, fused projections)",
)  # fmt: skip
LINE_DOC = document(
    "nic_under_line_rate", "EFA and NIC byte counters (--enable efa_metrics, --nic-metrics): each device's busiest "
    "direction averaged over the time the rank's NCCL kernels run, against its line rate "
    f"({LINE_RATE_GBITS:g} Gb/s per device unless {LINE_RATE_VARIABLE} says otherwise)",
    f"every device that carried traffic then stays under {LINE_RATE_PCT:g}% of line rate",
    "the fabric is not what NCCL waits on: look at message sizes and NCCL's channels and transport in the NCCL log "
    "(NCCL_DEBUG=INFO: is the EFA/IB plugin in use, GPUDirect RDMA on?); if the line rate differs, set "
    f"{LINE_RATE_VARIABLE}",
)  # fmt: skip
EFA_DOC = document(
    "efa_imbalance", "EFA byte counters: the bytes each EFA device of a node moved in the window (the report that "
    "sampled them: the kit's local rank 0)", f"one device carried at least {EFA_SHARE_PCT:g}% of them (and 1.5x an "
    "even share)",
    "NCCL sends through one EFA device: check that the aws-ofi-nccl plugin sees every device (NCCL_DEBUG=INFO lists "
    "them), that FI_EFA_* and NCCL_IB_HCA do not pin one, and that each GPU's nearest device is used "
    "(NCCL_TOPO_FILE on instances without a topology)",
)  # fmt: skip


def _rows(view: RunView, keep) -> Table | None:
    """The counters rows `keep(table)` selects (None without counters or rows)."""
    table = getattr(view, "counters", None)
    if table is None or not len(table):
        return None
    mine = table.take(keep(table))
    return mine if len(mine) else None


def _labels(table: Table, order: np.ndarray) -> str:
    """'rank 0 GPU 1, rank 3 GPU 0 and 5 more': the devices of `table` in `order`, at most SHOWN named."""
    names = [f"rank {table['rank'][i]} {table['device'][i]}" for i in order[:SHOWN]]
    return ", ".join(names) + (f" and {len(order) - SHOWN} more" if len(order) > SHOWN else "")


def tensor_cores_idle(view: RunView) -> Finding | None:
    """Tensor cores active under TENSOR_ACTIVE_PCT of the time a GPU's kernels ran (GPU metrics' Tensor Active)."""
    rows = _rows(view, lambda t: (t["kind"] == "gpu") & np.array([bool(TENSOR.search(m)) for m in t["metric"]]))
    if rows is None:
        return None
    busy = rows["busy_mean"].astype(np.float64)
    under = np.flatnonzero(busy < TENSOR_ACTIVE_PCT)  # NaN (no kernel ran on that GPU) is never under
    matrix = matrix_share(view)
    if not len(under) or not matrix >= TENSOR_MATRIX_PCT:  # mostly other work: low tensor activity is its due
        return None
    order = under[np.argsort(busy[under], kind="stable")]
    active = float(busy[under].mean())
    return Finding(
        "tensor_cores_idle", "warning",
        f"tensor cores idle {units.percent(100 - active)} of the time the GPU runs kernels (active "
        f"{units.percent(active)}) on {len(under)} of {len(rows)} GPUs (lowest: {_labels(rows, order)})",
        100 - active, 100 - TENSOR_ACTIVE_PCT, TENSOR_DOC.advice,
        evidence={"tensor_active_while_busy_pct": active, "gpus_under": float(len(under)), "gpus": float(len(rows)),
                  "matrix_share_of_compute_pct": matrix},
        ranks=tuple(sorted({int(r) for r in rows["rank"][under]})),
    )  # fmt: skip


def matrix_share(view: RunView) -> float:
    """GEMM/convolution kernels' share of the compute kernels' GPU time over the run (NCCL kernels left out), in %;
    NaN without a kernel table."""
    table = view.top_kernels
    if table is None or not len(table):
        return float("nan")
    names = [str(n) for n in table["name"]]
    matrix, _tensor = classify(names)
    compute = ~np.fromiter((bool(NCCL_KERNEL.search(n)) for n in names), dtype=bool, count=len(names))
    total = float(table["total_ns"][compute].sum())
    return float(table["total_ns"][matrix & compute].sum()) * 100.0 / total if total else float("nan")


def line_rate_bytes() -> float:
    """A network device's line rate in bytes/s (NSYSKIT_NIC_LINE_RATE_GBPS, else LINE_RATE_GBITS), per direction."""
    raw = os.environ.get(LINE_RATE_VARIABLE, "").strip()
    try:
        gbits = float(raw) if raw else LINE_RATE_GBITS
    except ValueError:
        gbits = LINE_RATE_GBITS
    return (gbits if gbits > 0 else LINE_RATE_GBITS) * 1e9 / 8


def _devices(rows: Table, column: str) -> Table:
    """Per rank and device, the busiest byte-rate metric's `column` (its busiest direction) and the bytes moved."""
    keys, codes = factorize(list(zip(rows["rank"].tolist(), rows["device"].tolist(), strict=True)))
    busiest = np.full(len(keys), np.nan)
    np.fmax.at(busiest, codes, rows[column].astype(np.float64))  # fmax skips NaN: NaN only where all are
    moved = np.bincount(codes, weights=np.nan_to_num(rows["total"].astype(np.float64)), minlength=len(keys))
    return Table({"rank": np.array([k[0] for k in keys], dtype=np.int64),
                  "device": np.array([k[1] for k in keys], dtype=object),
                  "rate": busiest, "bytes": moved})  # fmt: skip


def nic_under_line_rate(view: RunView) -> Finding | None:
    """Network devices that carried traffic while NCCL kernels ran, at under LINE_RATE_PCT of their line rate."""
    rows = _rows(view, lambda t: np.isin(t["kind"], ("efa", "nic")) & np.isin(t["unit"], BYTE_RATES))
    if rows is None:
        return None
    devices = _devices(rows, "nccl_mean")
    used = np.flatnonzero(devices["rate"] > 0)
    if not len(used):
        return None
    line = line_rate_bytes()
    share = devices["rate"][used] * 100.0 / line
    if share.max() >= LINE_RATE_PCT:
        return None
    used_pct = float(share.mean())
    return Finding(
        "nic_under_line_rate", "info",
        f"network devices use {units.percent(used_pct)} of line rate ({line * 8 / 1e9:g} Gb/s) while NCCL kernels run "
        f"(busiest: {units.quantity(float(devices['rate'][used].max()), 'B/s')}; {_labels(devices, used)})",
        100 - used_pct, 100 - LINE_RATE_PCT, LINE_DOC.advice,
        evidence={"line_rate_pct": used_pct, "busiest_bytes_per_s": float(devices["rate"][used].max()),
                  "line_rate_bytes_per_s": line, "devices": float(len(used))},
        ranks=tuple(sorted({int(r) for r in devices["rank"][used]})),
    )  # fmt: skip


def efa_imbalance(view: RunView) -> Finding | None:
    """On a node (the rank whose report sampled its EFA devices), one device carried most of the EFA bytes."""
    rows = _rows(view, lambda t: (t["kind"] == "efa") & np.isin(t["unit"], BYTE_RATES))
    if rows is None:
        return None
    devices = _devices(rows, "mean")
    worst: tuple[float, int, str, int] | None = None
    fired = []
    for rank in np.unique(devices["rank"]):
        mine = devices.take(devices["rank"] == rank)
        total = float(mine["bytes"].sum())
        if len(mine) < 2 or total <= 0:
            continue
        top = int(np.argmax(mine["bytes"]))
        share = float(mine["bytes"][top]) * 100.0 / total
        if share >= max(EFA_SHARE_PCT, 150.0 / len(mine)):
            fired.append(int(rank))
            if worst is None or share > worst[0]:
                worst = (share, int(rank), str(mine["device"][top]), len(mine))
    if worst is None:
        return None
    share, rank, device, count = worst
    return Finding(
        "efa_imbalance", "warning",
        f"{device} carried {units.percent(share)} of the EFA bytes of rank {rank}'s node ({count} EFA devices; "
        f"{ranks_text(fired)})",
        share, EFA_SHARE_PCT, EFA_DOC.advice,
        evidence={"top_device_share_pct": share, "efa_devices": float(count)}, ranks=tuple(fired),
    )  # fmt: skip


RULES = (tensor_cores_idle, nic_under_line_rate, efa_imbalance)
