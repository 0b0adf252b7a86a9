"""A multi-rank timeline of the profiled window as gzipped Chrome trace JSON, which ui.perfetto.dev opens.

One process per rank; tracks (threads in the format) per GPU stream, memcpy/memset per GPU, CPU thread NVTX ranges
and the rank's NCCL operations with their message sizes. Slices on one track must nest, so events that overlap
without nesting (NVTX start/end ranges, kernels of one GPU when the stream is unknown) go to extra lanes. Ranks are
aligned on the start of their profile window (each report has its own clock). A cap bounds the events: each rank
keeps its earliest events up to its share, and the trace says where it was cut.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nsyskit.analysis.compute import units
from nsyskit.analysis.compute.kernelnames import short_names
from nsyskit.analysis.read.records import Intervals, NvtxRanges

DEFAULT_MAX_EVENTS = 500_000
WINDOW_NAME = "profile_window"
NAME_WIDTH = 120


@dataclass
class Slice:
    """Events of one kind for one rank, before they are placed on tracks."""

    start: np.ndarray
    end: np.ndarray
    name: list[str]
    category: str
    track: np.ndarray  # track key per event (stream, device, thread id)
    args: list[dict] = field(default_factory=list)


@dataclass
class RankTimeline:
    """One rank's trace events and the note to show when the cap cut it."""

    rank: int
    events: list[dict]
    total: int
    note: str = ""


def profile_window(nvtx: NvtxRanges) -> tuple[int, int] | None:
    """(start, end) of the rank's NVTX 'profile_window' range(s), or None."""
    mask = np.asarray([t == WINDOW_NAME for t in nvtx.text], dtype=bool) if len(nvtx) else np.zeros(0, dtype=bool)
    return (int(nvtx.start[mask].min()), int(nvtx.end[mask].max())) if mask.any() else None


def nest_lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """A lane per event such that the events of one lane nest or follow each other (what a trace track needs)."""
    order = np.lexsort((-end, start))
    lanes = np.zeros(len(start), dtype=np.int64)
    stacks: list[list[int]] = []
    for i in order:
        s, e = int(start[i]), int(end[i])
        for lane, stack in enumerate(stacks):
            while stack and stack[-1] <= s:
                stack.pop()
            if not stack or e <= stack[-1]:
                stack.append(e)
                lanes[i] = lane
                break
        else:
            stacks.append([e])
            lanes[i] = len(stacks) - 1
    return lanes


def _cut(name: str) -> str:
    """A slice's name within NAME_WIDTH characters."""
    return name if len(name) <= NAME_WIDTH else name[: NAME_WIDTH - 1] + "…"


def is_nccl_range(text: str, domain: str) -> bool:
    """Whether an NVTX range is an NCCL operation (NCCL's domain, or a name starting with nccl)."""
    return domain.upper() == "NCCL" or text.lower().startswith("nccl")


def rank_slices(
    kernels: Intervals, kernel_names: dict[int, str], memcpys: Intervals, memsets: Intervals,
    kind_names: dict[int, str], nvtx: NvtxRanges,
) -> list[Slice]:  # fmt: skip
    """The rank's kernels, memcpys, memsets, NVTX ranges and NCCL operations as slices with their track keys."""
    slices = []
    if len(kernels):
        names = [kernel_names.get(int(n), f"<string {int(n)}>") for n in kernels.extra["name"]]
        stream = kernels.extra.get("stream")
        track = (kernels.device << 20) | (stream & NO_STREAM if stream is not None else NO_STREAM)
        cats = ["nccl" if "nccl" in n.lower() else "kernel" for n in names]
        # The kernel tables' short names (told apart where they collide), so that a kernel of a table is found here
        distinct = sorted(set(names))
        shown = dict(zip(distinct, map(_cut, short_names(distinct)), strict=True))
        slices.append(
            Slice(kernels.start, kernels.end, [shown[n] for n in names], "kernel", track, [{"cat": c} for c in cats])
        )
    for intervals, label in ((memcpys, "memcpy"), (memsets, "memset")):
        if not len(intervals):
            continue
        kinds = intervals.extra.get("kind")
        names = (
            [f"{label} {kind_names.get(int(k), k)}" for k in kinds] if kinds is not None else [label] * len(intervals)
        )
        args = [{"bytes": int(b), "size": units.size(int(b))} for b in intervals.extra["bytes"]]
        slices.append(Slice(intervals.start, intervals.end, names, "memory", intervals.device, args))
    if len(nvtx):
        payload_args = [{} if np.isnan(p) else {"payload": float(p), "size": units.size(p)} for p in nvtx.payload]
        texts = [t if not d else f"{t} @{d}" for t, d in zip(nvtx.text, nvtx.domain, strict=True)]
        slices.append(Slice(nvtx.start, nvtx.end, texts, "nvtx", nvtx.thread & 0xFFFFFF, payload_args))
        nccl = np.asarray([is_nccl_range(t, d) for t, d in zip(nvtx.text, nvtx.domain, strict=True)], dtype=bool)
        if nccl.any():
            index = np.flatnonzero(nccl)
            slices.append(
                Slice(nvtx.start[index], nvtx.end[index], [nvtx.text[i] for i in index], "nccl",
                      np.zeros(len(index), dtype=np.int64), [payload_args[i] for i in index])
            )  # fmt: skip
    return slices


