"""PyTorch profiler traces (Kineto, one per rank) analyzed with Holistic Trace Analysis, as named-column tables.

HTA (`holistictraceanalysis`) loads the traces and computes the temporal breakdown, the communication/computation
overlap and the idle time per rank; the kernel tables (per name and rank, per kind) come from the GPU events HTA
loaded (torchkernels), as HTA's own kernel breakdown is no per-launch table. This module finds the traces, asks HTA,
and turns its pandas frames into Tables with the kit's column conventions (`_ns` times, `_pct` shares), so the terminal
tables, report.html and the JSON look like the nsys analysis. HTA measures in microseconds.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nsyskit.analysis.compute import analyzers
from nsyskit.analysis.compute.result import concat as result_concat
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.profilers import torchkernels
from nsyskit.errors import AnalysisError

TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json")
RANK_IN_NAME = re.compile(r"_rank(\d+)_")  # the wrapper's JOB_nodeN_rankR_HOST naming
HOST_IN_NAME = re.compile(r"_rank\d+_(.+?)\.pt\.trace\.json")
STEP_NAME = re.compile(r"ProfilerStep#(\d+)$")
GPU_ANNOTATION = "gpu_user_annotation"  # Kineto's GPU-side copy of a user annotation (cat)
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


@contextmanager
def exact_parsing():
    """HTA's parser settings while loading, restored afterwards: timestamps kept at Kineto's ns resolution (by
    default HTA rounds each event inwards to whole microseconds: a 0.9 us memset gets 0 or -1 us and each kernel loses
    about 1 us, 18.6 ms of 586 ms on the H100 example), and only the event args read here (stream, correlation)."""
    from hta.configs.env_options import HTA_DISABLE_NS_ROUNDING_ENV
    from hta.configs.parser_config import ParserConfig

    rounding, config = os.environ.get(HTA_DISABLE_NS_ROUNDING_ENV), ParserConfig.get_default_cfg()
    os.environ[HTA_DISABLE_NS_ROUNDING_ENV] = "1"
    ParserConfig.set_default_cfg(ParserConfig(args=ParserConfig.get_minimum_args()))
    try:
        yield
    finally:
        ParserConfig.set_default_cfg(config)
        if rounding is None:
            os.environ.pop(HTA_DISABLE_NS_ROUNDING_ENV, None)
        else:
            os.environ[HTA_DISABLE_NS_ROUNDING_ENV] = rounding


def load_hta(traces: dict[int, Path]):
    """HTA's TraceAnalysis over the traces, parsed exactly (its progress messages, logged as warnings, silenced)."""
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        raise AnalysisError(next(iter(traces.values())), "reading torch traces needs Holistic Trace Analysis",
                            "pip install 'nsyskit[torch]' (or holistictraceanalysis)") from None  # fmt: skip
    logging.getLogger("hta").setLevel(logging.ERROR)
    folder = next(iter(traces.values())).parent
    # Every step the example's schedule recorded is complete: keep the last one too.
    with exact_parsing():
        return TraceAnalysis(trace_files={r: str(p) for r, p in traces.items()}, trace_dir=str(folder),
                             include_last_profiler_step=True)  # fmt: skip


def _column(frame, name: str, scale: float = 1.0, dtype=np.float64) -> np.ndarray:
    return (frame[name].to_numpy(dtype=np.float64) * scale).astype(dtype)


def _ns(frame, name: str) -> np.ndarray:
    """A column of HTA microseconds as whole ns (Kineto's resolution; HTA's float arithmetic leaves fractions)."""
    return np.rint(_column(frame, name, US))


