"""A block of ranks' results with their tables joined (one table per name over the block, each rank's row count
beside): what a partial merge stores, and what the reduce takes whole instead of rank by rank."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nsyskit.analysis.compute import counters
from nsyskit.analysis.compute.result import concat
from nsyskit.analysis.compute.table import Table

# The per-rank tables of trace.analyze_file's results (all but the kernel summary carry a rank column).
KERNEL_SUMMARY = "kernel_summary"
TABLE_KEYS = (KERNEL_SUMMARY, "breakdown", "memcpy", "nvtx", "nvtx_gpu", "steps", "evidence",
              *counters.TABLES)  # and "nccl": its NcclDigest  # fmt: skip
RANKED_KEYS = TABLE_KEYS[1:]
NCCL_GROUPS = "nccl_groups"  # the ranks' NCCL digests' groups (op, origin, bucket: count, time, bytes), joined
NCCL_SUMS = "nccl_sums"  # in a block's per-rank results: the rank's NCCL digest's sums (its groups are joined)
JOINED_KEYS = (*TABLE_KEYS, NCCL_GROUPS)
PER_RANK = ("rank", "source", "nsys_version", "summary")  # what stays per rank, with the warnings and NCCL sums


def join(name: str, tables: list[Table | None]) -> Table | None:
    """The tables of one name, one after another. Kernel summaries are joined from those with rows: a rank's summary
    is read back as its slice of the joined one, and an empty table's columns (np.empty's float64) would otherwise
    widen every rank's integers."""
    if name == KERNEL_SUMMARY:
        filled = [table for table in tables if table is not None and len(table)]
        return concat(filled or tables[:1])
    return concat(tables)


@dataclass
class Block:
    """Ranks' results, per rank only what is per rank (PER_RANK, the warnings, NCCL_SUMS), and per JOINED_KEYS name
    one table over the ranks in their order with each rank's row count (`rows`; None where no rank had the table).
    `fold`: the block's folded NCCL durations (ncclfold.DurationFold.cells(), then shifts()) where it carries them.
    `one_rank_per_part`: whether each part it was taken from held one rank (else the merge numbers ranks 0..N-1)."""

    results: list[dict[str, Any]]
    tables: dict[str, Table | None]
    rows: dict[str, np.ndarray]
    fold: tuple | None = None
    one_rank_per_part: bool = True

    @classmethod
    def of_results(cls, results: list[dict[str, Any]]) -> Block:
        """The block of trace.analyze_file's per-rank results whose NCCL durations were folded (their digests' groups
        and sums are what the reduce adds)."""
        per_rank = []
        for result in results:
            own = {key: result[key] for key in PER_RANK}
            if "warnings" in result:
                own["warnings"] = result["warnings"]
            own[NCCL_SUMS] = result["nccl"].sums
            per_rank.append(own)
        named = {name: [result[name] for result in results] for name in TABLE_KEYS}
        named[NCCL_GROUPS] = [result["nccl"].groups for result in results]
        return cls(per_rank, {name: join(name, tables) for name, tables in named.items()},
                   {name: _row_counts(tables) for name, tables in named.items()})  # fmt: skip

    @classmethod
    def joined(cls, blocks: list[Block]) -> Block:
        """Blocks one after another (their folds are the caller's: a partial merge folds them into its own)."""
        results = [result for block in blocks for result in block.results]
        tables = {name: join(name, [block.tables.get(name) for block in blocks]) for name in JOINED_KEYS}
        rows = {name: np.concatenate([block.row_counts(name) for block in blocks] or [np.zeros(0, dtype=np.int64)])
                for name in JOINED_KEYS}  # fmt: skip
        return cls(results, tables, rows)

    def row_counts(self, name: str) -> np.ndarray:
        """Each rank's rows of one table (zeros where the block holds no such table)."""
        found = self.rows.get(name)
        return found if found is not None else np.zeros(len(self.results), dtype=np.int64)

    def take(self, first: int, count: int) -> Block:
        """Ranks first .. first+count-1 of the block, their tables sliced (the fold stays with the block)."""
        tables, rows = {}, {}
        for name, table in self.tables.items():
            counts = self.row_counts(name)
            start = int(counts[:first].sum())
            rows[name] = counts[first : first + count]
            stop = start + int(rows[name].sum())
            whole = table is not None and (start, stop) == (0, len(table))
            tables[name] = table if table is None or whole else table.take(slice(start, stop))
        return Block(self.results[first : first + count], tables, rows)


def _row_counts(tables: list[Table | None]) -> np.ndarray:
    return np.fromiter((len(table) if table is not None else 0 for table in tables), dtype=np.int64, count=len(tables))
