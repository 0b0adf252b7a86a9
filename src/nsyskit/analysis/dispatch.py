"""'invoke analyze' for runs of the other profilers (PROFILER=ncu, torch): which one a run used, its tables, its report.

The tables are shown with the nsys analysis' own renderers (rich tables, report.html tables, analysis.json), so
the three profilers' results read the same way; nsys runs keep their own path (analysis.trace).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.present.terminal import rich_table
from nsyskit.analysis.read.runinfo import run_record

if TYPE_CHECKING:  # rich, and report.py's matplotlib, only when tables are printed or a report is written
    from rich.console import Console

NSYS_SUFFIXES = (".nsys-rep", ".qdrep", ".sqlite", ".qdstrm")


def recorded_profiler(folder: Path) -> str | None:
    """The PROFILER a run folder's run.json recorded, if any."""
    record = run_record(folder)
    return (record.profiler or None) if record else None


def profiler_of(paths: list[str | Path]) -> str:
    """nsys, ncu or torch: what left the reports under `paths` (nsys when its reports are there), else what the
    run folder's run.json says (an ncu run on CPU leaves no report), else nsys."""
    names: list[str] = []
    for item in map(Path, paths):
        names += [p.name for p in item.iterdir()] if item.is_dir() else [item.name]
        recorded = recorded_profiler(item) if item.is_dir() else None
        if recorded in ("ncu", "torch") and not any(n.endswith(NSYS_SUFFIXES) for n in names):
            return recorded
    if any(name.endswith(NSYS_SUFFIXES) for name in names):
        return "nsys"
    from nsyskit.analysis.profilers import (
        ncu,  # here: an nsys run (the usual one) needs neither
        torchprof,
    )

    if any(name.endswith(ncu.NCU_SUFFIX) for name in names):
        return "ncu"
    if any(name.endswith(torchprof.TRACE_SUFFIXES) for name in names):
        return "torch"
    return "nsys"  # its discovery names what is missing


@dataclass
class ProfilerAnalysis:
    """A non-nsys analysis as titled tables (shown in this order), the sources by rank and notes."""

    profiler: str
    sources: dict[int, str]
    tables: dict[str, tuple[str, Table | None, list[str] | None]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    figures: list[tuple[str, str, Table | None]] = field(default_factory=list)  # (png name, title, table plotted)

    def to_json(self) -> dict[str, Any]:
        """The analysis as plain JSON data: the tables by name, as the nsys analysis writes them."""
        return self.data or {
            "profiler": self.profiler, "sources": {str(k): v for k, v in self.sources.items()},
            **{name: table.to_json() for name, (_t, table, _c) in self.tables.items() if table is not None},
            "notes": list(self.notes),
        }  # fmt: skip


def ncu_analysis(paths: list[str | Path]) -> ProfilerAnalysis:
    """Per kernel and per launch Nsight Compute tables of a run's .ncu-rep reports."""
    from nsyskit.analysis.profilers import ncu

    launches, kernels, sources, notes = ncu.analyze_reports(paths)
    shown = ["name", "launches", "duration_ns", "sm_throughput_pct", "memory_throughput_pct",
             "achieved_occupancy_pct", "achieved_gflops", "peak_gflops", "of_peak_flops_pct", "intensity_flop_per_byte"]  # fmt: skip
    return ProfilerAnalysis("ncu", sources, {
        "kernels": ("Kernels (Nsight Compute, mean per launch, all ranks)", kernels, shown),
        "launches": ("Profiled launches per rank", launches, None),
    }, notes, figures=[("top_kernels.png", "Top kernels (profiled launches)", kernels)])  # fmt: skip


def torch_analysis(paths: list[str | Path], straggler_pct: float = 5.0) -> ProfilerAnalysis:
    """The tables of a run's torch profiler traces (HTA's breakdowns, kernel tables from the traces' GPU events)."""
    from nsyskit.analysis.profilers import torchprof

    result = torchprof.analyze_traces(paths, straggler_pct)
    titles = {
        "temporal_breakdown": "Temporal breakdown per rank (HTA: % of the GPU kernels' span)",
        "comm_comp_overlap": "Communication overlapped by computation per rank (HTA)",
        "idle_time": "GPU idle time per rank and stream, by cause (HTA)",
        "kernel_types": "GPU time by kernel type, all ranks (kinds as HTA's)",
        "top_kernels": "Top kernels, all ranks (every launch in the traces)",
        "rank_kernels": "Kernels per rank (every launch in the traces)",
        "ranks": "Ranks (stragglers in red)",
    }
    tables = {name: (title, getattr(result, name), None) for name, title in titles.items()}
    figures = [("step_times.png", "Step time per rank", result.steps), ("top_kernels.png", "Top kernels", result.top_kernels)]
    return ProfilerAnalysis("torch", result.sources, tables, result.notes, result.to_json(), figures)


def print_profiler_analysis(analysis: ProfilerAnalysis, console: Console, top: int = 15) -> None:
    """The analysis as terminal tables, then its notes."""
    for title, table, columns in analysis.tables.values():
        if table is not None and len(table):
            console.print(rich_table(title, table, columns, top))
    for note in analysis.notes:
        console.print(note)


def write_profiler_report(analysis: ProfilerAnalysis, folder: Path, top: int = 20) -> Path:
    """Write report.html (self-contained), the PNGs and analysis.json into `folder`; returns report.html's path."""
    from nsyskit import pages
    from nsyskit.analysis.present import plots  # matplotlib only when a report is written
    from nsyskit.analysis.present.sections import figure, table_data

    render = {"step_times.png": plots.step_times_per_rank, "top_kernels.png": plots.top_kernels}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "analysis.json").write_text(json.dumps(analysis.to_json(), indent=1))
    figures = [fig for name, title, table in analysis.figures for fig in figure(title, render[name](table), folder, name)]
    tables = [table_data(table, columns, top, title) for title, table, columns in analysis.tables.values()]
    page = pages.render(
        "profiler_report.html.j2", profiler=analysis.profiler, sources=analysis.sources, notes=analysis.notes,
        data={"figures": figures, "tables": tables},
    )  # fmt: skip
    target = folder / "report.html"
    target.write_text(page)
    return target


def run_profiler_analysis(
    profiler: str, paths: list[str | Path], output: Path | None, write: bool = True, straggler_pct: float = 5.0
) -> tuple[ProfilerAnalysis, Path | None]:
    """Analyze an ncu or torch run and, when `write`, write its report.html and analysis.json."""
    analysis = ncu_analysis(paths) if profiler == "ncu" else torch_analysis(paths, straggler_pct)
    first = Path(paths[0])
    target = write_profiler_report(analysis, output or (first if first.is_dir() else first.parent)) if write else None
    return analysis, target
