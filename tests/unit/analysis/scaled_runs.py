"""Test helper: a merged analysis of thousands of ranks from one real export's, as the merge of copies of its part
would give it (every per-rank table repeated under each rank), with one rank slowed: what the presenter reads at
4,096 and 16,384 ranks, made in seconds instead of mapping and merging that many reports."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
from counter_fixtures import EFA_FIELDS, Counters, add_counters
from real_exports import decompress

from nsyskit.analysis import run_analysis
from nsyskit.analysis.compute.ranks import over_the_others, stragglers
from nsyskit.analysis.compute.result import Analysis
from nsyskit.analysis.compute.table import Table

EXPORT = "h100_gpt2_ddp_nsys2025.3.1.sqlite"  # the repository's own real 2-GPU DDP export: steps, NCCL, memcpys
PER_RANK = ("breakdown", "memcpy", "steps", "ranks", "counters", "counter_bins", "counter_steps", "evidence")


def one_rank_with_counters(folder: Path, exports: Path) -> Analysis:
    """The analysis of the real export with GPU and EFA counters sampled over its kernels' span (counter_fixtures:
    in the documented schema; no real export holds EFA samples), as one rank of a run folder."""
    run = folder / "one"
    run.mkdir(parents=True, exist_ok=True)
    source = run / "rank_0.sqlite"
    source.write_bytes(decompress(EXPORT, exports).read_bytes())
    with sqlite3.connect(source) as con:
        low, high = con.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    times = [low + (high - low) * i // 40 for i in range(41)]
    gpu = {"SMs Active [Throughput %]": {0: [(t, 60 + i % 30) for i, t in enumerate(times)]}}
    efa = {d: [(t, {EFA_FIELDS[0]: 1e9 * (1 + d)}) for t in times] for d in range(2)}
    add_counters(source, Counters(gpu=gpu, efa=efa))
    analysis, _ = run_analysis([run], write=False)
    return analysis


def widened(one: Analysis, ranks: int, per_node: int = 8, hosts: bool = True, slow_rank: int | None = None,
            slower: float = 1.5) -> Analysis:  # fmt: skip
    """`one` (a one-rank analysis) as the merged analysis of `ranks` ranks: each per-rank table's rows repeated under
    every rank; hosts named 'gpu-node-NNNN' with `per_node` ranks each (or unknown: ''); `slow_rank`'s steps
    `slower` times as long, the straggler flags computed again as the merge computes them."""
    tables = {}
    for name in PER_RANK:
        table = getattr(one, name)
        if table is None or not len(table):
            tables[name] = table
            continue
        columns = {column: np.tile(values, ranks) for column, values in table.columns.items()}
        columns["rank"] = np.repeat(np.arange(ranks, dtype=np.int64), len(table))
        tables[name] = Table(columns, table.units)
    steps, rows = tables["steps"], tables["ranks"]
    if slow_rank is not None:
        steps.columns["duration_ns"] = steps["duration_ns"] * np.where(steps["rank"] == slow_rank, slower, 1.0)
        for column in ("step_mean_ns", "step_median_ns"):
            rows.columns[column] = rows[column] * np.where(rows["rank"] == slow_rank, slower, 1.0)
    rows.columns["host"] = np.array([f"gpu-node-{r // per_node:04d}" if hosts else "" for r in range(ranks)], dtype=object)
    rows.columns["deviation_pct"] = over_the_others(rows["step_mean_ns"])
    rows.columns["straggler"] = stragglers(rows["step_mean_ns"], rows["deviation_pct"], one.straggler_pct)
    folder = Path(one.sources[0]).parent
    sources = {rank: str(folder / f"rank_{rank}.sqlite") for rank in range(ranks)}
    return replace(one, sources=sources, nsys_versions=dict.fromkeys(range(ranks), one.nsys_versions[0]), **tables)
