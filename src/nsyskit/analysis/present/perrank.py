"""Per-rank tables at scale: the ranks that matter (slowest, most idle, most exposed communication, largest copies),
one line of the spread across ranks (min / median / p95 / max), and how many more rows analysis.json holds."""

from __future__ import annotations

import numpy as np

from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.present.terminal import fmt, header

# Per table: (column, 'high' or 'low', why a rank is shown) in the order a reader asks; the first is the spread's.
MATTERS = {
    "ranks": [("step_mean_ns", "high", "slowest"), ("comm_share_pct", "high", "most communication"),
              ("gpu_busy_pct", "low", "most idle")],
    "breakdown": [("idle_pct", "high", "most idle"), ("exposed_comm_pct", "high", "most exposed communication")],
    "memcpy": [("bytes", "high", "largest copies"), ("bandwidth_gbps", "low", "slowest copies")],
    "nodes": [("step_mean_max_ns", "high", "slowest"), ("idle_max_pct", "high", "most idle")],
}  # fmt: skip


def ranks_that_matter(table: Table, kind: str, limit: int) -> tuple[Table, str]:
    """At most `limit` rows of a per-rank table: stragglers first, then the extremes of each MATTERS column in turn,
    in rank order; with the why ('slowest, most idle') to print. All rows when they fit."""
    if len(table) <= limit:
        return table, ""
    chosen: list[int] = list(np.flatnonzero(table["straggler"])) if "straggler" in table else []
    criteria = [c for c in MATTERS[kind] if c[0] in table]
    reasons = ["stragglers"] if chosen else []
    ranked = []
    for column, direction, why in criteria:
        values = np.asarray(table[column], dtype=np.float64)
        order = np.argsort(-values if direction == "high" else values, kind="stable")
        ranked.append([int(i) for i in order if not np.isnan(values[i])])
        reasons.append(why)
    for position in range(len(table)):  # round robin over the criteria: each gets its worst rows in
        for order in ranked:
            if len(dict.fromkeys(chosen)) >= limit:
                break
            if position < len(order):
                chosen.append(order[position])
    rows = sorted(dict.fromkeys(chosen))[:limit]
    return table.take(np.asarray(rows, dtype=np.int64)), ", ".join(reasons)


def spread_line(table: Table, kind: str) -> str:
    """'step mean across 512 ranks: 21.9 ms min, 22.8 ms median, 23.6 ms p95, 24.1 ms max' for the table's key
    columns ('' when there is nothing to spread)."""
    parts = []
    for column, _direction, _why in MATTERS[kind]:
        if column not in table:
            continue
        values = np.asarray(table[column], dtype=np.float64)
        values = values[~np.isnan(values)]
        if not len(values):
            continue
        shown = [fmt(float(v), column) for v in np.percentile(values, [0, 50, 95, 100])]
        parts.append(f"{header(column)} {shown[0]} / {shown[1]} / {shown[2]} / {shown[3]}")
    count = len(np.unique(table["rank"])) if "rank" in table else len(table)
    what = "nodes" if kind == "nodes" else "ranks"
    return f"across {count:,} {what} (min / median / p95 / max): " + "; ".join(parts) if parts else ""


def more_note(table: Table, shown: Table, why: str) -> str:
    """'… 1,014 more rows in analysis.json (shown: slowest, most idle)'."""
    left = len(table) - len(shown)
    return f"{left:,} more rows in analysis.json (shown: {why})" if left > 0 else ""

