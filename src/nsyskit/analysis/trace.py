"""The facade over a run's per-rank exports (as Holistic Trace Analysis does): find them, read each once, analyze."""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from nsyskit.analysis import analyzers, nsys
from nsyskit.analysis.reader import ExportReader
from nsyskit.analysis.table import Table
from nsyskit.errors import ReportFileError

RANK_IN_NAME = re.compile(r"(?:^|[_\-.])rank[_\-.]?(\d+)", re.IGNORECASE)
REPORT_SUFFIXES = (".sqlite", ".nsys-rep", ".qdstrm")
OUTPUT_DIR_NAMES = {"analysis"}
MAX_WORKERS = 4  # ranks analyzed at once: bounds peak memory (~0.3 GB per 2M-kernel rank)


def discover(paths: list[str | Path]) -> list[tuple[int, Path]]:
    """(rank, report file) for every report under the given run folders / files; one file per report stem.

    A stem present as .sqlite, .nsys-rep and .qdstrm is read from the first that exists. Ranks come from
    'rank_N' in the name, else from run.json's record of the report, else from the order of the names.
    """
    chosen: dict[Path, Path] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            candidates = sorted(
                p for p in path.rglob("*") if p.suffix in REPORT_SUFFIXES and not (OUTPUT_DIR_NAMES & set(p.parts))
            )
            if not candidates:
                raise ReportFileError(
                    path,
                    "no .nsys-rep, .sqlite or .qdstrm reports in this folder",
                    "pass the run folder 'invoke run' wrote (reports/<run-id>)",
                )
        elif path.suffix in REPORT_SUFFIXES or path.exists():
            candidates = [path]
        else:
            raise ReportFileError(path, "no such file or folder", "check the path")
        for candidate in candidates:
            stem = candidate.with_suffix("")
            best = chosen.get(stem)
            if best is None or REPORT_SUFFIXES.index(candidate.suffix) < REPORT_SUFFIXES.index(best.suffix):
                chosen[stem] = candidate
    files = sorted(chosen.values())
    recorded = _ranks_from_run_json(files)
    ranked: list[tuple[int, Path]] = []
    for index, file in enumerate(files):
        match = RANK_IN_NAME.search(file.name)
        rank = int(match.group(1)) if match else recorded.get(file.with_suffix("").name, index)
        ranked.append((rank, file))
    return sorted(ranked)


def _ranks_from_run_json(files: list[Path]) -> dict[str, int]:
    """Report stem -> rank from run.json files beside the reports (written by 'invoke run'), when they say so."""
    found: dict[str, int] = {}
    for folder in {f.parent for f in files}:
        record = folder / "run.json"
        if not record.exists():
            continue
        try:
            data = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        entries = data.get("ranks") if isinstance(data, dict) else None
        for entry in entries if isinstance(entries, list) else []:  # 'invoke run' writes the ranks' status records
            if not isinstance(entry, dict) or not isinstance(entry.get("rank"), int):
                continue
            for key in ("report", "sqlite"):
                if entry.get(key):
                    found[Path(str(entry[key])).with_suffix("").name] = entry["rank"]
    return found


def open_export(path: Path) -> ExportReader:
    """An ExportReader for a .sqlite, exporting a .nsys-rep (and importing a .qdstrm) with nsys first."""
    if path.suffix == ".qdstrm":
        path = nsys.import_qdstrm(path)
    if path.suffix == ".nsys-rep":
        if not path.exists():
            raise ReportFileError(path, "no such file", "check the path")
        path = nsys.export_sqlite(path)
    return ExportReader(path)


