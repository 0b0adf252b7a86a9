"""Rules about the GPU's own work: matrix math left on the SIMT cores while tensor cores sit idle.

Run-level rules over the run's kernel table (every kernel name's GPU time summed over all ranks, exact through the
cluster merge); kernels are told apart by name (compute.kernelclass).
"""

from __future__ import annotations

import numpy as np

from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.kernelclass import classify
from nsyskit.analysis.compute.kernelnames import short_names
from nsyskit.analysis.compute.metrics import RunView
from nsyskit.analysis.judge.finding import Finding, document

SIMT_SHARE_PCT = 10.0  # GEMM/convolution kernels without tensor cores, % of all GPU kernel time ...
SIMT_MIN_NS = 100_000  # ... and at least this much of it (ns): a few stray kernels are not a cause
TENSOR_CORE_SPEEDUP = 4.0  # what the estimate assumes tensor cores give those kernels (A100: TF32 8x FP32 peak)

TENSOR_CORES = document(
    "tensor_cores_unused", "GPU time of GEMM and convolution kernels that run on the SIMT cores (fp32 `sgemm`, "
    "`scudnn`, `implicit_convolve_sgemm`, CUTLASS `simt`), told apart by name from tensor-core kernels (`xmma`, "
    "`hmma`, `wgmma`, `s16816`, `tensorop`, `nvjet`, bf16/fp16/tf32 tags, FlashAttention), as a share of all kernel "
    "time", f"that share is at least {SIMT_SHARE_PCT:g}% (and {SIMT_MIN_NS / 1e6:g} ms); the time at stake assumes "
    f"tensor cores run them {TENSOR_CORE_SPEEDUP:g}x faster",
    "let them use tensor cores: mixed precision (torch.autocast with bf16/fp16), or TF32 for fp32 math "
    "(torch.backends.cuda.matmul.allow_tf32 = True, torch.backends.cudnn.allow_tf32 = True); keep GEMM dimensions "
    "multiples of 8",
)  # fmt: skip


def tensor_cores_unused(view: RunView) -> Finding | None:
    """GEMM/convolution kernels on the SIMT cores hold SIMT_SHARE_PCT or more of the run's GPU kernel time."""
    table = view.top_kernels
    if table is None or not len(table):
        return None
    names = [str(n) for n in table["name"]]
    matrix, tensor = classify(names)
    simt = matrix & ~tensor
    total = float(table["total_ns"].sum())
    spent = float(table["total_ns"][simt].sum())
    share = spent * 100.0 / total if total else 0.0
    if share < SIMT_SHARE_PCT or spent < SIMT_MIN_NS:
        return None
    worst = np.flatnonzero(simt)[np.argsort(-table["total_ns"][simt], kind="stable")][:3]
    shorts = table["short_name"] if "short_name" in table else short_names(np.asarray(names, dtype=object))
    named = ", ".join(f"{shorts[i]} ({units.duration(table['total_ns'][i])})" for i in worst)  # as the table names them
    steps = len(view.steps)
    per_step = spent / steps if steps else float("nan")
    matrix_ns = float(table["total_ns"][matrix].sum())
    return Finding(
        "tensor_cores_unused", "warning",
        f"{units.percent(share)} of GPU time is matrix math on the SIMT cores, not the tensor cores: {named}",
        share, SIMT_SHARE_PCT, TENSOR_CORES.advice,
        evidence={"simt_matrix_ns": spent, "simt_matrix_pct": share, "matrix_ns": matrix_ns, "kernel_ns": total,
                  "tensor_core_matrix_pct": (matrix_ns - spent) * 100.0 / matrix_ns if matrix_ns else float("nan")},
        at_stake_ns=per_step * (1 - 1 / TENSOR_CORE_SPEEDUP),
    )  # fmt: skip
