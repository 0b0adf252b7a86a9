"""The reduce of the analysis: one run's Analysis from its ranks' results, the same whether they come from this
process's workers (trace.analyze_run) or from part files mapped on a cluster (parts.merge_parts)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from nsyskit.analysis.compute import analyzers, counters, ncclbandwidth, nccldigest
from nsyskit.analysis.compute.metrics import comm_share_by_rank, per_rank, view_of
from nsyskit.analysis.compute.result import Analysis, combine_kernel_summaries, concat
from nsyskit.analysis.compute.table import Table

FOLD = "nccl_fold"  # a partial merge's folded NCCL durations (ncclfold.DurationFold.cells()), on its first rank

# The per-rank tables of trace.analyze_file's results (all but the kernel summary carry a rank column).
TABLE_KEYS = ("kernel_summary", "breakdown", "memcpy", "nvtx", "nvtx_gpu", "steps", "evidence",
              *counters.TABLES)  # and "nccl": its NcclDigest  # fmt: skip
RANKED_KEYS = TABLE_KEYS[1:]
NCCL_KEYS = ("nccl", FOLD)  # a rank's digest; and, on a partial merge's first rank, the block's folded durations
JOINED_RANKS = 64  # ranks whose tables the merge holds apart before joining them (a part's tables die once joined)


def merge(
    per_file: Iterable[list[dict[str, Any]]], straggler_pct: float = 5.0, unprofiled_line: str = "",
    incomplete: list[str] | None = None, world: ncclbandwidth.WorldSize | None = None,
) -> Analysis:  # fmt: skip
    """The reduce: one Analysis from the per-file results of analyze_file (in rank order), the same whether they come
    from this process's workers or from part files written on the cluster (nsyskit.analysis.mapreduce.parts).

    The files' results are folded in as they come (an iterator holds one part at a time): the per-rank tables are
    joined JOINED_RANKS ranks at a time, so no list of thousands of small tables is kept until the end."""
    folded = _Fold()
    for results in per_file:
        folded.add(results)
    results = folded.finish()
    analysis = Analysis(sources={}, nsys_versions={}, incomplete=list(incomplete or []))
    for result in results:
        analysis.sources[result["rank"]] = result["source"]
        analysis.nsys_versions[result["rank"]] = result["nsys_version"]
        analysis.kernel_summaries[result["rank"]] = result["kernel_summary"]
        analysis.warnings.extend(result.get("warnings", []))
    analysis.top_kernels = combine_kernel_summaries(analysis.kernel_summaries)
    for name in RANKED_KEYS:
        setattr(analysis, name, folded.table(name))
    analysis.nccl = folded.nccl.renumbered({position: result["rank"] for position, result in enumerate(results)})
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


def add_nccl(total: nccldigest.NcclRollup, rank: int, result: dict[str, Any]) -> None:
    """Add a rank's NCCL digest to the roll-up (its durations folded in), and the folded durations of a partial
    merge's ranks where the result carries them."""
    total.add(rank, result["nccl"])
    if FOLD in result:
        total.fold.add_cells(*result[FOLD])


class _Fold:
    """The ranks' results as they come: what stays per rank (source, summary, kernel summary) in a list, the ranked
    tables joined every JOINED_RANKS ranks, with each rank's row count to renumber them by, and the NCCL digests
    added up as they come (their durations folded: no rank's durations outlive its fold).

    When a file held several ranks, every rank is renumbered 0..N-1 in file order (as 'invoke analyze' numbers
    them); that is known only once every file is in, so the rank columns are rewritten at the end."""

    def __init__(self) -> None:
        self.kept: list[dict[str, Any]] = []
        self.pending: dict[str, list[Table]] = {name: [] for name in RANKED_KEYS}
        self.chunks: dict[str, list[Table]] = {name: [] for name in RANKED_KEYS}
        self.rows: dict[str, list[int]] = {name: [] for name in RANKED_KEYS}
        self.renumber = False
        self.nccl = nccldigest.NcclRollup()  # by each rank's place in the list until finish() numbers them

    def add(self, results: list[dict[str, Any]]) -> None:
        self.renumber = self.renumber or len(results) != 1
        for result in results:
            for name in RANKED_KEYS:
                table = result[name]
                self.pending[name].append(table)
                self.rows[name].append(len(table) if table is not None else 0)
            add_nccl(self.nccl, len(self.kept), result)
            self.kept.append({key: value for key, value in result.items() if key not in (*RANKED_KEYS, *NCCL_KEYS)})
            if len(self.pending[RANKED_KEYS[0]]) >= JOINED_RANKS:
                self._join()

    def _join(self) -> None:
        for name in RANKED_KEYS:
            joined = concat(self.pending[name])
            if joined is not None:
                self.chunks[name].append(joined)
            self.pending[name] = []

    def finish(self) -> list[dict[str, Any]]:
        """The kept per-rank results, renumbered where a file held several ranks."""
        self._join()
        if self.renumber:
            for new, result in enumerate(self.kept):
                result["rank"] = result["summary"]["rank"] = new
        return self.kept

    def table(self, name: str) -> Table | None:
        """The ranks' rows of one table, one rank after another (None when no rank had the table)."""
        joined = concat(self.chunks[name])
        if joined is not None and self.renumber and len(joined):
            joined.columns["rank"] = np.repeat(np.arange(len(self.kept), dtype=np.int64), self.rows[name])
        return joined
