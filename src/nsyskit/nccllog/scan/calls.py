"""One rank's NCCL log as its collective calls in call order (op, message bytes, communicator, its size, when NCCL
stamped it): what the trace's analysis joins to NCCL ranges whose sizes the trace does not hold
(analysis/compute/nccllogjoin.py).

The kit's runs write one NCCL_DEBUG_FILE per rank (NAME.nccl.log beside NAME's report) with COLL lines
('<Op>: opCount <hex> sendbuff .. recvbuff .. count N datatype D op O root R comm 0x.. [nranks=N] stream 0x..'),
one per call, in the order the process made them; NCCL 2.26+ starts each with the stamp the kit asks for
('[2026-11-29 02:01:41.123456 +0000] '). Bytes are count x the datatype's size: the per-rank size NCCL's NVTX
payload states too (AllGather's send count, ReduceScatter's receive count, AlltoAll's per-peer count). The line
layout is the nccl-log scanner's (scan/lines.py): one parser of a COLL line.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nsyskit.nccllog.scan.dtypes import DATATYPES
from nsyskit.nccllog.scan.lines import STAMPED_CALL, clean_source, fix_glued_hosts, split_source

LOG_SUFFIXES = (".nccl.log", ".nccl.log.gz")


@dataclass(frozen=True)
class LoggedCalls:
    """A process's collective calls in call order: op as logged (AllReduce, Send...), bytes, communicator, nranks;
    `processes`: the distinct host:pid sources (one for a rank's own log). `stamps`: each call's time as NCCL
    printed it, in seconds since the epoch read as if it were UTC (NaN: no stamp); `zones`: the stamp's offset
    from UTC in seconds (NaN: the stamp named none, local time); `resolution_s`: the coarsest stamp's last digit."""

    path: Path
    op: list[str]
    nbytes: np.ndarray
    comm: list[str]
    nranks: np.ndarray
    processes: int
    stamps: np.ndarray
    zones: np.ndarray
    resolution_s: float = 1.0

    def __len__(self) -> int:
        return len(self.op)

    @property
    def stamped(self) -> bool:
        """Whether NCCL stamped the calls (2.26+ with NCCL_DEBUG_TIMESTAMP_LEVELS holding INFO)."""
        return bool(len(self.stamps)) and not np.isnan(self.stamps).all()


def log_beside(report: Path) -> Path | None:
    """The rank's NCCL log the kit's wrapper writes beside its report (NAME.nccl.log, or gzipped), else None."""
    stem = report.with_suffix("").name  # NAME.sqlite, NAME.nsys-rep (a host name in NAME may hold dots)
    return next((p for p in (report.with_name(stem + s) for s in LOG_SUFFIXES) if p.is_file()), None)


def read_calls(path: Path) -> LoggedCalls:
    """The collective calls of an NCCL log: lines cut before their '[nranks=N]' are left out; a datatype NCCL does
    not define gives no size (NaN)."""
    text = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    found = [row for row in STAMPED_CALL.findall(text) if row[-1]]  # row: stamp (4), source, op, TAIL's 4 groups
    sizes = {code: size for code, (_name, size) in DATATYPES.items()}
    nbytes = np.asarray([int(row[6]) * sizes.get(int(row[7]), np.nan) for row in found], dtype=np.float64)
    hosts_by_pid: dict[str, set[str]] = {}
    for source in {row[4] for row in found}:
        host, pid, _dev = split_source(clean_source(source))
        hosts_by_pid.setdefault(pid, set()).add(host)
    glued = fix_glued_hosts(hosts_by_pid)  # a table row's number glued to a host is that host
    processes = len({(glued.get((host, pid), host), pid) for pid, hosts in hosts_by_pid.items() for host in hosts})
    stamps, zones, resolution = _stamps([row[:4] for row in found])
    return LoggedCalls(
        path, [row[5].decode() for row in found], nbytes, [row[8].decode() for row in found],
        np.asarray([int(row[9]) for row in found], dtype=np.int64), processes, stamps, zones, resolution,
    )  # fmt: skip


def _stamps(stamps: list[tuple[bytes, bytes, bytes, bytes]]) -> tuple[np.ndarray, np.ndarray, float]:
    """(seconds since the epoch as printed, UTC offsets in seconds, the resolution) of (date, time, digits, zone)."""
    count = len(stamps)
    seconds, zones = np.full(count, np.nan), np.full(count, np.nan)
    stamped = np.flatnonzero([bool(date) for date, *_rest in stamps])
    if not len(stamped):
        return seconds, zones, 1.0
    whole = np.asarray([stamps[i][0] + b"T" + stamps[i][1] for i in stamped], dtype="datetime64[s]")
    digits = [stamps[i][2] for i in stamped]
    fraction = np.asarray([int(d) / 10 ** len(d) if d else 0.0 for d in digits])
    seconds[stamped] = whole.astype(np.int64) + fraction
    zones[stamped] = [_zone_seconds(stamps[i][3]) for i in stamped]
    return seconds, zones, 10.0 ** -min(len(d) for d in digits)


def _zone_seconds(zone: bytes) -> float:
    """'+0530', '-08:00' or 'Z' as seconds east of UTC; NaN for none (the target's local time)."""
    if not zone:
        return np.nan
    if zone == b"Z":
        return 0.0
    sign = -1 if zone[:1] == b"-" else 1
    hours, minutes = int(zone[1:3]), int(zone[-2:])
    return float(sign * (hours * 3600 + minutes * 60))
