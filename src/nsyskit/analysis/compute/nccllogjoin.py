"""Message sizes from the rank's NCCL log for the NCCL calls whose size the trace does not hold (an export without
the payload values, an nsys that cannot export them): the log's COLL lines joined to the trace's NCCL API ranges.

Both are one process's calls in call order, every communicator interleaved as the process made them. The trace
holds a window of the run (it starts mid-run, so its first call is not the log's first), and names no communicator:
the join finds where the trace's sequence of collectives lies in the log's. Each place it fits is a candidate;
the sizes (and communicator sizes) are taken only when every candidate gives the same ones, i.e. when the join
cannot be wrong; otherwise they stay unknown and one line says why. A training loop repeats its calls every step,
so a window usually fits at many places that all give the same sizes.

When NCCL stamped its lines (2.26+, as the kit's runs ask: ranks/launch.py), the times say which place is the
window: the trace's calls on the wall clock (the export's session start plus their time in it) against the logged
times of each place. The nearest place must lie within TOLERANCE_S of the trace (else the log and the trace
disagree: another run's log, or a clock that is off, and the join is refused), and a place giving other sizes must
lie clearly farther (twice as far, plus the stamps' resolution), else the times cannot tell them apart either.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsyskit.analysis.compute.nccl import collective

HASH_BASE = 0x9E3779B97F4A7C15  # odd: invertible modulo 2^64, so a window's hash is its prefix sums' difference
MAX_CODES = 255  # the collectives are coded one byte each (a handful exist)
# How far a logged call's stamp may lie from the trace's time of the same call. NCCL prints the COLL line as the call
# starts, microseconds after the NVTX range opens; what remains is the clocks': the export's wall-clock start and its
# own timeline drift apart by NTP's slew (up to 0.5 ms per s) over a long run. A step of the loop moves a wrong
# place by its step time; another run's log lies minutes to days away.
TOLERANCE_S = 1.0
CLOCK_SAMPLES = 16  # the calls of the window whose times are compared, evenly spread (a place's offset: their median)
OFFSET_BLOCK = 1 << 16  # places whose offsets are computed at once


@dataclass(frozen=True)
class Clocks:
    """The trace's calls (call order) and the logged calls on one clock, UTC seconds (NaN: a logged call without a
    stamp); resolution_s: the logged stamps' last digit (1 s for NCCL's default format)."""

    trace_s: np.ndarray
    logged_s: np.ndarray
    resolution_s: float


@dataclass(frozen=True)
class Join:
    """Per trace call: the logged bytes and nranks (NaN / 0 where no join), and the line saying how or why not."""

    nbytes: np.ndarray
    nranks: np.ndarray
    line: str


def join_calls(
    trace_ops: list[str], logged_ops: list[str], nbytes: np.ndarray, nranks: np.ndarray, where: str,
    clocks: Clocks | None = None,
) -> Join:  # fmt: skip
    """Join the trace's calls (collectives, in call order) to the logged ones (ops as logged, bytes, nranks); with
    `clocks`, the times confirm the place, or pick it among places with different sizes."""
    count = len(trace_ops)
    unknown = Join(np.full(count, np.nan), np.zeros(count, dtype=np.int64), "")
    if not count:
        return unknown
    vocabulary: dict[str | None, int] = {}
    trace_codes = bytes(vocabulary.setdefault(op, len(vocabulary) + 1) for op in trace_ops)
    logged = [collective(op) for op in logged_ops]
    if len(vocabulary) > MAX_CODES or len(logged) < count:
        return _refused(unknown, f"{where} logs {len(logged):,} collective calls, fewer than the trace's {count:,} "
                                 "NCCL calls: it is not this process's log, or it was cut short")  # fmt: skip
    log_codes = bytes(vocabulary.get(op, 0) for op in logged)
    places = _places(log_codes, trace_codes)
    if not places:
        return _refused(unknown, f"the trace's {count:,} NCCL calls do not occur in that order among the "
                                 f"{len(logged):,} calls {where} logs: not this process's log, or another run's")  # fmt: skip
    keys = _keys(nbytes, nranks)
    starts = np.asarray(places, dtype=np.int64)
    window = _window_hashes(keys, count, starts)
    timed = clocks is not None and not np.isnan(clocks.logged_s).all()
    if not timed:
        first, last = places[0], places[-1]
        if (window != window[0]).any() or not np.array_equal(keys[last:last + count], keys[first:first + count]):
            return _refused(unknown, f"the trace's {count:,} NCCL calls fit {len(places):,} places among the calls "
                                     f"{where} logs, which give different sizes; NCCL 2.26+ with "
                                     "NCCL_DEBUG_TIMESTAMP_LEVELS stamps each line, which would place them")  # fmt: skip
        how = f"call {first + 1:,}" if len(places) == 1 else f"{len(places):,} places that all give the same sizes"
    else:
        first, how = _timed_place(starts, window, clocks, count, where)
        if first < 0:
            return _refused(unknown, how)
    sizes, ranks = nbytes[first : first + count].astype(np.float64), nranks[first : first + count].astype(np.int64)
    return Join(sizes, ranks, f"NCCL message sizes from {where}: the trace's {count:,} NCCL calls joined to its COLL "
                              f"lines in call order ({how})")  # fmt: skip


def _timed_place(starts: np.ndarray, window: np.ndarray, clocks: Clocks, count: int, where: str) -> tuple[int, str]:
    """(the place the times pick, how) or (-1, why not): each place's offset is the median of logged minus trace
    times over CLOCK_SAMPLES calls of the window; the nearest must be within TOLERANCE_S, and every place giving
    other sizes clearly farther."""
    offsets = _offsets(starts, clocks, count)
    best = int(np.argmin(offsets))
    if not np.isfinite(offsets[best]):
        return -1, f"{where} stamps none of the calls the trace's {count:,} NCCL calls fit"
    first, near = int(starts[best]), offsets[best]
    fits = f"{len(starts):,} place{'s' if len(starts) > 1 else ''}"
    if near > TOLERANCE_S + clocks.resolution_s:
        return -1, (f"the trace's {count:,} NCCL calls fit {fits} among the calls {where} logs, but its times lie "
                    f"{_seconds(near)} from the trace's at the nearest (at most {_seconds(TOLERANCE_S)}): another "
                    "run's log, or a clock that is off")  # fmt: skip
    others = offsets[window != window[best]]
    rival = float(others.min()) if len(others) else np.inf
    if rival <= 2 * near + clocks.resolution_s:
        return -1, (f"the trace's {count:,} NCCL calls fit {fits} among the calls {where} logs, which give "
                    f"different sizes, and its times do not tell them apart ({_seconds(near)} and "
                    f"{_seconds(rival)} from the trace's)")  # fmt: skip
    if np.isfinite(rival):
        return first, (f"call {first + 1:,}, picked by the log's times among {fits} with different sizes: "
                       f"{_seconds(near)} from the trace's, the next {_seconds(rival)}")  # fmt: skip
    where_fit = f"call {first + 1:,}" if len(starts) == 1 else f"{fits} that all give the same sizes"
    return first, f"{where_fit}; the log's times agree within {_seconds(near)}"


def _offsets(starts: np.ndarray, clocks: Clocks, count: int) -> np.ndarray:
    """Per place, |median of logged minus trace times| over CLOCK_SAMPLES calls of the window (inf: none stamped);
    in blocks of places, so a long log's million places take megabytes, not a gigabyte."""
    sample = np.unique(np.linspace(0, count - 1, min(count, CLOCK_SAMPLES)).astype(np.int64))
    offsets = np.full(len(starts), np.inf)
    for block in range(0, len(starts), OFFSET_BLOCK):
        at = starts[block : block + OFFSET_BLOCK]
        gaps = clocks.logged_s[at[:, None] + sample[None, :]] - clocks.trace_s[sample][None, :]
        stamped = ~np.isnan(gaps).all(axis=1)
        offsets[block : block + OFFSET_BLOCK][stamped] = np.abs(np.nanmedian(gaps[stamped], axis=1))
    return offsets


