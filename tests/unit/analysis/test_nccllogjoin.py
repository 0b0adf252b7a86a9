"""Sizes from the rank's NCCL log when the trace holds none: its COLL lines joined to the trace's NCCL API ranges in
call order; taken only when the join cannot be wrong, else the sizes stay unknown and one line says why. When NCCL
stamped its lines, their times confirm the fit against the export's session start, pick one among fits that give
different sizes, or refuse a log whose times disagree with the trace's."""

from __future__ import annotations

import lzma
import shutil
import sqlite3
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
from nsys_fixtures import Export, Kernel, Launch, Range, write_export

from nsyskit.analysis import run_analysis
from nsyskit.analysis.compute.nccllogjoin import join_calls
from nsyskit.analysis.read.discover import open_export
from nsyskit.analysis.trace import RankTrace
from nsyskit.nccllog import analyze
from nsyskit.nccllog.scan.calls import read_calls
from nsyskit.ranks import launch
from tests.unit.nccl_real import real_folder

REAL = Path(__file__).resolve().parents[2] / "data" / "real"
DTYPE_FP32, DTYPE_BF16 = 7, 9
KERNEL = {"AllReduce": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
          "AllGather": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
          "ReduceScatter": "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"}  # fmt: skip
COMMS = {"0x5501": 8, "0x5502": 2}
CALL_GAP_NS = 20_000
# The session's start as nsys records it: UTC ns, and its UTC and local texts (a target 8 hours behind UTC).
START = datetime(2026, 11, 29, 2, 1, 41, 250_000, tzinfo=UTC)
SESSION = (int(START.timestamp()) * 10**9 + 250_000_000, "2026-11-29T02:01:41", "2026-11-28T18:01:41")


def run_calls(steps: int) -> list[tuple[str, str, int]]:
    """A training run's calls (op, communicator, element count): per step two gradient buckets' AllReduce on the
    8-rank communicator interleaved with an AllGather and a ReduceScatter on the 2-rank one, sizes per position."""
    step = [("AllReduce", "0x5501", 1 << 20), ("AllGather", "0x5502", 3000), ("AllReduce", "0x5501", 1 << 18),
            ("ReduceScatter", "0x5502", 5000)]  # fmt: skip
    return [("Broadcast", "0x5501", 999)] + step * steps  # a start-up broadcast first


def log_text(calls: list[tuple[str, str, int]], stamps=None) -> str:
    """The COLL lines NCCL writes for the calls, opCount per communicator, as a 2.28 INFO log; `stamps`: each
    line's prefix (NCCL_DEBUG_TIMESTAMP_FORMAT's output), none when None."""
    counts: dict[str, int] = {}
    lines = ["host-a:4242:4242 [0] NCCL INFO NCCL version 2.28.9+cuda13.0"]
    for index, (op, comm, count) in enumerate(calls):
        number = counts[comm] = counts.get(comm, -1) + 1
        stamp = stamps[index] if stamps is not None else ""
        lines.append(f"{stamp}host-a:4242:4250 [0] NCCL INFO {op}: opCount {number:x} sendbuff 0x7f01 recvbuff 0x7f02 "
                     f"count {count} datatype {DTYPE_FP32} op 0 root 0 comm {comm} [nranks={COMMS[comm]}] "
                     "stream 0x55d2")  # fmt: skip
    return "\n".join(lines) + "\n"


def trace_of(calls: list[tuple[str, str, int]], session_start=None) -> Export:
    """A rank whose NCCL API ranges (no payload: an export without the values) each launch one kernel, 20 us
    apart from 1 us after the session's start; `session_start`: TARGET_INFO_SESSION_START_TIME's row."""
    ranges, launches, kernels, at = [], [], [], 1_000
    for corr, (op, _comm, _count) in enumerate(calls, start=1):
        ranges.append(Range(at, at + 500, f"nccl{op}", domain="NCCL"))
        launches.append(Launch(at + 100, at + 200, corr))
        kernels.append(Kernel(at + 300, at + 300 + 10_000 + corr, KERNEL[op], correlation=corr))
        at += CALL_GAP_NS
    return Export(kernels=kernels, ranges=ranges, launches=launches, session_start=session_start)


