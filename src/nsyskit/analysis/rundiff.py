"""Diff two runs (the facade of --diff): load each side, analyzing its reports when needed, compare and gate them.

Either side is a run folder (its analysis.json when 'invoke analyze' wrote one, else its reports, analyzed now),
an analysis.json file, or report files.
"""

from __future__ import annotations

import json
from pathlib import Path

from nsyskit.analysis.compute.metrics import METRICS, run_metrics, view_of
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.judge.diff import (
    ANALYSIS_JSON,
    KERNEL_KEYS,
    MIN_SCHEMA,
    NCCL_KEYS,
    DiffResult,
    Side,
    compare,
    parse_thresholds,
    totals,
    write_step_summary,
)
from nsyskit.analysis.trace import analyze_run
from nsyskit.errors import AnalysisError


def side_from_json(label: str, path: Path) -> Side | None:
    """A diff side from an analysis.json: its metrics, kernels and NCCL operations; None when it predates metrics."""
    metrics = metrics_from_json(path)
    if metrics is None:
        return None
    data = json.loads(path.read_text())
    kernels = totals(data.get("top_kernels") or [], KERNEL_KEYS, "instances")
    nccl = totals(data.get("nccl_sizes") or [], NCCL_KEYS, "count")
    return Side(label, metrics, kernels, nccl)


def side_from_analysis(label: str, analysis) -> Side:
    """A diff side from a fresh analysis of the reports."""
    kernels = totals(list(analysis.top_kernels.rows()), KERNEL_KEYS, "instances")
    nccl = totals(list(analysis.nccl_sizes.rows()) if analysis.nccl_sizes is not None else [], NCCL_KEYS, "count")
    return Side(label, run_metrics(view_of(analysis)), kernels, nccl)


def metrics_from_json(path: Path) -> dict[str, float] | None:
    """The metrics of an analysis.json, None when it predates them (schema 1)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise AnalysisError(
            path, f"not readable as JSON ({exc})", "pass a run folder or the analysis.json that 'invoke analyze' wrote"
        ) from None
    if (
        not isinstance(data, dict)
        or int(data.get("schema", 1)) < MIN_SCHEMA
        or not isinstance(data.get("metrics"), dict)
    ):
        return None
    return {
        name: float("nan") if data["metrics"].get(name) is None else float(data["metrics"][name]) for name in METRICS
    }


def load_side(paths: list[str]) -> Side:
    """A diff side from run folders, report files or an analysis.json (analyzing the reports when needed)."""
    label = ",".join(paths)
    if len(paths) == 1:
        path = Path(paths[0])
        candidate = path / ANALYSIS_JSON if path.is_dir() else path
        if candidate.name.endswith(".json"):
            if not candidate.exists() and not path.is_dir():
                raise AnalysisError(path, "no such file", "pass a run folder or an analysis.json")
            side = side_from_json(label, candidate) if candidate.exists() else None
            if side is not None:
                return side
            if not path.is_dir():
                raise AnalysisError(
                    path, "has no window metrics (written by an older nsyskit)", "run 'invoke analyze' on the run again"
                )
    return side_from_analysis(label, analyze_run(paths))


def run_diff(
    baseline: list[str], candidate: list[str], fail_on: str | None = None, fail_on_regression: float | None = None
) -> DiffResult:
    """Diff two runs' windows with the gates of --fail-on (and --fail-on-regression PCT as step_time=PCT).

    The Markdown summary is built and appended to $GITHUB_STEP_SUMMARY only when that is set.
    """
    thresholds = parse_thresholds(fail_on)
    if fail_on_regression is not None:
        thresholds.setdefault("step_time", float(fail_on_regression))
    result = DiffResult(load_side(baseline), load_side(candidate), Table({}))
    result.table = compare(result.a, result.b, thresholds)
    write_step_summary(result.markdown)
    return result
