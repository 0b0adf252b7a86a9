"""The analysis as a map and a reduce that any engine can run: one part file per report (the per-rank tables of
analyze_file, small whatever the report's size), and the merge of a folder of parts into the run's Analysis.

A part is an .npz (no pickle: nothing in it runs code): numeric columns as arrays, text columns and the per-rank
summaries as JSON, and a header naming the part format, the nsyskit version, the report, its rank and the run's
report list, so that a merge refuses parts of another version and names the ranks whose parts are missing.
Statistics that do not merge by sums (medians, standard deviations) are per rank in every table, so the part
keeps them whole; the run-level tables (top kernels, NCCL sizes, ranks) are computed from the per-rank rows at
the merge, exactly as in one process. NCCL operations travel as each rank's digest: sums per group, and the sorted
durations the run-level medians need (nsyskit.analysis.compute.nccldigest), which the merge folds across ranks as
they come (a partial merge carries its ranks' folded, compute.ncclfold).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from nsyskit import __version__
from nsyskit.analysis.compute.ncclbandwidth import world_size
from nsyskit.analysis.compute.result import Analysis
from nsyskit.analysis.mapreduce.block import Block
from nsyskit.analysis.mapreduce.leftout import NO_PART, left_out_lines
from nsyskit.analysis.mapreduce.partfile import (
    HEADER,
    LISTED,
    LISTING,
    PART_FORMAT,
    SUFFIX,
    listing_member,
    part_headers,
    part_name,
    read_header,
    read_headers,
    read_listings,
    results_of,
    write_atomic,
)
from nsyskit.analysis.mapreduce.partpack import encode_results
from nsyskit.analysis.mapreduce.timelines import TIMELINE, report_timelines
from nsyskit.analysis.present.timeline import RankTimeline
from nsyskit.analysis.process import keep_freed_memory
from nsyskit.analysis.read.discover import discover_named, number_reports, report_stem
from nsyskit.analysis.read.runinfo import not_profiled
from nsyskit.analysis.trace import RANKED_KEYS, analyze_file, merge
from nsyskit.errors import AnalysisError, NsyskitError, PartialAnalysis, UsageError


def write_part(
    results: list[dict[str, Any]], header: dict[str, Any], folder: Path, timelines: list[RankTimeline] | None = None
) -> Path:
    """Write one report's part into `folder` atomically (a reader never sees half a part); its path.

    A report that could not be analyzed has no results and its header's "error" says why; `timelines` are its ranks'
    capped timeline events when the map was asked for them.
    """
    arrays = encode_results(results)
    if timelines is not None:
        arrays[TIMELINE] = np.asarray(json.dumps([[t.rank, t.events, t.total, t.note] for t in timelines]))
    own = {key: value for key, value in header.items() if key not in LISTED}
    own[LISTING], arrays[LISTING] = listing_member({key: header[key] for key in LISTED})
    arrays[HEADER] = np.asarray(json.dumps({"format": PART_FORMAT, "nsyskit": __version__, **own}))
    return write_atomic(arrays, folder / part_name(Path(header["report"])))


def map_reports(
    paths: list[str | Path], out: Path, index: int | None = None, size: int | None = None,
    progress: Callable[[int, int], None] | None = None, strict: bool = False, timeline_events: int | None = None,
) -> list[Path]:  # fmt: skip
    """The map: analyze the reports under `paths` (array element `index` of `size` takes every size-th report from
    `index` on) and write one part per report into `out`; the parts written.

    A report that cannot be read still gets a part, saying why (the merge names its rank), unless `strict`: then its
    error stops the map. `timeline_events`: also keep each rank's share of a timeline of that many events in all.
    """
    if (index is None) != (size is None) or (size is not None and not 0 <= index < size):
        raise UsageError(f"--array-index {index} of --array-size {size}", fix="give both, with 0 <= index < size")
    keep_freed_memory()  # the ranks' arrays reuse the pages of the ones before (analysis/process.py)
    named = discover_named(paths)
    found = [(rank, path) for rank, path, _named in named]
    _unprofiled, unprofiled_line = not_profiled([path for _rank, path in found])
    everything = [str(path) for _rank, path in found]
    mine = found if size is None else found[index::size]
    folder = str(Path(paths[0]) if Path(paths[0]).is_dir() else Path(paths[0]).parent)
    written = []
    known = {path: is_named for _rank, path, is_named in named}
    for done, (rank, path) in enumerate(mine, start=1):
        # "rank_known" (and "named", for each listed report): whether the rank comes from the name or run.json. Else
        # it is the order of the names this map saw, which the merge redoes over every part's reports (a report
        # mapped on its own says rank 0 and rank_known false).
        header = {"report": str(path), "rank": rank, "rank_known": known[path], "reports": everything,
                  "ranks": [r for r, _p in found], "named": [known[p] for _r, p in found],
                  "unprofiled": unprofiled_line, "folder": folder, "error": ""}  # fmt: skip
        results: list[dict[str, Any]] = []
        timelines = None
        try:
            results = analyze_file(rank, path)
            if timeline_events:
                timelines = report_timelines(rank, path, max(1, timeline_events // len(found)))
        except NsyskitError as exc:
            if strict:
                raise
            header["error"] = exc.one_line()
        written.append(write_part(results, header, out, timelines))
        if progress:
            progress(done, len(mine))
    return written


def merge_parts(folder: Path, straggler_pct: float = 5.0, strict: bool = False) -> tuple[Analysis, dict[str, Any]]:
    """The reduce: the Analysis of every part in `folder`, ranks in the order 'invoke analyze' gives them, and the
    run's facts (its folder, the reports whose parts are missing, the parts merged).

    A report whose map failed, a missing part and a part that cannot be read (cut short, of another version) leave
    their ranks out, each named with why at the top of the analysis (Analysis.incomplete); `strict` stops at the
    first of them instead. Two parts claiming one rank are always an error naming both.
    """
    paths = sorted(folder.glob("*" + SUFFIX)) if folder.is_dir() else []
    if not paths:
        raise AnalysisError(folder, "holds no part files (*.part.npz)", "map the reports first: 'invoke analyze-part'")
    parts, unreadable, where = [], {}, set()
    for path, header, _members in read_headers(paths, strict, unreadable):  # results: read as the reduce takes them
        parts += [(path, held, []) for held in part_headers(header)]
        where.add(header.get("parts_folder", str(folder)))
    if not parts:  # no file reads, or partial merges of parts none of which read: the first such file, with why
        name = next((p.name for p in paths if p.name in unreadable), min(unreadable, default=""))
        if not name:
            raise AnalysisError(folder, "holds partial merges of no part", "map the reports first: 'invoke analyze-part'")
        raise AnalysisError(folder / name, unreadable[name].partition(": ")[2])
    # Each part's rank in the run: a rank nothing names is numbered here over every part's reports (see number_reports)
    headers = [header for _path, header, _results in parts]
    lists: dict[str, dict[str, list]] = {}  # one per map: each part of a map lists the run, read once
    for path, header, _results in parts:
        if header[LISTING] not in lists:
            lists.update(read_listings(path, read_header(path)))
    owned = [(header["report"], header["rank"], header.get("rank_known", True)) for header in headers]
    ranks, numbered_note = number_reports(owned, [_listing(listing) for listing in lists.values()])
    for _path, header, results in parts:
        _give_rank(header, results, ranks[header["report"]])
    by_rank: dict[int, Path] = {}
    for path, header, _results in parts:  # a partial merge's part named by its own file, not the partial's
        if header["rank"] in by_rank:
            raise AnalysisError(
                header.get("file", path), f"claims rank {header['rank']}, as {by_rank[header['rank']]} does",
                "keep one part per report: remove the stale one (two runs' parts in one folder?)",
            )  # fmt: skip
        by_rank[header["rank"]] = header.get("file", path)
    parts.sort(key=lambda part: part[1]["rank"])
    first = parts[0][1]
    # By rank, not by path: maps running side by side may each have seen another's report as .nsys-rep or .sqlite.
    listed: dict[str, str] = {}  # every report some map listed, one per stem
    for listing in lists.values():
        for report in listing["reports"]:
            listed.setdefault(report_stem(report), report)
    missing = sorted((report for report in listed.values() if ranks[report] not in by_rank), key=ranks.__getitem__)
    failed = [(header["rank"], header["report"], header["error"]) for _path, header, _r in parts if header.get("error")]
    left_out = sorted(
        [(ranks[m], m, unreadable.get(part_name(Path(m)), NO_PART)) for m in missing]
        + failed
    )  # fmt: skip
    if strict and left_out:
        rank, report, why = left_out[0]
        raise PartialAnalysis(
            f"rank {rank} ({report}): {why}", fix="map it again ('invoke analyze-part'), or merge without --strict"
        )
    good = [(path, header, results) for path, header, results in parts if not header.get("error")]
    if not good:
        rank, report, why = left_out[0]
        message, _sep, fix = why.partition("; fix: ")
        raise NsyskitError(f"no report of the run could be analyzed; rank {rank} ({report}): {message}", fix=fix)
    # The folder the parts were mapped into: a partial merge's own, so a tree names the folder a merge of parts names
    incomplete = left_out_lines(left_out, len(listed), Path(where.pop()) if len(where) == 1 else folder)
    # A file that is no listed report's part (a partial merge cut short): its ranks are named above as without a
    # part, and the file itself here with why, so no one looks for maps that ran
    own = {os.path.basename(report) + SUFFIX for report in listed.values()}  # part_name's, without a Path per report
    incomplete += [f"file left out: {why}" for name, why in sorted(unreadable.items()) if name not in own]
    damaged: list[str] = []  # parts whose header read but whose results do not (a damaged member): left out, named
    # run.json's, beside the reports; else the merge counts the ranks it takes
    world = world_size(lists[first[LISTING]]["reports"], 0)
    world = world if world.source == "run.json" else None
    analysis = merge(_streamed(good, damaged, strict), straggler_pct, first["unprofiled"], incomplete, world)
    analysis.incomplete += damaged
    if numbered_note:
        analysis.warnings.append(numbered_note)
    facts = {"folder": first["folder"], "missing": missing, "parts": len(parts), "left_out": left_out,
             "part_files": [(path, header.get(TIMELINE)) for path, header, _results in good]}  # fmt: skip
    return analysis, facts


def _streamed(
    parts: list[tuple[Path, dict[str, Any], list]], damaged: list[str], strict: bool
) -> Iterator[list[dict[str, Any]] | Block]:  # fmt: skip
    """Each part's results, read when the reduce asks for them and given the rank the merge numbered; a partial
    merge's consecutive parts as one block of its ranks (its tables sliced once, not per rank); a part that cannot be
    decoded is named in `damaged` (or stops the merge when `strict`)."""
    held: dict[Path, Block] = {}  # a partial merge's block, read once and dropped with its last part
    last = {path: index for index, (path, _header, _results) in enumerate(parts)}
    for run in _runs(parts):
        path, headers = parts[run[0]][0], [parts[index][1] for index in run]
        span = headers[0] if len(run) == 1 else {"first": headers[0]["first"], "count": sum(h["count"] for h in headers)}
        try:
            results = results_of(path, span, held)
        except AnalysisError as exc:
            if strict:
                raise
            for header in headers:
                line = header["damaged"] if header.get("damaged") else exc.one_line()
                damaged.append(f"rank {header['rank']} left out: {line}")
            continue
        finally:
            if last[path] == run[-1]:
                held.pop(path, None)
        if isinstance(results, Block):
            first = 0
            for header in headers:
                _give_rank(header, results.results[first : first + header["count"]], header["rank"], renumber=True)
                first += header["count"]
            results.one_rank_per_part = all(header["count"] == 1 for header in headers)
        else:
            _give_rank(headers[0], results, headers[0]["rank"], renumber=True)
        yield results


def _runs(parts: list[tuple[Path, dict[str, Any], list]]) -> list[list[int]]:
    """The parts' indices in runs the reduce takes at once: a partial merge's parts that follow one another in the
    merge's order and in its file (each a part of its own otherwise; a damaged part has no place in the file)."""
    runs: list[list[int]] = []
    for index, (path, header, _results) in enumerate(parts):
        before = parts[runs[-1][-1]] if runs else None
        if before and before[0] == path and "first" in before[1] and header.get("first") == before[1]["first"] + before[1]["count"]:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs


def _listing(listing: dict[str, list]) -> list[tuple[str, int, bool]]:
    """(report, rank, whether the rank is named) for every report a part's map listed."""
    return list(zip(listing["reports"], listing["ranks"], listing["named"], strict=True))


def _give_rank(header: dict[str, Any], results: list[dict[str, Any]], rank: int, renumber: bool = False) -> None:
    """Give a part the rank the merge numbered it (its results' ranks, from `rank` on, with their tables); with
    `renumber`, its results take the rank its header was given before they were read."""
    if header["rank"] == rank and not (renumber and results and results[0]["rank"] != rank):
        return
    header["rank"] = rank
    for offset, result in enumerate(results):
        result["rank"] = result["summary"]["rank"] = rank + offset
        for name in RANKED_KEYS:
            if name in result:  # (a block's ranks have no tables of their own: the reduce numbers its joined ones)
                result[name].columns["rank"] = np.full(len(result[name]), rank + offset, dtype=np.int64)
