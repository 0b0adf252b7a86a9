"""The reduce of the analysis: one run's Analysis from its ranks' results, the same whether they come from this
process's workers (trace.analyze_run) or from part files mapped on a cluster (parts.merge_parts)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from nsyskit.analysis.compute import analyzers, ncclbandwidth, nccldigest, ncclsizes
from nsyskit.analysis.compute.metrics import comm_share_by_rank, per_rank, view_of
from nsyskit.analysis.compute.result import Analysis, RankTables, combine_kernel_summaries
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.mapreduce.block import (  # noqa: F401  (trace and parts take the keys here)
    KERNEL_SUMMARY,
    NCCL_GROUPS,
    NCCL_SUMS,
    RANKED_KEYS,
    TABLE_KEYS,
    Block,
    join,
)

JOINED_RANKS = 64  # ranks whose tables the merge holds apart before joining them (a part's tables die once joined)


def merge(
    per_file: Iterable[list[dict[str, Any]] | Block], straggler_pct: float = 5.0, unprofiled_line: str = "",
    incomplete: list[str] | None = None, world: ncclbandwidth.WorldSize | None = None,
) -> Analysis:  # fmt: skip
    """The reduce: one Analysis from the per-file results of analyze_file (in rank order), the same whether they come
    from this process's workers or from part files written on the cluster (nsyskit.analysis.mapreduce.parts).

    The files' results are folded in as they come (an iterator holds one part at a time): the per-rank tables are
    joined JOINED_RANKS ranks at a time, so no list of thousands of small tables is kept until the end; a Block (a
    partial merge's ranks) comes joined and is taken whole."""
    folded = _Fold()
    for results in per_file:
        folded.add(results)
    results = folded.finish()
    analysis = Analysis(sources={}, nsys_versions={}, incomplete=list(incomplete or []))
    for result in results:
        analysis.sources[result["rank"]] = result["source"]
        analysis.nsys_versions[result["rank"]] = result["nsys_version"]
        analysis.warnings.extend(result.get("warnings", []))
    kernel_summaries = folded.table(KERNEL_SUMMARY)
    analysis.kernel_summaries = RankTables(kernel_summaries, [r["rank"] for r in results], folded.rows[KERNEL_SUMMARY])
    analysis.top_kernels = combine_kernel_summaries(kernel_summaries if kernel_summaries is not None else {})
    for name in RANKED_KEYS:
        setattr(analysis, name, folded.table(name))
    analysis.nccl = folded.nccl.renumbered({position: result["rank"] for position, result in enumerate(results)})
    # n where a report states none: run.json's world size when the caller read one, else the ranks analyzed
    analysis.nccl.world = world or ncclbandwidth.WorldSize(max(1, len(results)), "rank reports")
    analysis.nccl_sizes = ncclsizes.size_summary(analysis.nccl)
    coarsened = analysis.nccl.fold.coarsening_line()  # a kind of operation whose durations passed the fold's budget
    if coarsened:
        analysis.warnings.append(coarsened)
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


class _Fold:
    """The ranks' results as they come: what stays per rank (source, summary) in a list, the tables joined every
    JOINED_RANKS ranks (a block's come joined), with each rank's row count to renumber them by and to cut each rank's
    kernel summary out of the joined one, and the NCCL digests added up as they come (their durations folded: no
    rank's durations outlive its fold).

    When a file held several ranks, every rank is renumbered 0..N-1 in file order (as 'invoke analyze' numbers
    them); that is known only once every file is in, so the rank columns are rewritten at the end."""

    def __init__(self) -> None:
        self.kept: list[dict[str, Any]] = []
        self.pending: dict[str, list[Table]] = {name: [] for name in TABLE_KEYS}
        self.chunks: dict[str, list[Table]] = {name: [] for name in TABLE_KEYS}
        self.rows: dict[str, list[int]] = {name: [] for name in TABLE_KEYS}
        self.renumber = False
        self.nccl = nccldigest.NcclRollup()  # by each rank's place in the list until finish() numbers them

    def add(self, results: list[dict[str, Any]] | Block) -> None:
        if isinstance(results, Block):
            self._add_block(results)
            return
        self.renumber = self.renumber or len(results) != 1
        for result in results:
            for name in TABLE_KEYS:
                table = result[name]
                self.pending[name].append(table)
                self.rows[name].append(len(table) if table is not None else 0)
            self.nccl.add(len(self.kept), result["nccl"])  # its durations folded in
            self.kept.append({key: value for key, value in result.items() if key not in (*TABLE_KEYS, "nccl")})
            if len(self.pending[TABLE_KEYS[0]]) >= JOINED_RANKS:
                self._join()

    def _add_block(self, block: Block) -> None:
        """A block's ranks whole: its joined tables one chunk each, their rank columns the ranks its results were
        given (one np.repeat over the row counts, not a column per rank)."""
        self._join()  # the ranks before it first: the rows stay in rank order
        self.renumber = self.renumber or not block.one_rank_per_part
        ranks = np.fromiter((result["rank"] for result in block.results), dtype=np.int64, count=len(block.results))
        for name in TABLE_KEYS:
            table, rows = block.tables.get(name), block.row_counts(name)
            if table is not None:
                if name != KERNEL_SUMMARY:
                    table.columns["rank"] = np.repeat(ranks, rows)
                self.chunks[name].append(table)
            self.rows[name] += rows.tolist()
        self.nccl.add_joined(len(self.kept), [result[NCCL_SUMS] for result in block.results],
                             block.tables.get(NCCL_GROUPS), block.row_counts(NCCL_GROUPS), block.fold)  # fmt: skip
        self.kept += [{key: value for key, value in result.items() if key != NCCL_SUMS} for result in block.results]

    def _join(self) -> None:
        for name in TABLE_KEYS:
            joined = join(name, self.pending[name])
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
        joined = join(name, self.chunks[name])
        if joined is not None and self.renumber and len(joined) and name != KERNEL_SUMMARY:
            joined.columns["rank"] = np.repeat(np.arange(len(self.kept), dtype=np.int64), self.rows[name])
        return joined
