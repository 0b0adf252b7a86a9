"""Compare two runs' profiled windows (baseline A, candidate B) metric by metric, gate regressions, write Markdown.

The sides are loaded by analysis.rundiff (the facade); this module only compares their metrics. Durations regress by percent slower; shares (already percentages:
exposed_comm, comm_share, gpu_idle, step_cv, small_msg_comm) by percentage points more.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.metrics import METRICS
from nsyskit.analysis.compute.table import Table
from nsyskit.errors import AnalysisError

DURATION_METRICS = ("step_time", "step_time_slowest_rank", "nccl_time_per_step")
ANALYSIS_JSON = "analysis.json"
MIN_SCHEMA = 2


@dataclass(frozen=True)
class Side:
    """One side of a diff: what was given, and its window metrics."""

    label: str
    metrics: dict[str, float]


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


def write_step_summary(text: str) -> Path | None:
    """Append `text` to $GITHUB_STEP_SUMMARY when set (GitHub Actions shows it on the run page); the file, or None."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as out:
        out.write(text)
    return Path(target)


@dataclass
class DiffResult:
    """A finished diff: both sides, the per-metric table and the Markdown summary."""

    a: Side
    b: Side
    table: Table

    @property
    def regressions(self) -> list[str]:
        """The metrics past their thresholds."""
        return regressions(self.table)

    def markdown(self) -> str:
        """The Markdown summary."""
        return markdown(self.table, self.a, self.b)

    def to_json(self) -> dict:
        """The diff as JSON data."""
        return {"a": self.a.label, "b": self.b.label, "metrics": self.table.to_json(), "regressions": self.regressions}

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
