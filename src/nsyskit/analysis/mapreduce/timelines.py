"""The timeline of a run mapped into parts: each report's ranks' capped events, kept in its part, and the run's
timeline from the parts, numbered as the merge numbered the ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nsyskit.analysis.compute.result import Analysis
from nsyskit.analysis.mapreduce.partfile import members
from nsyskit.analysis.present.timeline import RankTimeline, read_rank
from nsyskit.analysis.read.discover import open_export
from nsyskit.errors import AnalysisError

TIMELINE = "timeline"  # the part's member holding its ranks' timelines


def read_timelines(path: Path, data: Any = None) -> list[RankTimeline] | None:
    """The ranks' capped timeline events a part holds (None when it was mapped without --timeline), from its members
    `data` when they are open."""
    with members(path, data) as data:  # a part cut short or damaged: one error naming it
        if TIMELINE not in data:
            return None
        return [RankTimeline(rank, events, total, note) for rank, events, total, note in json.loads(str(data[TIMELINE]))]


def report_timelines(rank: int, path: Path, budget: int) -> list[RankTimeline]:
    """The timeline of each rank in one report (one per process with GPU activity), each at most `budget` events."""
    reader = open_export(path)
    try:
        pids = reader.processes()
    finally:
        reader.close()
    if len(pids) <= 1:
        return [read_rank(rank, path, budget)]
    share = max(1, budget // len(pids))
    return [read_rank(rank + offset, path, share, pid) for offset, pid in enumerate(pids)]


def merged_timelines(part_files: list[tuple[Path, list[int] | None]], analysis: Analysis) -> list[RankTimeline]:
    """The run's timeline from its parts' ranks (renumbered as the analysis numbered them); an error when a part
    was mapped without --timeline. `part_files`: each part's file and, in a partial merge, the [start, stop) of its
    ranks' timelines among the file's."""
    timelines: list[RankTimeline] = []
    held: dict[Path, list[RankTimeline] | None] = {}  # a partial merge's timelines, read once for all its parts
    for path, span in part_files:
        if path not in held:
            held[path] = read_timelines(path)
        if held[path] is None:
            raise AnalysisError(path, "holds no timeline (mapped without --timeline)",
                                "map again with 'invoke analyze-part --timeline', or merge without --timeline")  # fmt: skip
        timelines += held[path] if span is None else held[path][span[0] : span[1]]
    for timeline, rank in zip(timelines, analysis.sources, strict=False):
        if timeline.rank != rank:  # a report of several processes: the run's ranks are renumbered 0..N-1
            _renumber_timeline(timeline, rank)
    return timelines


def _renumber_timeline(timeline: RankTimeline, rank: int) -> None:
    """Give a rank's timeline its number in the run: its process id, sort index, label and cap note."""
    old, new = f"rank {timeline.rank}", f"rank {rank}"
    for event in timeline.events:
        event["pid"] = rank
        args = event.get("args", {})
        if event["name"] == "process_sort_index":
            args["sort_index"] = rank
        for key in ("name", "labels"):
            if event["name"] in ("process_name", "process_labels") and str(args.get(key, "")).startswith(old):
                args[key] = new + args[key][len(old) :]
    if timeline.note.startswith(old):
        timeline.note = new + timeline.note[len(old) :]
    timeline.rank = rank