def temporal_breakdown(frame) -> Table:
    """HTA's temporal breakdown: per rank the span of GPU kernels split into idle, compute and non-compute time."""
    ns = {name: _ns(frame, f"{name}(us)") for name in ("kernel_time", "idle_time", "compute_time", "non_compute_time")}
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
    """HTA's idle time per rank and stream, by cause (host_wait: the GPU waited for the CPU; kernel_wait; other), and
    each cause's share of its stream's idle time (from the times: HTA's own ratio is rounded to whole percents)."""
    rank, stream = _column(frame, "rank", dtype=np.int64), _column(frame, "stream", dtype=np.int64)
    idle = _ns(frame, "idle_time")
    pairs, inverse = np.unique(np.stack([rank, stream], axis=1), axis=0, return_inverse=True)
    stream_idle = np.bincount(inverse.ravel(), weights=idle, minlength=len(pairs))[inverse.ravel()]
    return Table({
        "rank": rank, "stream": stream, "kind": frame["idle_category"].astype(str).to_numpy(dtype=object),
        "idle_ns": idle, "idle_share_pct": idle * 100 / np.maximum(stream_idle, 1),
    })  # fmt: skip


def step_times(rank: int, frame, names: list[str]) -> Table:
    """One rank's ProfilerStep#N annotations on the CPU: step, start and duration in ns (Kineto repeats each step as a
    gpu_user_annotation spanning its kernels: not a second step)."""
    ids = {i: int(m.group(1)) for i, n in enumerate(names) if (m := STEP_NAME.match(str(n)))}
    on_gpu = [i for i, n in enumerate(names) if n == GPU_ANNOTATION]
    rows = frame[frame["name"].isin(list(ids)) & ~frame["cat"].isin(on_gpu)].sort_values("ts")
    return Table({
        "rank": np.full(len(rows), rank, dtype=np.int64),
        "step": np.asarray([ids[i] for i in rows["name"]], dtype=np.int64),
        "start_ns": _ns(rows, "ts").astype(np.int64), "duration_ns": _ns(rows, "dur").astype(np.int64),
    })  # fmt: skip


def gpu_events(rank: int, frame, names: list[str]) -> Table:
    """One rank's GPU events as HTA loaded them (the rows on a stream: kernels, memcpy, memset), with HTA's kind."""
    from hta.utils.utils import get_kernel_type

    gpu = frame[frame["stream"].ne(-1)]
    ids = gpu["name"].to_numpy(dtype=np.int64)
    kind_of = {int(i): get_kernel_type(names[i]) for i in np.unique(ids)}
    kinds = np.asarray([kind_of[int(i)] for i in ids], dtype=object)
    return torchkernels.events_table(rank, ids, kinds, _column(gpu, "ts"), _column(gpu, "dur"))


def _gpu_part(analysis: TorchAnalysis, hta) -> None:
    """Fill the GPU tables (kernels from the events, the rest from HTA); on a CPU run there is nothing to fill."""
    names = hta.t.symbol_table.get_sym_table()
    events = {rank: gpu_events(rank, hta.t.get_trace(rank), names) for rank in sorted(analysis.sources)}
    if not any(len(e) for e in events.values()):
        analysis.notes.append(NO_GPU)
        return
    labels = dict(enumerate(names))
    summaries = {rank: torchkernels.rank_summary(e, labels) for rank, e in events.items() if len(e)}
    analysis.top_kernels = torchkernels.top_kernels(summaries)
    analysis.rank_kernels = torchkernels.rank_kernels(summaries)
    analysis.kernel_types = torchkernels.kind_breakdown(result_concat(list(events.values())))
    analysis.temporal_breakdown = temporal_breakdown(hta.get_temporal_breakdown(visualize=False))
    analysis.comm_comp_overlap = comm_comp_overlap(hta.get_comm_comp_overlap(visualize=False))
    idle = hta.get_idle_time_breakdown(ranks=sorted(analysis.sources), visualize=False)
    analysis.idle_time = idle_time(idle[0] if isinstance(idle, tuple) else idle)


def analyze_traces(paths: list[str | Path], straggler_pct: float = 5.0) -> TorchAnalysis:
    """Find the run's torch traces, load them with HTA and compute every table (the GPU ones only where kernels exist)."""
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