def _seconds(value: float) -> str:
    """A time offset in a person's unit: the largest of us, ms, s, min, h it reaches rounded (1.0 h, not 3600.0 s)."""
    units = ((3600.0, "h"), (60.0, "min"), (1.0, "s"), (1e-3, "ms"))
    scale, unit = next(((scale, unit) for scale, unit in units if value >= 0.9995 * scale), (1e-6, "us"))
    return f"{value / scale:.0f} us" if unit == "us" else f"{value / scale:.1f} {unit}"


def _refused(unknown: Join, why: str) -> Join:
    """No sizes, and why: the sizes stay unknown."""
    return Join(unknown.nbytes, unknown.nranks, f"NCCL message sizes stay unknown: {why}")


def _places(haystack: bytes, needle: bytes) -> list[int]:
    """Every start in `haystack` where `needle` occurs (overlapping ones too): C's search, one call per place."""
    places, at = [], haystack.find(needle)
    while at >= 0:
        places.append(at)
        at = haystack.find(needle, at + 1)
    return places


def _keys(nbytes: np.ndarray, nranks: np.ndarray) -> np.ndarray:
    """One 64-bit number per logged call standing for its (bytes, nranks); an unknown size is its own value."""
    size = np.where(np.isnan(nbytes), -1, nbytes).astype(np.int64).view(np.uint64)
    return size * np.uint64(1_000_003) + nranks.astype(np.uint64) + np.uint64(1)


