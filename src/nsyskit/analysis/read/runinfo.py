"""The run header of a report (run id, nodes x ranks, image, nsys version) and the links to each rank's report."""

from __future__ import annotations

import datetime
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nsyskit import runrecord
from nsyskit.errors import AnalysisError
from nsyskit.runrecord import RunRecord

REPORT_SUFFIXES = (
    ".nsys-rep",
    ".qdrep",
    ".sqlite",
)  # what to link for a rank, best first (the GUI opens the first two)


@dataclass(frozen=True)
class RankReport:
    """One rank's report file, as a link relative to report.html."""

    rank: int
    href: str
    name: str


@dataclass
class RunHeader:
    """What a reader needs to know about the run before any number."""

    run_id: str
    layout: str
    image: str
    nsys: str
    launcher: str
    started: str
    window: str
    reports: list[RankReport] = field(default_factory=list)
    unprofiled_ranks: list[int] = field(default_factory=list)  # ranks that ran without the profiler
    not_profiled: str = ""  # 'ranks 1,3 were not profiled (PROFILE_RANKS=local0)'
    incomplete: list[str] = field(default_factory=list)  # reports left out of this analysis, each with why
    ranks_per_node: int | None = None  # run.json's procs_per_node: how heat maps group ranks into nodes at scale

    @property
    def open_together(self) -> str:
        """How to see the ranks on one timeline in the Nsight Systems GUI (2021.3+: File > Add Report)."""
        gui = [r for r in self.reports if r.name.endswith((".nsys-rep", ".qdrep"))]
        if len(gui) < 2:
            return f"nsys-ui {gui[0].name}" if gui else ""
        more = (
            ", ".join(r.name for r in gui[1:]) if len(gui) <= 4 else f"each other rank's report ({len(gui) - 1} more)"
        )
        return f"nsys-ui {gui[0].name}, then File > Add Report (beta)… with {more}"

    def to_json(self) -> dict:
        """The header as JSON data."""
        return {**asdict(self), "open_together": self.open_together}


def run_record(folder: Path) -> RunRecord | None:
    """FOLDER/run.json as a RunRecord (any version every target's collect wrote), None when there is none.

    A run.json that is not JSON, or that a newer nsyskit wrote, is an error naming the file and the fix.
    """
    try:
        return runrecord.read_run(str(folder))
    except runrecord.RunRecordError as exc:
        raise AnalysisError(exc.path, exc.problem, exc.fix) from None


def read_run_record(folders: list[Path]) -> RunRecord | None:
    """The run record of the first of the folders that has one (each collect writes one per run folder), else None."""
    for folder in folders:
        record = run_record(folder)
        if record is not None:
            return record
    return None


def not_profiled(paths: list[Path]) -> tuple[list[int], str]:
    """(ranks, one line) of the ranks the run records beside PATHS say ran without the profiler; ([], '') if none."""
    folders = sorted({p if p.is_dir() else p.parent for p in map(Path, paths)})
    record = read_run_record(folders)
    return (record.unprofiled(), record.unprofiled_line()) if record else ([], "")


def _versions(nsys_versions: dict[int, str]) -> str:
    found = sorted({v or "unknown" for v in nsys_versions.values()})
    return ", ".join(found) or "unknown"


def _layout(record: RunRecord | None, ranks: int) -> str:
    nodes, per_node = (record.nodes, record.procs_per_node) if record else (None, None)
    if isinstance(nodes, int) and isinstance(per_node, int):
        return f"{nodes:,} node(s) x {per_node:,} rank(s) = {nodes * per_node:,} ranks ({ranks:,} reports)"
    return f"{ranks:,} rank(s)"


def rank_reports(sources: dict[int, str], folder: Path) -> list[RankReport]:
    """Per rank, the best report file beside its analyzed source (.nsys-rep over .sqlite), relative to `folder`."""
    found = []
    for rank, source in sorted(sources.items()):
        path = Path(source)
        best = next((path.with_suffix(s) for s in REPORT_SUFFIXES if path.with_suffix(s).exists()), path)
        found.append(RankReport(rank, Path(os.path.relpath(best, folder)).as_posix(), best.name))
    return found


def run_header(analysis, folder: Path, window: str) -> RunHeader:
    """The header of the analysis of a run written into `folder` (run.json where 'invoke run' left one)."""
    folders = [folder] + sorted({Path(s).parent for s in analysis.sources.values()})
    record = read_run_record(folders)
    started = record.started if record else None
    when = (
        datetime.datetime.fromtimestamp(started, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        if isinstance(started, int | float)
        else ""
    )
    return RunHeader(
        run_id=str(record.run_id if record else folder.resolve().name),  # "." names the folder it is
        layout=_layout(record, len(analysis.sources)),
        image=str(record.image if record and record.image else "unknown"),
        nsys=_versions(analysis.nsys_versions),
        launcher=str(record.launcher if record else ""),
        started=when,
        window=window,
        reports=rank_reports(analysis.sources, folder),
        unprofiled_ranks=record.unprofiled() if record else [],
        not_profiled=record.unprofiled_line() if record else "",
        incomplete=list(getattr(analysis, "incomplete", [])),
        ranks_per_node=record.procs_per_node if record and isinstance(record.procs_per_node, int) else None,
    )