CATEGORY_ORDER = {"kernel": 0, "memory": 1, "nccl": 2, "nvtx": 3}
NO_STREAM = (1 << 20) - 1


def track_name(category: str, key: int, lane: int) -> str:
    """The name of a track: kernels per GPU stream, copies per GPU, NCCL operations, NVTX per CPU thread."""
    suffix = f" (overlap {lane})" if lane else ""
    if category == "kernel":
        device, stream = key >> 20, key & NO_STREAM
        return f"GPU {device} kernels{suffix}" if stream == NO_STREAM else f"GPU {device} stream {stream}{suffix}"
    if category == "memory":
        return f"GPU {key} memcpy/memset{suffix}"
    if category == "nccl":
        return f"NCCL operations{suffix}"
    return f"thread {key} NVTX{suffix}"


def rank_timeline(
    rank: int, label: str, slices: list[Slice], budget: int, window: tuple[int, int] | None
) -> RankTimeline:
    """The trace events of one rank: slices inside its window, its earliest `budget` events, on nesting tracks."""
    origin = window[0] if window else min((int(s.start.min()) for s in slices if len(s.start)), default=0)
    kept: list[tuple[Slice, np.ndarray]] = []
    for piece in slices:
        mask = np.ones(len(piece.start), dtype=bool)
        if window:
            mask = (piece.end >= window[0]) & (piece.start <= window[1])
        kept.append((piece, np.flatnonzero(mask)))
    total = sum(len(i) for _, i in kept)
    note, cutoff = "", None
    if total > budget:
        starts = np.sort(np.concatenate([p.start[i] for p, i in kept]))
        cutoff = int(starts[max(budget, 1) - 1])
        note = (f"rank {rank}: {budget:,} of {total:,} events kept (--timeline-max-events), "
                f"up to {units.duration(cutoff - origin)} into the window")  # fmt: skip
    events: list[dict] = [
        {"ph": "M", "pid": rank, "name": "process_name", "args": {"name": label}},
        {"ph": "M", "pid": rank, "name": "process_sort_index", "args": {"sort_index": rank}},
    ]
    if note:
        events.append({"ph": "M", "pid": rank, "name": "process_labels", "args": {"labels": note}})
    tids: dict[tuple[str, int, int], int] = {}
    count = 0
    for piece, index in kept:
        if cutoff is not None:
            index = index[piece.start[index] <= cutoff][: max(budget - count, 0)]
        for key in np.unique(piece.track[index]) if len(index) else []:
            on_track = index[piece.track[index] == key]
            lanes = nest_lanes(piece.start[on_track], piece.end[on_track])
            for i, lane in zip(on_track, lanes, strict=True):
                track = (piece.category, int(key), int(lane))
                tid = tids.get(track)
                if tid is None:
                    tid = tids[track] = len(tids) + 1
                    order = CATEGORY_ORDER[piece.category] * 1_000_000 + tid
                    events.append(
                        {
                            "ph": "M",
                            "pid": rank,
                            "tid": tid,
                            "name": "thread_name",
                            "args": {"name": track_name(*track)},
                        }
                    )
                    events.append(
                        {"ph": "M", "pid": rank, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": order}}
                    )
                args = dict(piece.args[i]) if piece.args else {}
                category = args.pop("cat", piece.category)
                events.append({
                    "ph": "X", "pid": rank, "tid": tid, "name": piece.name[i], "cat": category,
                    "ts": (int(piece.start[i]) - origin) / 1000.0, "dur": max(int(piece.end[i] - piece.start[i]), 0) / 1000.0,
                    **({"args": args} if args else {}),
                })  # fmt: skip
                count += 1
    return RankTimeline(rank, events, total, note)


def write_trace(timelines: Iterator[RankTimeline], target: Path) -> list[str]:
    """Stream the ranks' events into `target` (gzipped JSON, rank by rank); returns the cap notes."""
    notes = []
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with gzip.open(partial, "wt", encoding="utf-8", compresslevel=6) as out:
        out.write('{"displayTimeUnit":"ns","traceEvents":[\n')
        first = True
        for timeline in timelines:
            for event in timeline.events:
                out.write(("" if first else ",\n") + json.dumps(event, separators=(",", ":")))
                first = False
            if timeline.note:
                notes.append(timeline.note)
        out.write("\n],\n" + json.dumps({"metadata": {"generator": "nsyskit", "notes": notes}})[1:])
    partial.replace(target)  # never leave a half-written trace under the final name
    return notes


def read_rank(rank: int, path: Path, budget: int, pid: int | None = None) -> RankTimeline:
    """One rank's events (one process of the report, or the whole file) as a RankTimeline."""
    from nsyskit.analysis.read.discover import open_export  # the facade's opener: exports .nsys-rep/.qdstrm as needed

    reader = open_export(path)
    try:
        kernels = reader.kernels(pid, stream=True)
        names = reader.strings(kernels.extra["name"]) if len(kernels) else {}
        nvtx = reader.nvtx_ranges(pid)
        kinds = reader.memcpy_kind_names()
        slices = rank_slices(kernels, names, reader.memcpys(pid), reader.memsets(pid), kinds, nvtx)
        host = reader.system_env.get("Hostname", "")
    finally:
        reader.close()
    label = f"rank {rank}" + (f" ({host})" if host else "")
    return rank_timeline(rank, label, slices, budget, profile_window(nvtx))


def rank_sources(paths: list[str | Path]) -> list[tuple[int, Path, int | None]]:
    """(rank, report, process) per rank, numbered as the analysis numbers them (trace.analyze_run).

    A report holding several processes with GPU activity is one rank per process; then every rank of the run
    is renumbered 0..N-1 in file order.
    """
    from nsyskit.analysis.read.discover import discover, open_export

    per_file = []
    for rank, path in discover(paths):
        reader = open_export(path)
        try:
            pids = reader.processes()
        finally:
            reader.close()
        per_file.append(
            [(rank + i, path, pid) for i, pid in enumerate(pids)] if len(pids) > 1 else [(rank, path, None)]
        )
    if all(len(entries) == 1 for entries in per_file):
        return [entries[0] for entries in per_file]
    return [(new, path, pid) for new, (_, path, pid) in enumerate(e for entries in per_file for e in entries)]


def write_timeline(
    paths: list[str | Path], target: Path, max_events: int = DEFAULT_MAX_EVENTS, progress=None
) -> list[str]:
    """Write the run's timeline (trace.json.gz) to `target`, at most `max_events` events over all ranks; the notes.

    `progress(done, total)` is called after each rank when given.
    """
    ranks = rank_sources(paths)
    processes = Counter(path for _rank, path, _pid in ranks)
    budget = max(1, max_events // max(len(processes), 1))  # each report's share, split among its processes

    def timelines() -> Iterator[RankTimeline]:
        for done, (rank, path, pid) in enumerate(ranks, start=1):
            yield read_rank(rank, path, max(1, budget // processes[path]), pid)
            if progress:
                progress(done, len(ranks))

    return write_trace(timelines(), target)