@dataclass
class RankTrace:
    """One rank's export and the analyses of it (each computed once, on first use)."""

    rank: int
    source: Path
    reader: ExportReader

    @cached_property
    def kernels(self):
        """The rank's CUDA kernels (empty on CPU-only reports)."""
        return self.reader.kernels()

    @cached_property
    def kernel_names(self) -> dict[int, str]:
        """StringId -> kernel name for the kernels of this rank."""
        return self.reader.strings(self.kernels.extra["name"]) if len(self.kernels) else {}

    @cached_property
    def memcpys(self):
        """The rank's memcpys."""
        return self.reader.memcpys()

    @cached_property
    def memsets(self):
        """The rank's memsets."""
        return self.reader.memsets()

    @cached_property
    def nvtx(self):
        """The rank's NVTX ranges."""
        return self.reader.nvtx_ranges()

    @property
    def host(self) -> str:
        """The host the rank ran on ('' when unknown)."""
        return self.reader.system_env.get("Hostname", "")

    def kernel_summary(self) -> Table:
        """The kernel summary of this rank (nsys stats' numbers)."""
        return analyzers.kernel_summary(self.kernels, self.kernel_names)

    def breakdown(self) -> Table:
        """Compute/communication/memory/idle time and overlaps per GPU of this rank."""
        return analyzers.gpu_breakdown(
            self.kernels, analyzers.nccl_name_ids(self.kernel_names), [self.memcpys, self.memsets]
        )

    def memcpy_by_kind(self) -> Table:
        """Memcpy count, bytes and bandwidth per copy kind."""
        return analyzers.memcpy_by_kind(self.memcpys, self.reader.memcpy_kind_names())

    def nvtx_summary(self) -> Table:
        """NVTX range summary."""
        return analyzers.nvtx_summary(self.nvtx)

    def steps(self) -> Table:
        """Training steps from the 'step N' NVTX ranges."""
        return analyzers.step_times(self.nvtx)

    def nccl_operations(self) -> Table:
        """NCCL operations with message sizes."""
        return analyzers.nccl_operations(self.nvtx, self.kernels, self.kernel_names, self.reader.kernels_launched_in)

    def release(self) -> None:
        """Drop the raw columns (keep memory flat across many ranks)."""
        for name in ("kernels", "memcpys", "memsets", "nvtx", "kernel_names"):
            self.__dict__.pop(name, None)


@dataclass
class Analysis:
    """Everything 'invoke analyze' computes for a run, as named-column tables (JSON-ready via to_json)."""

    sources: dict[int, str]
    nsys_versions: dict[int, str]
    kernel_summaries: dict[int, Table] = field(default_factory=dict)
    top_kernels: Table | None = None
    breakdown: Table | None = None
    memcpy: Table | None = None
    nvtx: Table | None = None
    steps: Table | None = None
    nccl_ops: Table | None = None
    nccl_sizes: Table | None = None
    ranks: Table | None = None

    @property
    def has_gpu(self) -> bool:
        """Whether any rank recorded GPU activity."""
        return bool(self.breakdown is not None and len(self.breakdown))

    def to_json(self) -> dict[str, Any]:
        """The analysis as plain JSON data."""
        tables = {
            name: getattr(self, name).to_json()
            for name in ("top_kernels", "breakdown", "memcpy", "nvtx", "steps", "nccl_sizes", "ranks")
            if getattr(self, name) is not None
        }
        return {
            "sources": {str(k): v for k, v in self.sources.items()},
            "nsys_versions": {str(k): v for k, v in self.nsys_versions.items()},
            "kernel_summary": {str(rank): table.to_json() for rank, table in self.kernel_summaries.items()},
            **tables,
        }


def _with_rank(rank: int, table: Table) -> Table:
    return Table({"rank": np.full(len(table), rank, dtype=np.int64), **table.columns})


def _concat(tables: list[Table]) -> Table | None:
    tables = [t for t in tables if t is not None]
    if not tables:
        return None
    names = tables[0].names
    return Table(
        {n: np.concatenate([t[n] for t in tables]) if any(len(t) for t in tables) else tables[0][n] for n in names}
    )


