"""Compare two runs' profiled windows (baseline A, candidate B) metric by metric, gate regressions, write Markdown.

The sides are loaded by analysis.rundiff (the facade); this module only compares their metrics. Durations regress by percent slower; shares (already percentages:
exposed_comm, comm_share, gpu_idle, step_cv, small_msg_comm) by percentage points more.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.kernelnames import short_names
from nsyskit.analysis.compute.metrics import METRICS
from nsyskit.analysis.compute.table import Table
from nsyskit.errors import AnalysisError

DURATION_METRICS = ("step_time", "step_time_slowest_rank", "nccl_time_per_step")
ANALYSIS_JSON = "analysis.json"
MIN_SCHEMA = 2
CHANGES_TOP = 10  # kernels and NCCL operations the terminal and the Markdown show, by the size of their change


@dataclass(frozen=True)
class Side:
    """One side of a diff: what was given, its window metrics, and (count, total ns) per kernel name and per NCCL
    operation (op, size bucket, origin) over all ranks (empty when the side's analysis.json predates them)."""

    label: str
    metrics: dict[str, float]
    kernels: dict[tuple[str, ...], tuple[int, int]] = field(default_factory=dict)
    nccl: dict[tuple[str, ...], tuple[int, int]] = field(default_factory=dict)


def totals(rows: list[dict], keys: tuple[str, ...], count: str) -> dict[tuple[str, ...], tuple[int, int]]:
    """(count, total ns) per key from table rows (top_kernels: name; nccl_sizes: op, bucket, origin)."""
    out: dict[tuple[str, ...], tuple[int, int]] = {}
    for row in rows:
        key = tuple(str(row[k]) for k in keys)
        before = out.get(key, (0, 0))
        out[key] = (before[0] + int(row[count]), before[1] + int(row["total_ns"]))
    return out


KERNEL_KEYS, NCCL_KEYS = ("name",), ("op", "bucket", "origin")


def changes(a: dict, b: dict, keys: tuple[str, ...], top: int | None = None) -> Table:
    """Every entry of A or B (the `top` whose total time changed most, when given), largest absolute change first
    (one missing on a side counts 0 there): count, total and average per side, the change in ns and in percent of A."""
    names = sorted(set(a) | set(b))
    rows = []
    for key in names:
        (count_a, total_a), (count_b, total_b) = a.get(key, (0, 0)), b.get(key, (0, 0))
        rows.append((abs(total_b - total_a), key, count_a, count_b, total_a, total_b))
    rows.sort(key=lambda r: (-r[0], r[1]))
    rows = rows if top is None else rows[:top]

    def average(total: int, count: int) -> float:
        return total / count if count else float("nan")

    columns: dict[str, list] = {k: [r[1][i] for r in rows] for i, k in enumerate(keys)}
    columns |= {
        "count_a": [r[2] for r in rows], "count_b": [r[3] for r in rows],
        "total_a_ns": [r[4] for r in rows], "total_b_ns": [r[5] for r in rows],
        "avg_a_ns": [average(r[4], r[2]) for r in rows], "avg_b_ns": [average(r[5], r[3]) for r in rows],
        "change_ns": [r[5] - r[4] for r in rows],
        "change_pct": [(r[5] - r[4]) * 100.0 / r[4] if r[4] else float("nan") for r in rows],
    }  # fmt: skip
    return Table({k: np.asarray(v, dtype=object if k in keys else None) for k, v in columns.items()})


def parse_thresholds(text: str | None) -> dict[str, float]:
    """'step_time=5,exposed_comm=10' -> {'step_time': 5.0, 'exposed_comm': 10.0}; names checked against METRICS."""
    found: dict[str, float] = {}
    for part in (p.strip() for p in (text or "").split(",")):
        if not part:
            continue
        name, _, value = part.partition("=")
        name = name.strip()
        if name not in METRICS:
            raise AnalysisError(f"--fail-on {part}", f"unknown metric '{name}'", f"use one of: {', '.join(METRICS)}")
        try:
            found[name] = float(value)
        except ValueError:
            raise AnalysisError(
                f"--fail-on {part}", f"'{value}' is not a number", f"write {name}=PERCENT, e.g. {name}=5"
            ) from None
    return found


def change(name: str, a: float, b: float) -> float:
    """B against A: percent change for durations, percentage points for shares (NaN when either is missing)."""
    if math.isnan(a) or math.isnan(b):
        return float("nan")
    if name in DURATION_METRICS:
        return (b - a) * 100.0 / a if a else float("nan")
    return b - a


def compare(a: Side, b: Side, thresholds: dict[str, float] | None = None) -> Table:
    """Per metric: A, B, change, the gate's threshold and whether B regressed past it (higher is worse for all)."""
    thresholds = thresholds or {}
    names = list(METRICS)
    changes = np.asarray([change(n, a.metrics[n], b.metrics[n]) for n in names], dtype=np.float64)
    limits = np.asarray([thresholds.get(n, np.nan) for n in names], dtype=np.float64)
    regression = np.asarray(
        [not np.isnan(lim) and not np.isnan(c) and c > lim for c, lim in zip(changes, limits, strict=True)]
    )
    return Table(
        {
            "metric": np.asarray(names, dtype=object),
            "a": np.asarray([a.metrics[n] for n in names], dtype=np.float64),
            "b": np.asarray([b.metrics[n] for n in names], dtype=np.float64),
            "change": changes,
            "threshold": limits,
            "regression": regression,
        }
    )


def _value(name: str, value: float) -> str:
    return units.duration(value) if name in DURATION_METRICS else units.percent(value)


def _change(name: str, value: float) -> str:
    if np.isnan(value):
        return "-"
    value = 0.0 if abs(value) < 0.05 else value  # no '-0.0'
    return f"{value:+.1f}%" if name in DURATION_METRICS else f"{value:+.1f} pp"


def regressions(table: Table) -> list[str]:
    """The metrics that regressed past their thresholds."""
    return [row["metric"] for row in table.rows() if row["regression"]]


def markdown(table: Table, a: Side, b: Side) -> str:
    """A Markdown summary of the diff (for a CI job summary): verdict, then one row per metric."""
    failed = regressions(table)
    verdict = f"**regression**: {', '.join(failed)}" if failed else "no regression past the thresholds"
    lines = [
        "## nsyskit diff (profiled window)", "", f"A = `{a.label}`  \nB = `{b.label}`", "", verdict, "",
        "| metric | A | B | change | fail above | |", "|---|---:|---:|---:|---:|---|",
    ]  # fmt: skip
    for row in table.rows():
        name = row["metric"]
        limit = "-" if row["threshold"] is None else _change(name, row["threshold"]).lstrip("+")
        lines.append(
            f"| {name} | {_value(name, row['a'])} | {_value(name, row['b'])} | "
            f"{_change(name, float('nan') if row['change'] is None else row['change'])} | {limit} | "
            f"{'REGRESSION' if row['regression'] else ''} |"
        )
    return "\n".join(lines) + "\n"


def changes_markdown(title: str, table: Table, keys: tuple[str, ...]) -> str:
    """A Markdown table of `changes` rows: key columns, count, total and average per side, change."""
    lines = ["", f"### {title} whose time changed most", "",
             f"| {' | '.join(keys)} | count A | count B | total A | total B | avg A | avg B | change |",
             "|" + "---|" * len(keys) + "---:|" * 7]  # fmt: skip
    for row in table.rows():
        cells = [str(row[k]).replace("|", "\\|") for k in keys]
        cells += [f"{row['count_a']:,}", f"{row['count_b']:,}", units.duration(row["total_a_ns"]),
                  units.duration(row["total_b_ns"]), units.duration(row["avg_a_ns"]), units.duration(row["avg_b_ns"]),
                  change_text(row["change_ns"], row["change_pct"])]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def change_text(change_ns: float, change_pct: float | None) -> str:
    """'+1.20 ms (+12.5%)': a time change and its share of A ('new' when A had none: a share of None or NaN, as a
    table row gives a kernel that only B ran)."""
    sign = "+" if change_ns > 0 else ""
    missing = change_pct is None or math.isnan(change_pct)
    share = "new" if missing else f"{0.0 if abs(change_pct) < 0.05 else change_pct:+.1f}%"
    return f"{sign}{units.duration(change_ns)} ({share})"


def write_step_summary(text: str | Callable[[], str]) -> Path | None:
    """Append `text` to $GITHUB_STEP_SUMMARY when set (GitHub Actions shows it on the run page); the file, or None.

    `text` may be a function that builds it: it is called only when the summary is written.
    """
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as out:
        out.write(text() if callable(text) else text)
    return Path(target)


@dataclass
class DiffResult:
    """A finished diff: both sides, the per-metric table and the Markdown summary."""

    a: Side
    b: Side
    table: Table

    @property
    def all_kernels(self) -> Table:
        """Every kernel of either side, largest change of total time first (see changes), with its short name."""
        table = changes(self.a.kernels, self.b.kernels, KERNEL_KEYS)
        columns = dict(table.columns)
        name = columns.pop("name")
        return Table({"name": name, "short_name": short_names(name), **columns})

    @property
    def kernels(self) -> Table:
        """The CHANGES_TOP kernels whose total time changed most (what a person reads)."""
        return self.all_kernels.take(slice(0, CHANGES_TOP))

    @property
    def all_nccl(self) -> Table:
        """Every NCCL operation (op, size bucket, origin) of either side, largest change of total time first."""
        return changes(self.a.nccl, self.b.nccl, NCCL_KEYS)

    @property
    def nccl(self) -> Table:
        """The CHANGES_TOP NCCL operations whose total time changed most (what a person reads)."""
        return self.all_nccl.take(slice(0, CHANGES_TOP))

    @property
    def regressions(self) -> list[str]:
        """The metrics past their thresholds."""
        return regressions(self.table)

    def markdown(self) -> str:
        """The Markdown summary: the metrics, then the kernels and NCCL operations whose time changed most."""
        text = markdown(self.table, self.a, self.b)
        for title, table, keys in (("Kernels", self.kernels, ("short_name",)), ("NCCL operations", self.nccl, NCCL_KEYS)):
            if len(table):
                text += changes_markdown(title, table, keys)
        return text

    def to_json(self) -> dict:
        """The diff as JSON data: every kernel's and NCCL operation's change (a CI gate reads them all)."""
        return {"a": self.a.label, "b": self.b.label, "metrics": self.table.to_json(), "regressions": self.regressions,
                "kernels": self.all_kernels.to_json(), "nccl": self.all_nccl.to_json()}  # fmt: skip

    def rows(self) -> list[list[str]]:
        """The table as formatted cells: metric, A, B, change, threshold, verdict."""
        out = []
        for row in self.table.rows():
            name = row["metric"]
            limit = "-" if row["threshold"] is None else _change(name, row["threshold"]).lstrip("+")
            change_value = float("nan") if row["change"] is None else row["change"]
            out.append([name, _value(name, row["a"]), _value(name, row["b"]), _change(name, change_value), limit,
                        "REGRESSION" if row["regression"] else ""])  # fmt: skip
        return out
