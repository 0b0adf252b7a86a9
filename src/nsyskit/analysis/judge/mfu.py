"""low_mfu: the model FLOPs a GPU achieves per second against its dense peak for the dtype (model FLOPs utilization).

Known only when the model's FLOPs per step are: 'invoke analyze --flops-per-step N' (any run), or the mark the kit's
example leaves in its report (compute.modelflops). Per rank: achieved = FLOPs of one step on one GPU / the rank's
median window step time; MFU = achieved / the dense peak of its GPU model for the dtype (compute.peaks).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.evidence import pivot
from nsyskit.analysis.compute.metrics import RunView
from nsyskit.analysis.compute.modelflops import DTYPE_KEY, FLOPS_KEY, GPU_KEY, RULE
from nsyskit.analysis.compute.peaks import DEFAULT_DTYPE, DTYPES, find_gpu
from nsyskit.analysis.compute.table import rows_by_rank
from nsyskit.analysis.judge.finding import Finding, document, ranks_text

LOW_MFU_PCT = 30.0  # MFU under this fires; also the target the time at stake is estimated against

DOC = document(
    RULE, "achieved model FLOP/s per GPU: the model's training FLOPs of one step on one GPU (--flops-per-step, or "
    "what the kit's example marks in its report) over the rank's median window step time, against the GPU's dense "
    "peak for the dtype (--dtype, default bf16, or the example's; a table of datasheet peaks per GPU model, matched on "
    "the export's GPU name or --gpu-model)",
    f"MFU below {LOW_MFU_PCT:g}% on a rank; time at stake per step = step time x (1 - MFU / {LOW_MFU_PCT:g}%), an "
    "estimate; silent without FLOPs per step; one note when they are given but the GPU model (or its peak for the "
    "dtype) is unknown",
    "give each GPU more math per step and cut what is not math: a larger micro-batch or sequence, bf16 autocast so "
    "GEMMs run on tensor cores, fused kernels (torch.compile, fused attention); the other findings name the time "
    "lost to communication, syncs and idle gaps",
)  # fmt: skip


@dataclass(frozen=True)
class RankMfu:
    """One rank's MFU and what it was computed from."""

    rank: int
    flops: float
    step_ns: float
    dtype: str
    gpu: str
    model: str
    peak_tflops: float

    @property
    def achieved_tflops(self) -> float:
        """Model TFLOP/s one GPU of the rank achieves."""
        return self.flops / self.step_ns / 1e3  # FLOPs per ns = GFLOP/s; / 1e3: TFLOP/s

    @property
    def mfu_pct(self) -> float:
        """Achieved over the dense peak, in percent."""
        return 100.0 * self.achieved_tflops / self.peak_tflops