def combine_kernel_summaries(summaries: dict[int, Table]) -> Table:
    """Run-level kernel table: per name total, instances, average, min, max over all ranks, and in how many ranks."""
    merged: dict[str, list[float]] = {}
    for table in summaries.values():
        for row in table.rows():
            entry = merged.setdefault(row["name"], [0, 0, float("inf"), 0, 0])
            entry[0] += row["total_ns"]
            entry[1] += row["instances"]
            entry[2] = min(entry[2], row["min_ns"])
            entry[3] = max(entry[3], row["max_ns"])
            entry[4] += 1
    names = list(merged)
    total = np.asarray([merged[n][0] for n in names], dtype=np.int64)
    grand = total.sum() or 1
    table = Table(
        {
            "name": np.asarray(names, dtype=object),
            "time_pct": total * 100.0 / grand,
            "total_ns": total,
            "instances": np.asarray([merged[n][1] for n in names], dtype=np.int64),
            "avg_ns": total / np.maximum(np.asarray([merged[n][1] for n in names]), 1),
            "min_ns": np.asarray([merged[n][2] for n in names], dtype=np.int64),
            "max_ns": np.asarray([merged[n][3] for n in names], dtype=np.int64),
            "ranks": np.asarray([merged[n][4] for n in names], dtype=np.int64),
        }
    )
    return table.sorted_by("total_ns") if len(table) else table


def analyze_rank(rank: int, path: Path) -> dict[str, Any]:
    """Every per-rank analysis of one report; the raw columns are dropped before returning (flat memory)."""
    trace = RankTrace(rank, path, open_export(path))
    try:
        breakdown, steps = trace.breakdown(), trace.steps()
        window = int(breakdown["window_ns"].sum()) if len(breakdown) else 0
        busy = int(breakdown["busy_ns"].sum()) if len(breakdown) else 0
        comm = int(breakdown["comm_ns"].sum()) if len(breakdown) else 0
        durations = steps["duration_ns"]
        return {
            "source": str(trace.reader.path),
            "nsys_version": trace.reader.nsys_version,
            "kernel_summary": trace.kernel_summary(),
            "breakdown": _with_rank(rank, breakdown),
            "memcpy": _with_rank(rank, trace.memcpy_by_kind()),
            "nvtx": _with_rank(rank, trace.nvtx_summary()),
            "steps": _with_rank(rank, steps),
            "nccl_ops": _with_rank(rank, trace.nccl_operations()),
            "summary": {
                "rank": rank,
                "host": trace.host,
                "steps": len(durations),
                "step_mean_ns": float(durations.mean()) if len(durations) else np.nan,
                "step_median_ns": float(np.median(durations)) if len(durations) else np.nan,
                "gpu_busy_ns": busy if window else np.nan,
                "gpu_busy_pct": busy * 100.0 / window if window else np.nan,
                "comm_share_pct": comm * 100.0 / busy if busy else np.nan,
            },
        }
    finally:
        trace.release()
        trace.reader.close()


def analyze_run(paths: list[str | Path], straggler_pct: float = 5.0, workers: int | None = None) -> Analysis:
    """Read every rank's export under `paths` and run every analyzer, a few ranks at a time.

    Threads suffice: SQLite scans and numpy sorts release the GIL. At most MAX_WORKERS ranks are in memory at once.
    """
    found = discover(paths)
    workers = workers or max(1, min(len(found), os.cpu_count() or 1, MAX_WORKERS))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda item: analyze_rank(*item), found))
    analysis = Analysis(sources={}, nsys_versions={})
    for (rank, _path), result in zip(found, results, strict=True):
        analysis.sources[rank] = result["source"]
        analysis.nsys_versions[rank] = result["nsys_version"]
        analysis.kernel_summaries[rank] = result["kernel_summary"]
    analysis.top_kernels = combine_kernel_summaries(analysis.kernel_summaries)
    for name in ("breakdown", "memcpy", "nvtx", "steps", "nccl_ops"):
        setattr(analysis, name, _concat([r[name] for r in results]))
    analysis.nccl_sizes = analyzers.nccl_size_summary(analysis.nccl_ops) if analysis.nccl_ops is not None else None
    analysis.ranks = analyzers.cross_rank([r["summary"] for r in results], straggler_pct)
    return analysis
