"""The result of 'invoke analyze': named-column tables per run, JSON-ready and bounded (top N rows, a flag for more)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nsyskit.analysis.compute.kernelnames import short_names
from nsyskit.analysis.compute.nccldigest import SIZE_ORIGIN_SUMS, NcclRollup
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.read.records import factorize

JSON_ROWS = 100  # rows per table in analysis.json / --json; the count of the rest is in "more_rows"
TABLES = ("top_kernels", "breakdown", "memcpy", "nvtx", "nvtx_gpu", "steps", "nccl_sizes", "ranks", "counters",
          "counter_steps")  # fmt: skip
# every row: a diff reads them
UNBOUNDED = ("breakdown", "steps", "ranks", "memcpy", "top_kernels", "nccl_sizes", "counters")


@dataclass
class Analysis:
    """Everything 'invoke analyze' computes for a run, as named-column tables (JSON-ready via to_json)."""

    sources: dict[int, str]
    nsys_versions: dict[int, str]
    kernel_summaries: Mapping[int, Table] = field(default_factory=dict)  # rank -> its table (a merge's: RankTables)
    top_kernels: Table | None = None
    breakdown: Table | None = None
    memcpy: Table | None = None
    nvtx: Table | None = None
    nvtx_gpu: Table | None = None
    steps: Table | None = None
    nccl: NcclRollup | None = None  # the ranks' NCCL operations, added up exactly (no table of every operation)
    nccl_sizes: Table | None = None
    ranks: Table | None = None
    counters: Table | None = None  # the sampled counters' time-weighted stats per rank, device and metric
    counter_bins: Table | None = None  # their sums per time bin (the heat map), each rank's bins as it wrote them
    counter_steps: Table | None = None  # what each network counter moved per window step
    straggler_pct: float = 5.0  # the threshold the ranks table's straggler flags used (the findings quote it)
    evidence: Table | None = None  # every rank's evidence for the findings (compute.evidence): rank, rule, key, value
    warnings: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)  # the ranks left out and why: shown before anything else

    @property
    def has_gpu(self) -> bool:
        """Whether any rank recorded GPU activity."""
        return bool(self.breakdown is not None and len(self.breakdown))

    def to_json(self, rows: int = JSON_ROWS) -> dict[str, Any]:
        """The analysis as plain JSON data; tables that can grow with the trace keep their first `rows` rows."""
        more: dict[str, int] = {}

        def bounded(name: str, table: Table) -> list[dict[str, Any]]:
            if name in UNBOUNDED or len(table) <= rows:
                return table.to_json()
            more[name] = len(table) - rows
            return table.take(slice(0, rows)).to_json()

        tables = {name: bounded(name, getattr(self, name)) for name in TABLES if getattr(self, name) is not None}
        summaries = {str(rank): bounded(f"kernel_summary.{rank}", t) for rank, t in self.kernel_summaries.items()}
        return {
            "sources": {str(k): v for k, v in self.sources.items()},
            "nsys_versions": {str(k): v for k, v in self.nsys_versions.items()},
            # per rank, how many NCCL operations got their size from each source: 0 everywhere says the export
            # held no payload values (its warning names the fix)
            "nccl_sizes_from": {str(rank): {origin: sums.get(key, 0) for origin, key in SIZE_ORIGIN_SUMS.items()}
                                for rank, sums in (self.nccl.by_rank.items() if self.nccl is not None else ())},
            "kernel_summary": summaries,
            **tables,
            "more_rows": more,
            "warnings": list(self.warnings),
            "incomplete": list(self.incomplete),
        }


def with_rank(rank: int, table: Table) -> Table:
    """The table with a leading rank column."""
    return Table({"rank": np.full(len(table), rank, dtype=np.int64), **table.columns})


def concat(tables: list[Table | None]) -> Table | None:
    """Tables with the same columns, one after another (None when there are none)."""
    tables = [t for t in tables if t is not None]
    if not tables:
        return None
    names = tables[0].names
    return Table(
        {n: np.concatenate([t[n] for t in tables]) if any(len(t) for t in tables) else tables[0][n] for n in names}
    )


class RankTables(Mapping[int, Table]):
    """Each rank's table as its slice of one table of every rank's rows, one rank after another: a merge of thousands
    of ranks holds one table, not one per rank, and a rank's is cut out when read."""

    def __init__(self, joined: Table | None, ranks: Sequence[int], rows: Sequence[int]) -> None:
        self.joined = joined
        stops = np.cumsum(np.asarray(rows, dtype=np.int64)).tolist()
        self.spans = dict(zip(ranks, zip([0, *stops[:-1]], stops, strict=True), strict=True))

    def __getitem__(self, rank: int) -> Table:
        start, stop = self.spans[rank]
        return self.joined.take(slice(start, stop))

    def __iter__(self) -> Iterator[int]:
        return iter(self.spans)

    def __len__(self) -> int:
        return len(self.spans)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


def combine_kernel_summaries(summaries: Mapping[int, Table] | Table) -> Table:
    """Run-level kernel table: per name total, instances, average, min, max over all ranks, and in how many ranks;
    from each rank's table, or from one table of every rank's rows (a rank's names once each)."""
    tables = [summaries] if isinstance(summaries, Table) else summaries.values()
    parts = [t for t in tables if len(t)]
    columns = ("name", "short_name", "time_pct", "total_ns", "instances", "avg_ns", "min_ns", "max_ns", "ranks")
    if not parts:
        return Table({c: np.empty(0, dtype=object if c == "name" else np.int64) for c in columns})
    # np.unique's sorted names and each row's index among them, from a hash pass over the rows and a sort of the
    # distinct names only (a sort of every rank's rows of strings took 0.45 s at 4,096 ranks)
    distinct, first_seen = factorize(list(map(str, np.concatenate([t["name"] for t in parts]).tolist())))
    order = sorted(range(len(distinct)), key=distinct.__getitem__)
    place = np.empty(len(order), dtype=np.int64)
    place[order] = np.arange(len(order))
    unique, inverse = np.asarray([distinct[i] for i in order]), place[first_seen]
    n = len(unique)

    def column(name: str) -> np.ndarray:
        return np.concatenate([t[name] for t in parts])

    total = np.bincount(inverse, weights=column("total_ns"), minlength=n).astype(np.int64)
    instances = np.bincount(inverse, weights=column("instances"), minlength=n).astype(np.int64)
    low = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    high = np.zeros(n, dtype=np.int64)
    np.minimum.at(low, inverse, column("min_ns").astype(np.int64))
    np.maximum.at(high, inverse, column("max_ns").astype(np.int64))
    grand = total.sum() or 1
    table = Table(
        {
            "name": unique.astype(object), "short_name": short_names(unique), "time_pct": total * 100.0 / grand,
            "total_ns": total,
            "instances": instances, "avg_ns": total / np.maximum(instances, 1), "min_ns": low, "max_ns": high,
            "ranks": np.bincount(inverse, minlength=n).astype(np.int64),
        }
    )  # fmt: skip
    return table.sorted_by("total_ns")
