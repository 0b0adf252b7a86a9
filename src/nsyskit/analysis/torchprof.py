"""PyTorch profiler traces (Kineto, one per rank) analyzed with Holistic Trace Analysis, as named-column tables.

HTA (`holistictraceanalysis`) computes the temporal breakdown, the communication/computation overlap, the
idle time and the kernel breakdown per rank; this module only finds the traces, asks HTA, and turns its
pandas frames into Tables with the kit's column conventions (`_ns` times, `_pct` shares), so the terminal
tables, report.html and the JSON look like the nsys analysis. HTA measures in microseconds.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nsyskit.analysis import analyzers
from nsyskit.analysis.table import Table
from nsyskit.errors import AnalysisError

TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json")
RANK_IN_NAME = re.compile(r"_rank(\d+)_")  # the wrapper's JOB_nodeN_rankR_HOST naming
HOST_IN_NAME = re.compile(r"_rank\d+_(.+?)\.pt\.trace\.json")
STEP_NAME = re.compile(r"ProfilerStep#(\d+)$")
US = 1000  # ns per HTA microsecond
NO_GPU = "no GPU kernels in the torch traces (CPU run): temporal breakdown, overlap, idle time and kernel tables are empty"
TABLES = ("temporal_breakdown", "comm_comp_overlap", "idle_time", "kernel_types", "top_kernels", "rank_kernels", "steps",
          "ranks")  # fmt: skip


@dataclass
class TorchAnalysis:
    """What 'invoke analyze' computes from torch profiler traces (HTA), per rank and for the run."""

    sources: dict[int, str]
    temporal_breakdown: Table | None = None
    comm_comp_overlap: Table | None = None
    idle_time: Table | None = None
    kernel_types: Table | None = None
    top_kernels: Table | None = None
    rank_kernels: Table | None = None
    steps: Table | None = None
    ranks: Table | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def has_gpu(self) -> bool:
        """Whether any rank recorded a GPU kernel."""
        return bool(self.top_kernels is not None and len(self.top_kernels))

    def to_json(self) -> dict[str, Any]:
        """The analysis as plain JSON data (the same table form as the nsys analysis)."""
        tables = {name: getattr(self, name).to_json() for name in TABLES if getattr(self, name) is not None}
        return {"profiler": "torch", "sources": {str(k): v for k, v in self.sources.items()}, **tables,
                "notes": list(self.notes)}  # fmt: skip


def is_trace(path: Path) -> bool:
    """Whether a file is a torch profiler trace by its name."""
    return path.name.endswith(TRACE_SUFFIXES)


def trace_rank(path: Path) -> int | None:
    """The rank of a trace: from the wrapper's file name, else from the trace's distributedInfo."""
    match = RANK_IN_NAME.search(path.name)
    if match:
        return int(match.group(1))
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt") as handle:
            info = json.load(handle).get("distributedInfo") or {}
    except (OSError, ValueError, EOFError) as exc:
        raise AnalysisError(path, f"is not a readable torch profiler trace ({exc})", "re-run the profiled job") from None
    return int(info["rank"]) if "rank" in info else None


def find_traces(paths: list[str | Path]) -> dict[int, Path]:
    """rank -> trace file, from run folders and/or trace files."""
    files: list[Path] = []
    for item in map(Path, paths):
        if item.is_dir():
            files += sorted(p for p in item.iterdir() if is_trace(p))
        elif item.is_file() and is_trace(item):
            files.append(item)
        else:
            raise AnalysisError(item, "is not a torch trace or a folder", f"pass files ending in {TRACE_SUFFIXES[0]}")
    found: dict[int, Path] = {}
    for index, path in enumerate(files):
        rank = trace_rank(path)
        found[index if rank is None or rank in found else rank] = path
    if not found:
        raise AnalysisError(", ".join(map(str, paths)), "no torch profiler traces (*.pt.trace.json.gz)",
                            "run with PROFILER=torch (invoke run --local --profiler torch)")  # fmt: skip
    return dict(sorted(found.items()))


def load_hta(traces: dict[int, Path]):
    """HTA's TraceAnalysis over the traces (its progress messages, logged as warnings, silenced)."""
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        raise AnalysisError(next(iter(traces.values())), "reading torch traces needs Holistic Trace Analysis",
                            "pip install 'nsyskit[torch]' (or holistictraceanalysis)") from None  # fmt: skip
    logging.getLogger("hta").setLevel(logging.ERROR)
    folder = next(iter(traces.values())).parent
    # Every step the example's schedule recorded is complete: keep the last one too.
    return TraceAnalysis(trace_files={r: str(p) for r, p in traces.items()}, trace_dir=str(folder),
                         include_last_profiler_step=True)  # fmt: skip