def operations(path: Path):
    reader = open_export(path)
    try:
        return RankTrace(0, reader.path, reader).nccl_operations(), list(reader.warnings)
    finally:
        reader.close()


def test_a_window_that_starts_mid_run_gets_the_logs_sizes_and_each_communicators_size(tmp_path):
    run = run_calls(steps=30)
    window = run[1 + 4 * 10 : 1 + 4 * 16]  # steps 10-15 profiled: its first call is the log's 42nd
    write_export(tmp_path / "job_rank_0.sqlite", trace_of(window))
    (tmp_path / "job_rank_0.nccl.log").write_text(log_text(run))
    table, warnings = operations(tmp_path / "job_rank_0.sqlite")
    assert table["size_bytes"].tolist() == [count * 4.0 for _op, _comm, count in window]  # fp32: 4 bytes each
    assert set(table["nranks"]) == {0}  # n: the run's table takes it from the log, labelled so (below)
    assert set(table["size_origin"]) == {"log"} and len(warnings) == 1
    assert "NCCL message sizes from job_rank_0.nccl.log" in warnings[0] and "places that all give the same" in warnings[0]


def test_the_joined_sizes_reach_the_runs_bandwidth_table_with_each_communicators_logged_size(tmp_path):
    """The run's sizes table: the joined sizes give every operation a bandwidth; n is each communicator's
    [nranks=N] from the log (8 for the AllReduces, 2 for the others), said to come from it."""
    run = run_calls(steps=4)
    write_export(tmp_path / "job_rank_0.sqlite", trace_of(run[1:]))
    (tmp_path / "job_rank_0.nccl.log").write_text(log_text(run))
    analysis, _html = run_analysis([tmp_path], write=False)
    rows = {(r["op"], r["nranks"]): r for r in analysis.nccl_sizes.rows()}
    assert set(rows) == {("AllReduce", 8), ("AllGather", 2), ("ReduceScatter", 2)}
    assert all(r["bucket"] != "unknown" and r["bw_count"] == r["count"] for r in rows.values())
    assert {r["n_source"] for r in rows.values()} == {"nccl log"}
    assert analysis.nccl.sums["log_sized"] == len(run) - 1 and analysis.nccl.sums["payload_sized"] == 0


def test_a_trace_whose_calls_are_not_in_the_log_keeps_unknown_sizes_and_says_why(tmp_path):
    run = run_calls(steps=5)
    other = [("AllGather", "0x5502", 1), ("AllGather", "0x5502", 1), ("AllReduce", "0x5501", 1)]  # never in a row
    write_export(tmp_path / "job_rank_0.sqlite", trace_of(other))
    (tmp_path / "job_rank_0.nccl.log").write_text(log_text(run))
    table, warnings = operations(tmp_path / "job_rank_0.sqlite")
    assert np.isnan(table["size_bytes"]).all() and set(table["size_origin"]) == {""}
    assert len(warnings) == 1 and "stay unknown: the trace's 3 NCCL calls do not occur in that order" in warnings[0]


def test_a_window_that_fits_places_with_different_sizes_is_refused():
    # AllReduce only, sizes cycling 1, 2, 3: a window of two AllReduces fits everywhere with different sizes
    logged = ["AllReduce"] * 9
    join = join_calls(["AllReduce", "AllReduce"], logged, np.asarray([1, 2, 3] * 3, dtype=float),
                      np.ones(9, dtype=np.int64), "r.nccl.log")  # fmt: skip
    assert np.isnan(join.nbytes).all() and "fit 8 places" in join.line and "give different sizes" in join.line


def test_one_place_and_a_log_shorter_than_the_trace():
    join = join_calls(["AllGather", "Send/Recv"], ["AllReduce", "AllGather", "Send", "AllReduce"],
                      np.asarray([8.0, 16.0, 32.0, 8.0]), np.asarray([4, 4, 2, 4]), "r.nccl.log")  # fmt: skip
    assert join.nbytes.tolist() == [16.0, 32.0] and join.nranks.tolist() == [4, 2] and "(call 2)" in join.line
    short = join_calls(["AllReduce"] * 3, ["AllReduce"], np.asarray([8.0]), np.asarray([2]), "r.nccl.log")
    assert np.isnan(short.nbytes).all() and "fewer than the trace's 3" in short.line