def low_mfu(view: RunView) -> Finding | None:
    """Ranks whose MFU lies under LOW_MFU_PCT; a note when FLOPs are known but no peak is; None without FLOPs."""
    facts = pivot(view.evidence, RULE)
    known, missing = [], []
    steps = _median_steps(view)
    if not steps and view.inputs.get("flops_per_step") and view.has_gpu:
        return _note([(int(r), "", "", "") for r in view.ranks] or [(0, "", "", "")], "steps")
    for rank, step_ns in steps.items():
        flops = view.inputs.get("flops_per_step") or _fact(facts, rank, FLOPS_KEY)
        if not flops or math.isnan(flops):
            continue
        code = _fact(facts, rank, DTYPE_KEY)
        dtype = view.inputs.get("dtype") or (DTYPES[int(code)] if not math.isnan(code) else DEFAULT_DTYPE)
        gpu = view.inputs.get("gpu_model") or _gpu_of(facts, rank)
        row = find_gpu(gpu) if gpu else None
        peak = row.peak(dtype) if row else None
        if peak is None:
            missing.append((rank, gpu, row.model if row else "", dtype))
            continue
        known.append(RankMfu(rank, float(flops), step_ns, dtype, gpu, row.model, peak))
    if not known:  # a note only where the user asked (--flops-per-step): the example's own mark stays silent
        return _note(missing) if missing and view.inputs.get("flops_per_step") else None
    low = [r for r in known if r.mfu_pct < LOW_MFU_PCT]
    if not low:
        return None
    mfu = float(np.median([r.mfu_pct for r in low]))
    step = float(np.median([r.step_ns for r in low]))
    achieved = float(np.median([r.achieved_tflops for r in low]))
    typical = Counter((r.model, r.gpu, r.dtype, r.peak_tflops) for r in low).most_common(1)[0][0]
    model, gpu, dtype, peak = typical
    stake = step * (1.0 - mfu / LOW_MFU_PCT)  # the step at the target MFU would take step x MFU / target
    return Finding(
        RULE, "warning",
        f"MFU {mfu:.1f}% on {ranks_text([r.rank for r in low], len(known))}: {achieved:.1f} TFLOP/s per GPU of "
        f"{peak:g} TFLOP/s dense {dtype} ({model}: {gpu}), {low[0].flops:.3g} FLOPs per step in a "
        f"{units.duration(step)} median step",
        mfu, LOW_MFU_PCT, DOC.advice,
        evidence={"mfu_pct": mfu, "achieved_tflops": achieved, "peak_tflops": peak, "flops_per_step": low[0].flops,
                  "step_median_ns": step, "min_mfu_pct": min(r.mfu_pct for r in low)},
        ranks=tuple(r.rank for r in low), at_stake_ns=max(stake, 0.0),
        threshold_text=f"{LOW_MFU_PCT:g}% MFU",
    )  # fmt: skip


def _median_steps(view: RunView) -> dict[int, float]:
    """Each rank's median step time in the profiled window (ns), ranks in order."""
    steps = view.steps
    if steps is None or not len(steps):
        return {}
    return {rank: float(np.median(steps["duration_ns"][rows])) for rank, rows in rows_by_rank(steps["rank"]).items()}


def _fact(facts, rank: int, key: str) -> float:
    """One rank's evidence value for `key`, NaN when it has none."""
    if key not in facts:
        return math.nan
    where = np.flatnonzero(facts["rank"] == rank)
    return float(facts[key][where[0]]) if len(where) else math.nan


def _gpu_of(facts, rank: int) -> str:
    """The GPU model the rank used most ('' when its export names none)."""
    counts = {key[len(GPU_KEY) :]: _fact(facts, rank, key) for key in facts.names if key.startswith(GPU_KEY)}
    counts = {name: n for name, n in counts.items() if n > 0}
    return max(counts, key=counts.get) if counts else ""


def _note(missing: list[tuple[int, str, str, str]], lacking: str = "peak") -> Finding:
    """The one line saying why MFU was not computed though FLOPs per step were given: which input is missing."""
    ranks = [rank for rank, *_ in missing]
    _rank, gpu, model, dtype = missing[0]
    if lacking == "steps":
        why, fix = "no step time (no 'step N' NVTX ranges in the window)", "mark each training step with an NVTX range"
        ranks = []  # the run as a whole
    elif not gpu:
        why, fix = "the GPU model is unknown (the export names no GPU)", "pass --gpu-model, e.g. --gpu-model H100-SXM"
    elif not model:
        why, fix = (
            f"no peak is known for the GPU {gpu!r}",
            "pass --gpu-model with a GPU of the peak table (docs/analysis.md)",
        )
    else:
        why, fix = f"the {model} has no dense {dtype} peak", "pass --dtype with the math the run used (e.g. fp16)"
    return Finding(
        RULE, "info", f"MFU not computed on {ranks_text(ranks)}: {why}; {fix}", math.nan, LOW_MFU_PCT, DOC.advice,
        ranks=tuple(ranks), threshold_text=f"{LOW_MFU_PCT:g}% MFU",
    )  # fmt: skip