def _column(frame, name: str, scale: float = 1.0, dtype=np.float64) -> np.ndarray:
    return (frame[name].to_numpy(dtype=np.float64) * scale).astype(dtype)


def temporal_breakdown(frame) -> Table:
    """HTA's temporal breakdown: per rank the span of GPU kernels split into idle, compute and non-compute time."""
    ns = {name: _column(frame, f"{name}(us)", US) for name in ("kernel_time", "idle_time", "compute_time", "non_compute_time")}
    span = np.maximum(ns["kernel_time"], 1)
    return Table({
        "rank": _column(frame, "rank", dtype=np.int64), "window_ns": ns["kernel_time"],
        "idle_ns": ns["idle_time"], "compute_ns": ns["compute_time"], "non_compute_ns": ns["non_compute_time"],
        "idle_pct": ns["idle_time"] * 100 / span, "compute_pct": ns["compute_time"] * 100 / span,
        "non_compute_pct": ns["non_compute_time"] * 100 / span,
    })  # fmt: skip


def comm_comp_overlap(frame) -> Table:
    """HTA's overlap per rank: the share of communication kernel time that overlaps compute kernels."""
    return Table({"rank": _column(frame, "rank", dtype=np.int64),
                  "comm_overlapped_pct": _column(frame, "comp_comm_overlap_pctg")})  # fmt: skip


def idle_time(frame) -> Table:
    """HTA's idle time per rank and stream, by cause (host_wait: the GPU waited for the CPU; kernel_wait; other)."""
    return Table({
        "rank": _column(frame, "rank", dtype=np.int64), "stream": _column(frame, "stream", dtype=np.int64),
        "kind": frame["idle_category"].astype(str).to_numpy(dtype=object),
        "idle_ns": _column(frame, "idle_time", US), "idle_share_pct": _column(frame, "idle_time_ratio", 100.0),
    })  # fmt: skip


def kernel_types(frame) -> Table:
    """HTA's kernel breakdown by type over all ranks: COMPUTATION, COMMUNICATION, MEMORY and their overlap."""
    return Table({"kind": frame["kernel_type"].astype(str).to_numpy(dtype=object),
                  "total_ns": _column(frame, "sum", US), "time_pct": _column(frame, "percentage")})  # fmt: skip


def top_kernels(frame) -> Table:
    """Run-level kernel table in the nsys analysis' columns, from HTA's per-rank kernel statistics."""
    merged: dict[str, dict[str, Any]] = {}
    for row in frame.to_dict("records"):
        entry = merged.setdefault(row["name"], {"kind": row["kernel_type"], "total": 0.0, "instances": 0,
                                                "min": np.inf, "max": 0.0, "ranks": set()})  # fmt: skip
        entry["total"] += row["sum (us)"] * US
        entry["instances"] += round(row["sum (us)"] / row["mean (us)"]) if row["mean (us)"] else 0
        entry["min"], entry["max"] = min(entry["min"], row["min (us)"] * US), max(entry["max"], row["max (us)"] * US)
        entry["ranks"].add(row["rank"])
    names = sorted(merged, key=lambda n: -merged[n]["total"])
    total = np.asarray([merged[n]["total"] for n in names], dtype=np.float64)
    instances = np.asarray([merged[n]["instances"] for n in names], dtype=np.int64)
    return Table({
        "name": np.asarray(names, dtype=object), "kind": np.asarray([merged[n]["kind"] for n in names], dtype=object),
        "time_pct": total * 100 / (total.sum() or 1), "total_ns": total, "instances": instances,
        "avg_ns": total / np.maximum(instances, 1), "min_ns": np.asarray([merged[n]["min"] for n in names]),
        "max_ns": np.asarray([merged[n]["max"] for n in names]), "ranks": np.asarray([len(merged[n]["ranks"]) for n in names]),
    })  # fmt: skip