def _window_hashes(keys: np.ndarray, length: int, starts: np.ndarray) -> np.ndarray:
    """A polynomial hash of keys[s:s+length] for each start s, all at once: prefix sums of key x base^-i (mod 2^64,
    numpy's unsigned arithmetic wraps) differenced, times base^s; equal windows hash equal wherever they start."""
    inverse = pow(HASH_BASE, -1, 1 << 64)
    with np.errstate(over="ignore"):
        down = np.cumprod(np.r_[np.uint64(1), np.full(len(keys) - 1, inverse, dtype=np.uint64)], dtype=np.uint64)
        up = np.cumprod(np.r_[np.uint64(1), np.full(len(keys) - 1, HASH_BASE, dtype=np.uint64)], dtype=np.uint64)
        prefix = np.r_[np.uint64(0), np.cumsum(keys * down, dtype=np.uint64)]
        return (prefix[starts + length] - prefix[starts]) * up[starts]


def with_logged_sizes(ops, calls, session=None) -> tuple:
    """(the operations table with sizes from the log `calls` (scan.calls.LoggedCalls) where the trace's NCCL API
    ranges hold none, size_origin 'log'; the line saying how, or why not: '' when nothing was tried). `session`
    (read.reader.SessionClock) puts the trace on the wall clock, for a log whose lines NCCL stamped."""
    from nsyskit.analysis.compute.nccl import BUCKET_LABELS, SIZE_ORIGINS, size_bucket_codes
    from nsyskit.analysis.compute.table import Table

    api = _api_calls(ops)
    if calls is None or not wants_log(ops):
        return ops, ""  # no log, no NCCL API ranges, or the trace states their sizes
    where = f"{calls.path.name}"
    if calls.processes > 1:
        return ops, (f"NCCL message sizes stay unknown: {where} holds {calls.processes} processes' calls; the kit's "
                     "runs write one log per rank (NCCL_DEBUG_FILE=NAME.nccl.log)")  # fmt: skip
    order = api[np.argsort(ops["start_ns"][api], kind="stable")]  # call order
    clocks = _clocks(ops["start_ns"][order], calls, session)
    joined = join_calls(ops["op"][order].tolist(), calls.op, calls.nbytes, calls.nranks, where, clocks)
    if np.isnan(joined.nbytes).all():
        return ops, joined.line
    columns = dict(ops.columns)
    sizes, origin = columns["size_bytes"].copy(), columns["size_origin"].copy()
    sizes[order] = joined.nbytes
    origin[order[~np.isnan(joined.nbytes)]] = SIZE_ORIGINS[3]
    # n stays as the trace states it (NO_NRANKS): the run's sizes table takes the log's [nranks=N] for the
    # collective and size (ncclbandwidth.logged_sizes) and says so ('nccl log'); the digest's kinds record only
    # whether the report states n, so a logged n written here would read as the report's.
    columns.update(size_bytes=sizes, size_origin=origin,
                   bucket=np.asarray(BUCKET_LABELS, dtype=object)[size_bucket_codes(sizes)])  # fmt: skip
    coded = {name: value for name, value in ops.coded.items() if name not in ("size_bytes", "bucket", "size_origin")}
    return Table(columns, coded=coded), joined.line


def _clocks(start_ns: np.ndarray, calls, session) -> Clocks | None:
    """The trace's calls (their NVTX ranges' starts) and the logged ones in UTC seconds; None without stamps or
    without the export's session start. A stamp without a zone is the target's local time: the export's offset."""
    if session is None or not calls.stamped:
        return None
    zones = calls.zones
    if session.utc_offset_s is not None:
        zones = np.where(np.isnan(zones), session.utc_offset_s, zones)
    trace_s = session.utc_ns / 1e9 + start_ns.astype(np.float64) / 1e9
    return Clocks(trace_s, calls.stamps - zones, calls.resolution_s)


def _api_calls(ops) -> np.ndarray:
    """The rows of NCCL's own API ranges (one per call, as the log's COLL lines)."""
    return np.flatnonzero(ops["origin"] == "nccl-nvtx") if len(ops) else np.empty(0, dtype=np.int64)


def wants_log(ops) -> bool:
    """Whether the trace has NCCL API ranges and states none of their sizes: the log may give them."""
    api = _api_calls(ops)
    return bool(len(api)) and bool(np.isnan(ops["size_bytes"][api]).all())


def joined_to_log_beside(ops, report, session=None) -> tuple:
    """with_logged_sizes with the rank's NCCL log beside its report (the kit's NAME.nccl.log), read only when the
    trace needs it: the facade's one step that reads a file for this join."""
    from nsyskit.nccllog.scan.calls import log_beside, read_calls

    log = log_beside(report) if wants_log(ops) else None
    return with_logged_sizes(ops, read_calls(log), session) if log is not None else (ops, "")