def test_the_kits_real_h200_run_refuses_a_join_that_could_be_wrong(tmp_path):
    """The kit's own H200 GPT-2 run (tests/data/real): nsys 2022.4 recorded 78 ncclAllReduce ranges without payload
    in steps 10-15; its NCCL log holds 639 AllReduce calls, DDP's buckets of different sizes repeating per step. The
    window's all-AllReduce sequence fits hundreds of places giving different sizes: the sizes stay unknown, said."""
    (tmp_path / "h200_rank_0.sqlite").write_bytes(
        lzma.decompress((REAL / "nsys-exports" / "h200_gpt2_ddp_nsys2022.4_cuda13.sqlite.xz").read_bytes())
    )
    shutil.copy(REAL / "nccl-logs" / "h200_gpt2_ddp_nccl2.28.9.nccl.log.gz", tmp_path / "h200_rank_0.nccl.log.gz")
    table, warnings = operations(tmp_path / "h200_rank_0.sqlite")
    assert len(table) == 78 and np.isnan(table["size_bytes"]).all()
    (line,) = [w for w in warnings if "NCCL message sizes" in w]
    assert "stay unknown: the trace's 78 NCCL calls fit" in line and "which give different sizes" in line


def ddp_calls(steps: int) -> list[tuple[str, str, int]]:
    """DDP on one rank: per step three AllReduce buckets of different sizes; a window of AllReduces fits every
    bucket position, so call order alone cannot place it (as in the kit's real H200 run above)."""
    return [("AllReduce", "0x5501", count) for _step in range(steps) for count in (1 << 20, 1 << 18, 4096)]


def nccl_stamps(run_start: datetime, count: int, fmt: str = launch.NCCL_TIMESTAMP_FORMAT, zone=UTC) -> list[str]:
    """What NCCL 2.26+ prints before each of `count` calls made CALL_GAP_NS apart from `run_start`, with the
    NCCL_DEBUG_TIMESTAMP_FORMAT the kit sets: strftime in the target's zone, %Nf as N sub-second digits, '_' a space."""
    stamps = []
    for index in range(count):
        when = (run_start + timedelta(microseconds=index * CALL_GAP_NS / 1000)).astimezone(zone)
        text = fmt.replace("%6f", f"{when.microsecond:06d}").replace("_", " ")
        stamps.append(when.strftime(text))
    return stamps


def timed_pair(tmp_path: Path, run, first: int, length: int, log_start: datetime, **stamping) -> tuple:
    """A trace of run[first:first + length] whose first call starts 1 us into the session, and the run's stamped
    log whose call `first` NCCL printed at `log_start` (the others CALL_GAP_NS apart); the join's table and lines."""
    write_export(tmp_path / "job_rank_0.sqlite", trace_of(run[first : first + length], SESSION))
    run_start = log_start - timedelta(microseconds=first * CALL_GAP_NS / 1000)
    (tmp_path / "job_rank_0.nccl.log").write_text(log_text(run, nccl_stamps(run_start, len(run), **stamping)))
    return operations(tmp_path / "job_rank_0.sqlite")


ON_TIME = START + timedelta(microseconds=1 + 5)  # NCCL prints the COLL line 5 us after the range opens


def test_the_logs_times_confirm_the_order_fit(tmp_path):
    run = run_calls(steps=30)
    table, warnings = timed_pair(tmp_path, run, 41, 24, ON_TIME)
    assert table["size_bytes"].tolist() == [count * 4.0 for _op, _comm, count in run[41:65]]
    (line,) = warnings
    assert "places that all give the same sizes; the log's times agree within 5 us" in line


def test_the_logs_times_pick_the_one_fit_among_fits_with_different_sizes(tmp_path):
    run = ddp_calls(steps=20)
    window = run[31:37]  # starts at the second bucket of step 10: order alone fits 3 bucket positions per step
    table, warnings = timed_pair(tmp_path, run, 31, 6, ON_TIME)
    assert table["size_bytes"].tolist() == [count * 4.0 for _op, _comm, count in window]
    assert set(table["size_origin"]) == {"log"}
    (line,) = warnings
    assert "(call 32, picked by the log's times among 55 places with different sizes: 5 us from the trace's, " in line