def rank_kernels(frame) -> Table:
    """HTA's kernel statistics per rank: rank, name, type, total, mean, min, max and standard deviation."""
    frame = frame.sort_values(["rank", "sum (us)"], ascending=[True, False])
    return Table({
        "rank": _column(frame, "rank", dtype=np.int64), "name": frame["name"].astype(str).to_numpy(dtype=object),
        "kind": frame["kernel_type"].astype(str).to_numpy(dtype=object), "total_ns": _column(frame, "sum (us)", US),
        "avg_ns": _column(frame, "mean (us)", US), "min_ns": _column(frame, "min (us)", US),
        "max_ns": _column(frame, "max (us)", US), "stddev_ns": _column(frame, "stddev", US),
    })  # fmt: skip


def step_times(rank: int, frame, names: list[str]) -> Table:
    """One rank's ProfilerStep#N annotations: step, start and duration in ns."""
    ids = {i: int(m.group(1)) for i, n in enumerate(names) if (m := STEP_NAME.match(str(n)))}
    rows = frame[frame["name"].isin(list(ids))].sort_values("ts")
    return Table({
        "rank": np.full(len(rows), rank, dtype=np.int64),
        "step": np.asarray([ids[i] for i in rows["name"]], dtype=np.int64),
        "start_ns": _column(rows, "ts", US, np.int64), "duration_ns": _column(rows, "dur", US, np.int64),
    })  # fmt: skip


def _gpu_part(analysis: TorchAnalysis, hta) -> None:
    """Fill the GPU tables from HTA; on a CPU run HTA has nothing (or fails) and the analysis says so."""
    kernel_frames = hta.get_gpu_kernel_breakdown(visualize=False)
    if kernel_frames[1].empty:
        analysis.notes.append(NO_GPU)
        return
    analysis.kernel_types, analysis.top_kernels = kernel_types(kernel_frames[0]), top_kernels(kernel_frames[1])
    analysis.rank_kernels = rank_kernels(kernel_frames[1])
    analysis.temporal_breakdown = temporal_breakdown(hta.get_temporal_breakdown(visualize=False))
    analysis.comm_comp_overlap = comm_comp_overlap(hta.get_comm_comp_overlap(visualize=False))
    ranks = sorted(analysis.sources)
    idle = hta.get_idle_time_breakdown(ranks=ranks, visualize=False)
    analysis.idle_time = idle_time(idle[0] if isinstance(idle, tuple) else idle)


def analyze_traces(paths: list[str | Path], straggler_pct: float = 5.0) -> TorchAnalysis:
    """Find the run's torch traces and compute every table with HTA (the GPU ones only where kernels exist)."""
    traces = find_traces(paths)
    with warnings.catch_warnings():  # HTA's pandas deprecations and empty-GPU divisions are not the user's concern
        warnings.simplefilter("ignore")
        hta = load_hta(traces)
        analysis = TorchAnalysis(sources={rank: str(path) for rank, path in traces.items()})
        _gpu_part(analysis, hta)
    names = hta.t.symbol_table.get_sym_table()
    per_rank, summaries = [], []
    for rank in traces:
        steps = step_times(rank, hta.t.get_trace(rank), names)
        per_rank.append(steps)
        durations = steps["duration_ns"]
        busy = analysis.temporal_breakdown.take(analysis.temporal_breakdown["rank"] == rank) if analysis.has_gpu else None
        host = HOST_IN_NAME.search(traces[rank].name)
        summaries.append({
            "rank": rank, "host": host.group(1) if host else "", "steps": len(durations),
            "step_mean_ns": float(durations.mean()) if len(durations) else np.nan,
            "step_median_ns": float(np.median(durations)) if len(durations) else np.nan,
            "gpu_busy_pct": float(100 - busy["idle_pct"][0]) if busy is not None and len(busy) else np.nan,
        })  # fmt: skip
    analysis.steps = Table({n: np.concatenate([t[n] for t in per_rank]) for n in per_rank[0].names})
    analysis.ranks = analyzers.cross_rank(summaries, straggler_pct)
    return analysis
