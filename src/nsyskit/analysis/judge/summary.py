"""What every output of 'invoke analyze' opens with: the run header, the findings, the profiled window's metrics."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.metrics import RunView, run_metrics, view_of
from nsyskit.analysis.judge import findings as rules
from nsyskit.analysis.read.runinfo import RunHeader, run_header


@dataclass
class Summary:
    """The findings and metrics of one analysis (computed once, shared by the terminal, HTML and JSON)."""

    view: RunView
    metrics: dict[str, float]
    findings: list[rules.Finding]
    header: RunHeader


def summarize(analysis, folder: Path, inputs: Mapping[str, Any] | None = None) -> Summary:
    """Findings, metrics and header of an Analysis whose outputs go to `folder` (`inputs`: RunView.inputs)."""
    view = view_of(analysis, inputs)
    return Summary(view, run_metrics(view), rules.find(view), run_header(analysis, Path(folder), view.window_source))


def stake_text(finding: rules.Finding) -> str:
    """'~12.3 ms/step at stake' (the estimate of what a fix gives back), or '' when the rule makes none."""
    stake = finding.at_stake_ns
    if not math.isfinite(stake) or stake <= 0:
        return ""
    return f"~{units.duration(stake)}/step at stake"


def print_findings(summary: Summary, console) -> None:
    """The findings (or that none fired) and the window's metrics: the first thing on the terminal."""
    from rich.markup import escape

    header = summary.header
    for line in header.incomplete:  # before any number: this analysis is not of the whole run
        console.print(f"[bold red]incomplete[/bold red] {escape(line)}")
    console.print(f"[bold]Findings[/bold] ({header.run_id}, {header.layout}, window: {summary.view.window_source})")
    for finding in summary.findings:
        color = "yellow" if finding.severity == "warning" else "cyan"
        stake = stake_text(finding)
        console.print(f"  [{color}]{finding.severity}[/{color}] {escape(finding.title)}"
                      f"{'  [bold]' + stake + '[/bold]' if stake else ''}  [dim]({finding.rule})[/dim]")  # fmt: skip
    if not summary.findings:
        console.print("  [green]no rule fired[/green]")
    shown = [f"{name} {units.metric(name, v)}" for name, v in summary.metrics.items() if not math.isnan(v)]
    console.print("  [dim]" + ", ".join(shown) + "[/dim]")
