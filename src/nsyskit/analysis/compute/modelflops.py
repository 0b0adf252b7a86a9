"""Each rank's facts for the low_mfu rule, as evidence rows: its GPU models and the FLOPs its program marked.

The map runs `model_facts` on every rank (compute.evidence); the merge carries the rows like any other, so the rule
reads the same numbers from a cluster's parts as from a local analysis. A GPU model travels in the key
('gpu:NVIDIA H100 80GB HBM3' with the rank's count of such GPUs as the value): evidence values are numbers.
"""

from __future__ import annotations

from collections.abc import Iterator

from nsyskit import runrecord
from nsyskit.analysis.compute import evidence
from nsyskit.analysis.compute.peaks import DTYPES

RULE = "low_mfu"
GPU_KEY = "gpu:"  # + the GPU's name as the export gives it
FLOPS_KEY = "flops_per_step"  # the FLOPs of one step on one GPU the program marked (runrecord.flops_mark)
DTYPE_KEY = "dtype"  # its dtype, as an index into peaks.DTYPES


def model_facts(inputs: evidence.RankInputs) -> Iterator[tuple[str, str, float]]:
    """The rank's GPU models (those its kernels ran on, else every GPU the export lists when they share one name)
    and the example's FLOPs mark, when its report has one."""
    names = _gpu_names(inputs)
    for name in sorted(set(names)):
        yield RULE, GPU_KEY + name, float(names.count(name))
    mark = _flops_mark(inputs)
    if mark is not None:
        flops, dtype = mark
        yield RULE, FLOPS_KEY, flops
        if dtype in DTYPES:
            yield RULE, DTYPE_KEY, float(DTYPES.index(dtype))


def _gpu_names(inputs: evidence.RankInputs) -> list[str]:
    """The name of each GPU the rank used (its breakdown's devices), as the export's GPU table names them."""
    if inputs.reader is None:
        return []
    listed = inputs.reader.gpus()
    devices = sorted({int(d) for d in inputs.breakdown["device"]}) if inputs.breakdown is not None and len(
        inputs.breakdown) else []  # fmt: skip
    used = [listed[d] for d in devices if d in listed]
    if used:
        return used
    distinct = set(listed.values())  # ids that differ between tables: one model on the node is still that model
    return [distinct.pop()] * max(len(devices), 1) if len(distinct) == 1 else []


def _flops_mark(inputs: evidence.RankInputs) -> tuple[float, str] | None:
    """The first FLOPs mark among the rank's NVTX texts (runrecord.flops_mark), else None."""
    if inputs.nvtx is None or not len(inputs.nvtx):
        return None
    texts, _codes = inputs.nvtx.texts
    # One search of the texts joined (a rank has tens of thousands of per-call texts; the mark is one of them).
    try:
        joined = "\0" + "\0".join(texts)
    except TypeError:  # a text that is not one (a NULL): left out
        joined = "\0" + "\0".join(text if isinstance(text, str) else "" for text in texts)
    at = joined.find("\0" + runrecord.FLOPS_MARK_PREFIX)
    while at >= 0:
        end = joined.find("\0", at + 1)
        parsed = runrecord.parse_flops_mark(joined[at + 1 : end if end >= 0 else len(joined)])
        if parsed is not None:
            return parsed
        at = joined.find("\0" + runrecord.FLOPS_MARK_PREFIX, at + 1)
    return None


evidence.EXTRACTORS.append(model_facts)
