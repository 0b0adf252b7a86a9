"""Kernel tables of torch profiler traces, computed from the trace's GPU events themselves (nsys-like, exact).

HTA's kernel breakdown is not a per-launch table: beyond its top 10 kernels it re-aggregates per-kernel totals (so
'mean', 'min' and 'max' become statistics of totals: one "instance" per kernel, an "others" row), and its parser rounds
each event inwards to whole microseconds (sub-microsecond memsets get -1 us). Here every GPU event of a rank (kernel,
memcpy, memset) counts once with its own duration in ns: per name and rank, per name over the run, and per kind with
the kinds' overlap (HTA's labels: 'COMPUTATION overlapping COMMUNICATION'), each interval set merged exactly.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from nsyskit.analysis.compute import analyzers
from nsyskit.analysis.compute import intervals as iv
from nsyskit.analysis.compute.result import combine_kernel_summaries, concat, with_rank
from nsyskit.analysis.compute.table import Table

KINDS = ("COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER")  # HTA's kernel types, in its label order
EVENT_COLUMNS = ("rank", "name_id", "kind", "start_ns", "end_ns")


def events_table(rank: int, name_ids: np.ndarray, kinds: np.ndarray, start_us: np.ndarray, dur_us: np.ndarray) -> Table:
    """One rank's GPU events (Kineto's microsecond floats, ns resolution) as integer ns intervals."""
    start = np.rint(np.asarray(start_us, dtype=np.float64) * 1000).astype(np.int64)
    duration = np.rint(np.asarray(dur_us, dtype=np.float64) * 1000).astype(np.int64)
    return Table({"rank": np.full(len(start), rank, dtype=np.int64), "name_id": np.asarray(name_ids, dtype=np.int64),
                  "kind": np.asarray(kinds, dtype=object), "start_ns": start, "end_ns": start + duration})  # fmt: skip


def _kind_of(events: Table, names: Mapping[int, str]) -> dict[str, str]:
    return {names[int(i)]: kind for i, kind in zip(events["name_id"], events["kind"], strict=True)}


def rank_summary(events: Table, names: Mapping[int, str]) -> Table:
    """One rank's events per name, as nsys stats' kernel summary (time %, total, instances, avg, median, min, max,
    stddev in ns) with the kind after the name."""
    summary = analyzers.summary_by_name(events["name_id"], events["end_ns"] - events["start_ns"], names)
    # Equal totals by name: HTA's symbol ids (the tie order otherwise) differ from one process to the next.
    summary = summary.take(sorted(range(len(summary)), key=lambda i: (-summary["total_ns"][i], summary["name"][i])))
    kind_of = _kind_of(events, names)
    kinds = np.asarray([kind_of[n] for n in summary["name"]], dtype=object)
    return Table({"name": summary["name"], "kind": kinds, **{n: summary[n] for n in summary.names if n != "name"}})


def rank_kernels(summaries: Mapping[int, Table]) -> Table:
    """The per-rank summaries one after another, each with its rank (ranks in order, each by total time)."""
    return concat([with_rank(rank, summaries[rank]) for rank in sorted(summaries)])


def top_kernels(summaries: Mapping[int, Table]) -> Table:
    """Run-level table: per name total, instances, avg, min, max over all ranks' events, in how many ranks, and kind."""
    run = combine_kernel_summaries(dict(summaries))
    kind_of = {n: k for table in summaries.values() for n, k in zip(table["name"], table["kind"], strict=True)}
    columns = dict(run.columns)
    name = columns.pop("name")
    return Table({"name": name, "kind": np.asarray([kind_of[n] for n in name], dtype=object), **columns})


def kind_breakdown(events: Table) -> Table:
    """GPU time by kind over all ranks: each kind's events merged per rank, time where kinds overlap counted once
    under 'A overlapping B' (HTA's kernel-type breakdown, with exact ns instead of truncated microseconds)."""
    totals: dict[int, int] = {}
    for rank in np.unique(events["rank"]):
        times, steps = [], []
        for bit, kind in enumerate(KINDS):
            chosen = (events["rank"] == rank) & (events["kind"] == kind)
            start, end = iv.union(events["start_ns"][chosen], events["end_ns"][chosen])
            times += [start, end]
            steps += [np.full(len(start), 1 << bit), np.full(len(end), -(1 << bit))]
        time, step = np.concatenate(times), np.concatenate(steps)
        order = np.argsort(time, kind="stable")
        running, time = np.cumsum(step[order])[:-1], time[order]
        spans = np.diff(time)
        for mask in np.unique(running[(running > 0) & (spans > 0)]):
            totals[int(mask)] = totals.get(int(mask), 0) + int(spans[running == mask].sum())
    labels = [" overlapping ".join(k for bit, k in enumerate(KINDS) if mask & (1 << bit)) for mask in totals]
    total = np.asarray(list(totals.values()), dtype=np.int64)
    table = Table({"kind": np.asarray(labels, dtype=object), "total_ns": total,
                   "time_pct": total * 100.0 / (total.sum() or 1)})  # fmt: skip
    return table.sorted_by("total_ns") if len(table) else Table.empty(("kind", "total_ns", "time_pct"))
