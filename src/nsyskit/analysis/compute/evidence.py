"""Each rank's evidence for the findings: facts the map measures on one rank, merged into one long table.

The findings' rules that need more than the run-level tables (a rank's CUDA API calls, its kernels' gaps, its
counters) do not read a rank's trace at the merge: each rank's map runs the EXTRACTORS, pure functions of that
rank's tables (RankInputs) giving (rule, key, value) rows, and the part carries them as a table with columns
rank, rule, key, value. The merge concatenates them (like every per-rank table), so a rule sees every rank's
numbers at once: `pivot(table, rule)` gives one row per rank with a column per key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nsyskit.analysis.compute.table import Table

COLUMNS = ("rank", "rule", "key", "value")


@dataclass
class RankInputs:
    """What a rank's map has read and computed, as the extractors see it (any of them may be empty or None)."""

    rank: int
    kernels: Any = None  # records.Intervals of the rank's kernels (start, end, device, stream, name ids ...)
    kernel_names: dict[int, str] = field(default_factory=dict)
    nvtx: Any = None  # records.NvtxRanges
    nvtx_labels: tuple[list[str], np.ndarray] | None = None  # (distinct labels, label of each range)
    launches: Any = None  # the CUDA API calls that launched the kernels (read.launchread)
    memcpys: Any = None
    memsets: Any = None
    steps: Table | None = None  # the rank's steps inside the profiled window (rank, step, start_ns, duration_ns)
    breakdown: Table | None = None  # the rank's per-GPU compute/communication/idle (analyzers.gpu_breakdown)
    nccl_operations: Table | None = None  # the rank's NCCL operations (compute.nccl)
    reader: Any = None  # the rank's read.reader.ExportReader, for tables only some rules read (read them once, lazily)
    pid: int | None = None  # the process of the file this rank is (None: the whole file)
    busy: Any = None  # (start, end) union of the rank's GPU activities when the map computed it (diagnoses.gpu_busy)


Extractor = Callable[[RankInputs], Iterable[tuple[str, str, float]]]
EXTRACTORS: list[Extractor] = []  # rule modules append theirs (see compute/diagnoses.py and the like)


def rank_evidence(inputs: RankInputs, extractors: Iterable[Extractor] | None = None) -> Table:
    """The evidence rows of one rank: every extractor's (rule, key, value), with the rank."""
    rows = [row for extract in (EXTRACTORS if extractors is None else extractors) for row in extract(inputs)]
    return Table({
        "rank": np.full(len(rows), inputs.rank, dtype=np.int64),
        "rule": np.asarray([r[0] for r in rows], dtype=object),
        "key": np.asarray([r[1] for r in rows], dtype=object),
        "value": np.asarray([float(r[2]) for r in rows], dtype=np.float64),
    })  # fmt: skip


def empty() -> Table:
    """An evidence table with no rows."""
    return rank_evidence(RankInputs(rank=0), ())


def pivot(table: Table | None, rule: str) -> Table:
    """One rule's evidence: a row per rank that has any (rank order), a column per key (NaN where a rank lacks it)."""
    if table is None or not len(table):
        return Table({"rank": np.empty(0, dtype=np.int64)})
    mine = table.take(table["rule"] == rule)
    ranks = np.unique(mine["rank"])
    keys = list(dict.fromkeys(mine["key"].tolist()))
    columns: dict[str, np.ndarray] = {"rank": ranks}
    where = np.searchsorted(ranks, mine["rank"])
    for key in keys:
        column = np.full(len(ranks), np.nan)
        rows = mine["key"] == key
        column[where[rows]] = mine["value"][rows]
        columns[key] = column
    return Table(columns)
