"""kernels_not_recorded: ranks whose nsys recorded GPU copies but no kernel, so their GPU time figures count copies only.

The facts come from compute/recording.py. When every rank with GPU activity is such a rank, the rules that measure
kernel time (KERNEL_TIME_RULES) say nothing about the run: find() leaves their findings out, since an idle GPU, no
overlap or no tensor-core work is then what nsys missed, not what the GPUs did.
"""

from __future__ import annotations

import math

import numpy as np

from nsyskit.analysis.compute.evidence import pivot
from nsyskit.analysis.compute.metrics import RunView
from nsyskit.analysis.compute.recording import COPIES_KEY, CUDA_KEY, NSYS_KEY, RULE
from nsyskit.analysis.judge.finding import Finding, document, ranks_text

# The rules whose numbers are kernel time (busy, idle, overlap, NCCL kernel durations, kernel gaps and kinds).
KERNEL_TIME_RULES = frozenset({
    "exposed_comm", "gpu_idle", "tensor_cores_unused", "tensor_cores_idle", "nccl_outlier", "serialized_streams",
    "below_fabric", "launch_bound", "gpu_gaps", "sync_stall",
})  # fmt: skip

DOC = document(
    RULE, "ranks whose report holds GPU copies or memsets but not one kernel (the export's kernel table is missing or "
    "empty), with the nsys that wrote it and the CUDA version of the driver where the export states it",
    "any such rank; when every rank with GPU activity is one, the kernel-time rules (" + ", ".join(
        sorted(KERNEL_TIME_RULES)) + ") stay silent",
    "record again with an nsys at least as new as the CUDA the program runs (an nsys older than the CUDA does not "
    "know its launch calls and records copies only; the Nsight Systems release notes list the CUDA versions each "
    "release supports); until then GPU busy, idle, overlap and bandwidth figures count copies only",
)  # fmt: skip


def kernels_not_recorded(view: RunView) -> Finding | None:
    """The ranks with copies and no kernel, naming the nsys and CUDA versions when every such rank shares them."""
    facts = pivot(view.evidence, RULE)
    if not len(facts):
        return None
    ranks = tuple(int(r) for r in facts["rank"])
    copies = float(np.nansum(facts[COPIES_KEY]))
    versions = _shared(facts, NSYS_KEY)
    cuda = _shared(facts, CUDA_KEY)
    recorded_by = f"nsys {int(versions) // 100}.{int(versions) % 100}" if versions else "its nsys"
    against = f" on a CUDA {cuda:.1f} driver" if cuda else ""
    return Finding(
        RULE, "warning",
        f"{recorded_by}{against} recorded no GPU kernel on {ranks_text(ranks, len(view.ranks) or None)}, only "
        f"{copies:,.0f} copies and memsets: the GPU figures count copies only",
        float(len(ranks)), 0.0, DOC.advice,
        evidence={"ranks_without_kernels": float(len(ranks)), "copies_and_memsets": copies,
                  **({"nsys_version": versions} if versions else {}), **({"cuda_driver_version": cuda} if cuda else {})},
        ranks=ranks,
    )  # fmt: skip


def silenced(found: list[Finding], view: RunView) -> list[Finding]:
    """FOUND without the kernel-time rules' findings when no rank with GPU activity recorded a kernel."""
    missing = next((f for f in found if f.rule == RULE), None)
    if missing is None:
        return found
    with_gpu = (
        set(int(r) for r in view.breakdown["rank"]) if view.breakdown is not None and len(view.breakdown) else set()
    )
    if not with_gpu <= set(missing.ranks):
        return found
    return [f for f in found if f.rule not in KERNEL_TIME_RULES]


def _shared(facts, key: str) -> float:
    """The value of KEY when every rank that has it agrees (0.0 when none has it or they differ)."""
    if key not in facts.columns:
        return 0.0
    values = {float(v) for v in facts[key] if not math.isnan(v)}
    return values.pop() if len(values) == 1 else 0.0