def test_stamps_in_local_time_without_a_zone_use_the_exports_offset(tmp_path):
    """NCCL's default format, '[%F %T] ': whole seconds of the target's local time; the export's utcTime and
    localTime give the offset (-8 h). Whole seconds cannot tell steps 20 us apart, but confirm a run's log."""
    run = run_calls(steps=30)
    table, warnings = timed_pair(tmp_path, run, 41, 24, ON_TIME, fmt="[%F %T] ", zone=timezone(timedelta(hours=-8)))
    assert table["size_bytes"].tolist() == [count * 4.0 for _op, _comm, count in run[41:65]]
    assert "the log's times agree within" in warnings[0]
    ddp = ddp_calls(steps=20)
    table, warnings = timed_pair(tmp_path, ddp, 31, 6, ON_TIME, fmt="[%F %T] ", zone=timezone(timedelta(hours=-8)))
    assert np.isnan(table["size_bytes"]).all() and "its times do not tell them apart" in warnings[0]


def test_a_log_whose_times_contradict_the_order_fit_is_refused(tmp_path):
    """The calls fit by order, but the log's times lie an hour after the trace's: another run's log beside the
    report (a rerun into the same folder). The sizes stay unknown; the line says why."""
    run = run_calls(steps=30)
    table, warnings = timed_pair(tmp_path, run, 41, 24, ON_TIME + timedelta(hours=1))
    assert np.isnan(table["size_bytes"]).all() and set(table["size_origin"]) == {""}
    (line,) = warnings
    assert "stay unknown: the trace's 24 NCCL calls fit 25 places among the calls job_rank_0.nccl.log logs, " in line
    assert "but its times lie 1.0 h from the trace's at the nearest (at most 1.0 s)" in line
    assert "another run's log, or a clock that is off" in line


def test_an_export_without_a_session_start_joins_by_order_alone(tmp_path):
    run = run_calls(steps=30)
    write_export(tmp_path / "job_rank_0.sqlite", trace_of(run[41:65]))  # no TARGET_INFO_SESSION_START_TIME
    stamps = nccl_stamps(ON_TIME + timedelta(hours=1), len(run))  # times that would disagree: not read
    (tmp_path / "job_rank_0.nccl.log").write_text(log_text(run, stamps))
    table, warnings = operations(tmp_path / "job_rank_0.sqlite")
    assert not np.isnan(table["size_bytes"]).any() and "places that all give the same sizes)" in warnings[0]


def test_every_real_export_states_its_session_start_on_the_wall_clock(real_export):
    """Every nsys at hand (2020.5-2026.2) writes the session's start: UTC ns and the target's offset from UTC."""
    reader = open_export(real_export)
    try:
        clock = reader.session_clock
    finally:
        reader.close()
    with sqlite3.connect(real_export) as con:
        utc_text, local_text = con.execute("SELECT utcTime, localTime FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    started = datetime.fromtimestamp(clock.utc_ns // 10**9, UTC)
    assert started.strftime("%Y-%m-%dT%H:%M:%S") == utc_text
    assert (started + timedelta(seconds=clock.utc_offset_s)).strftime("%Y-%m-%dT%H:%M:%S") == local_text


def test_the_join_reads_every_real_logs_calls_as_nccl_log_does():
    """One parser of a COLL line: per real log (other people's and the kit's), the calls the join reads, counted per
    op, bytes and communicator size, are the nccl-log scanner's (lines glued to nccl-tests' rows included; a line
    cut before its '[nranks=N]' is in neither), and a table row's number glued to the host makes no process."""
    logs = sorted(real_folder().glob("*.log")) + sorted((REAL / "nccl-logs").glob("*.nccl.log.gz"))
    for log in logs:
        calls = read_calls(log)
        counted = Counter(zip(calls.op, calls.nbytes.tolist(), calls.nranks.tolist(), strict=True))
        rows = analyze([log]).communicators
        scanned = {(row["op"], float(row["bytes"]), row["nranks"]): row["calls"] for row in rows}
        assert counted == scanned, log.name
    assert read_calls(real_folder() / "01-nccltests-2.27-roce.log").processes == 1  # mew0:64904, '0mew0', '1mew0'
