"""The multi-rank timeline (gzipped Chrome trace JSON for ui.perfetto.dev), read back: events per rank and track."""

from __future__ import annotations

import collections
import gzip
import json

import numpy as np
from nsys_fixtures import Export, Kernel, Memop, Range, write_export

from nsyskit.analysis.present import timeline
from nsyskit.analysis.read.reader import ExportReader

NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm *, unsigned long, ncclWork *)"
WINDOW_START, WINDOW_END = 1_000, 9_000


def make_rank(path, rank: int):
    """One rank: a kernel before the window (left out), 3 GEMMs on stream 7 and 2 NCCL kernels on stream 20 inside
    it, a memcpy and a memset, 'step N' ranges, an NCCL-domain range with its size, and a range crossing a step."""
    kernels = [Kernel(100, 200, "warmup_kernel")]
    kernels += [Kernel(2_000 + i * 2_000, 2_800 + i * 2_000, "gemm", stream=7) for i in range(3)]
    kernels += [Kernel(2_500 + i * 2_000, 3_500 + i * 2_000, NCCL, stream=20) for i in range(2)]
    ranges = [Range(WINDOW_START, WINDOW_END, "profile_window", event_type=60)]
    ranges += [Range(1_500 + i * 2_500, 3_900 + i * 2_500, f"step {i}") for i in range(3)]
    ranges += [Range(2_400, 2_600, "ncclAllReduce (DDP bucket 0)", payload=(1 << 20) * (rank + 1), domain="NCCL")]
    ranges += [Range(3_000, 4_500, "async_io", event_type=60)]  # start/end range: overlaps step 0 and 1 without nesting
    memops = [Memop(1_200, 1_400, 4096, kind=1), Memop(1_500, 1_600, 512, kind=None)]
    return write_export(path / f"run_rank_{rank}.sqlite", Export(kernels=kernels, memops=memops, ranges=ranges))


def read_trace(path):
    data = json.loads(gzip.decompress(path.read_bytes()))
    events = data["traceEvents"]
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    slices = [e for e in events if e["ph"] == "X"]
    per_track = collections.Counter((e["pid"], tracks[(e["pid"], e["tid"])]) for e in slices)
    return data, processes, slices, per_track


def test_one_process_per_rank_with_tracks_per_stream_copies_nvtx_thread_and_nccl(tmp_path):
    for rank in range(2):
        make_rank(tmp_path, rank)
    target = tmp_path / "timeline.json.gz"
    assert timeline.write_timeline([tmp_path], target) == []
    data, processes, slices, per_track = read_trace(target)
    assert processes == {0: "rank 0 (node-a)", 1: "rank 1 (node-a)"}
    for rank in range(2):
        assert per_track[(rank, "GPU 0 stream 7")] == 3
        assert per_track[(rank, "GPU 0 stream 20")] == 2  # the kernel before the window is left out
        assert per_track[(rank, "GPU 0 memcpy/memset")] == 2
        assert per_track[(rank, "NCCL operations")] == 1
        nvtx = sum(
            n for (pid, track), n in per_track.items() if pid == rank and track.endswith(("NVTX", "NVTX (overlap 1)"))
        )
        assert nvtx == 6  # profile_window, 3 steps, the NCCL range, the crossing range (on an overlap lane)
    nccl = [e for e in slices if e["pid"] == 1 and e["cat"] == "nvtx" and e["name"].startswith("ncclAllReduce")]
    assert nccl[0]["args"]["size"] == "2.00 MB"
    assert min(e["ts"] for e in slices) == 0.0  # each rank starts at its window's start
    assert all(e["dur"] >= 0 for e in slices)


def test_slices_on_one_track_nest(tmp_path):
    make_rank(tmp_path, 0)
    target = tmp_path / "timeline.json.gz"
    timeline.write_timeline([tmp_path], target)
    _, _, slices, _ = read_trace(target)
    by_track = collections.defaultdict(list)
    for e in slices:
        by_track[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_track.values():
        stack = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], f"{start}-{end} crosses an enclosing slice"
            stack.append(end)


def test_the_cap_keeps_each_ranks_earliest_events_and_says_so(tmp_path):
    for rank in range(2):
        make_rank(tmp_path, rank)
    target = tmp_path / "timeline.json.gz"
    notes = timeline.write_timeline([tmp_path], target, max_events=8)
    assert len(notes) == 2 and "4 of 14 events kept" in notes[0]
    data, _, slices, _ = read_trace(target)
    assert collections.Counter(e["pid"] for e in slices) == {0: 4, 1: 4}
    assert data["metadata"]["notes"] == notes
    first = sorted(e["ts"] for e in slices if e["pid"] == 0)
    assert first == [0.0, 0.2, 0.5, 0.5]  # window, memcpy, memset and step 0: the first events in time


def test_nest_lanes_moves_only_crossing_slices():
    start = np.asarray([0, 10, 20, 15, 50])
    end = np.asarray([100, 30, 25, 40, 60])  # 15-40 crosses 10-30; the rest nest or follow
    assert timeline.nest_lanes(start, end).tolist() == [0, 0, 0, 1, 0]


def test_real_export_every_event_is_on_the_timeline(real_export, tmp_path):
    target = tmp_path / "timeline.json.gz"
    timeline.write_timeline([real_export], target, max_events=10**7)
    _, processes, slices, per_track = read_trace(target)
    sources = timeline.rank_sources([real_export])
    assert sorted(processes) == [rank for rank, _, _ in sources]  # one process per rank, as the analysis numbers them
    reader = ExportReader(real_export)
    kernels = expected = 0
    for _, _, pid in sources:
        nvtx = reader.nvtx_ranges(pid)
        nccl_ranges = sum(timeline.is_nccl_range(t, d) for t, d in zip(nvtx.text, nvtx.domain, strict=True))
        kernels += len(reader.kernels(pid))
        expected += (
            len(reader.kernels(pid)) + len(reader.memcpys(pid)) + len(reader.memsets(pid)) + len(nvtx) + nccl_ranges
        )
    assert len(slices) == expected  # no profile_window in these exports: the whole capture
    on_streams = sum(n for (_, track), n in per_track.items() if track.startswith("GPU") and "memcpy" not in track)
    assert on_streams == kernels
    assert all(" stream " in track for (_, track) in per_track if track.startswith("GPU") and "memcpy" not in track)


def test_kernels_on_the_timeline_carry_their_tables_short_names(real_export, tmp_path):
    """Each kernel slice is named as the rank's kernel table names it (told apart where short names collide)."""
    from nsyskit.analysis.trace import analyze_file

    target = tmp_path / "timeline.json.gz"
    timeline.write_timeline([real_export], target, max_events=10**7)
    data, _, slices, _ = read_trace(target)
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in data["traceEvents"] if e["name"] == "thread_name"}
    on_streams = [e for e in slices if " stream " in tracks[(e["pid"], e["tid"])]]  # kernels: one track per stream
    first_rank = min(rank for rank, _path, _pid in timeline.rank_sources([real_export]))  # rank_N in a name counts
    for result in analyze_file(first_rank, real_export):
        named = set(result["kernel_summary"]["short_name"].tolist())
        shown = {e["name"] for e in on_streams if e["pid"] == result["rank"]}
        assert shown == {name if len(name) <= timeline.NAME_WIDTH else name[: timeline.NAME_WIDTH - 1] + "…"
                         for name in named}  # fmt: skip
