"""The reduce of the analysis: one run's Analysis from its ranks' results, the same whether they come from this
process's workers (trace.analyze_run) or from part files mapped on a cluster (parts.merge_parts)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nsyskit.analysis.compute import analyzers, counters, ncclbandwidth, nccldigest
from nsyskit.analysis.compute.metrics import comm_share_by_rank, per_rank, view_of
from nsyskit.analysis.compute.result import Analysis, combine_kernel_summaries, concat

# The per-rank tables of trace.analyze_file's results (all but the kernel summary carry a rank column).
TABLE_KEYS = ("kernel_summary", "breakdown", "memcpy", "nvtx", "nvtx_gpu", "steps", "evidence",
              *counters.TABLES)  # and "nccl": its NcclDigest  # fmt: skip
RANKED_KEYS = TABLE_KEYS[1:]


def merge(
    per_file: list[list[dict[str, Any]]], straggler_pct: float = 5.0, unprofiled_line: str = "",
    incomplete: list[str] | None = None, world: ncclbandwidth.WorldSize | None = None,
) -> Analysis:  # fmt: skip
    """The reduce: one Analysis from the per-file results of analyze_file (in rank order), the same whether they come
    from this process's workers or from part files written on the cluster (nsyskit.analysis.mapreduce.parts)."""
    results = _renumber(per_file)
    analysis = Analysis(sources={}, nsys_versions={}, incomplete=list(incomplete or []))
    for result in results:
        analysis.sources[result["rank"]] = result["source"]
        analysis.nsys_versions[result["rank"]] = result["nsys_version"]
        analysis.kernel_summaries[result["rank"]] = result["kernel_summary"]
        analysis.warnings.extend(result.get("warnings", []))
    analysis.top_kernels = combine_kernel_summaries(analysis.kernel_summaries)
    for name in RANKED_KEYS:
        setattr(analysis, name, concat([r[name] for r in results]))
    analysis.nccl = nccldigest.rollup({result["rank"]: result["nccl"] for result in results})
    # n where a report states none: run.json's world size when the caller read one, else the ranks analyzed
    analysis.nccl.world = world or ncclbandwidth.WorldSize(max(1, len(results)), "rank reports")
    analysis.nccl_sizes = nccldigest.size_summary(analysis.nccl)
    if unprofiled_line:  # the ranks the run ran without nsys: absent from every table, named so no one reads them as idle
        analysis.warnings.append(unprofiled_line)
    # The ranks table's comm share is the findings' (on a CPU run: of the window's step time, not of GPU busy time).
    view = view_of(analysis)
    shares = comm_share_by_rank(view)
    summaries = [{**r["summary"], "comm_share_pct": shares.get(r["rank"], r["summary"]["comm_share_pct"])} for r in results]
    # One verdict per concept: the table flags the stragglers the findings name, on the findings' measure
    work = per_rank(view)
    analysis.ranks = analyzers.cross_rank(summaries, straggler_pct, dict(zip(work["rank"].tolist(), work["work_ns"].tolist(), strict=True)))
    analysis.straggler_pct = straggler_pct
    return analysis


def _renumber(per_file: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Flat per-rank results; when a file held several ranks, every rank is renumbered 0..N-1 in file order."""
    if all(len(results) == 1 for results in per_file):
        return [results[0] for results in per_file]
    flat = [result for results in per_file for result in results]
    for new, result in enumerate(flat):
        if result["rank"] != new:
            result["rank"] = new
            for name in RANKED_KEYS:
                result[name].columns["rank"] = np.full(len(result[name]), new, dtype=np.int64)
            result["summary"]["rank"] = new
    return flat
