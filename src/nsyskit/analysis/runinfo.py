"""The run header of a report (run id, nodes x ranks, image, nsys version) and the links to each rank's report."""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

RUN_JSON = "run.json"
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


def read_run_json(folders: list[Path]) -> dict:
    """The first readable run.json among the folders ('invoke run' writes one per run folder), else {}."""
    for folder in folders:
        try:
            data = json.loads((folder / RUN_JSON).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return data
    return {}


def _versions(nsys_versions: dict[int, str]) -> str:
    found = sorted({v or "unknown" for v in nsys_versions.values()})
    return ", ".join(found) or "unknown"


def _layout(record: dict, ranks: int) -> str:
    nodes, per_node = record.get("nodes"), record.get("procs_per_node")
    if isinstance(nodes, int) and isinstance(per_node, int):
        return f"{nodes} node(s) x {per_node} rank(s) = {nodes * per_node} ranks ({ranks} reports)"
    return f"{ranks} rank(s)"


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
    record = read_run_json(folders)
    started = record.get("started")
    when = (
        datetime.datetime.fromtimestamp(started, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        if isinstance(started, int | float)
        else ""
    )
    return RunHeader(
        run_id=str(record.get("run_id") or folder.name),
        layout=_layout(record, len(analysis.sources)),
        image=str(record.get("image") or "unknown"),
        nsys=_versions(analysis.nsys_versions),
        launcher=str(record.get("launcher") or ""),
        started=when,
        window=window,
        reports=rank_reports(analysis.sources, folder),
    )
