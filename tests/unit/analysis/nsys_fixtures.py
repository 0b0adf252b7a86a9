"""Test helper: write GPU-shaped SQLite files in the Nsight Systems export schema (as documented in the User Guide).

The DDL below copies the columns of the tables nsys's own `nsys stats` reports and nsyskit read, so the same
file is accepted by both and their numbers can be compared. Variants reproduce older/newer export versions.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

KERNEL_DDL = """CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
    shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER,
    registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,
    dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,
    gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER)"""
MEMCPY_DDL = """CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL,
    copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER,
    srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER,
    virtualAddress INTEGER)"""
MEMSET_DDL = """CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL,
    bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER)"""
RUNTIME_DDL = """CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,
    correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER)"""
NVTX_DDL_NEW = """CREATE TABLE NVTX_EVENTS (
    start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER,
    color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER REFERENCES StringIds(id),
    domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
    int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT)"""
# The payload schema tables (2023+ exports; their rows repeat per profiled process, with no process id).
PAYLOAD_SCHEMA_DDL = (
    """CREATE TABLE NVTX_PAYLOAD_SCHEMAS (domainId INTEGER, schemaId INTEGER, name TEXT, type INTEGER,
    flags INTEGER, numEntries INTEGER, payloadSize INTEGER, alignTo INTEGER)""",
    """CREATE TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES (domainId INTEGER NOT NULL, schemaId INTEGER NOT NULL,
    idx INTEGER NOT NULL, flags INTEGER, type INTEGER, name TEXT, description TEXT, arrayOrUnionDetail INTEGER,
    offset INTEGER)""",
)
# Older exports: no registered strings (textId), no payload columns.
NVTX_DDL_OLD = """CREATE TABLE NVTX_EVENTS (
    start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER,
    color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER)"""
COMMON_DDL = (
    "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE EXPORT_META_DATA (name TEXT NOT NULL, value TEXT)",
    "CREATE TABLE ANALYSIS_DETAILS (globalVid INTEGER NOT NULL, duration INTEGER NOT NULL, startTime INTEGER NOT NULL, stopTime INTEGER NOT NULL)",
    "CREATE TABLE TARGET_INFO_SYSTEM_ENV (globalVid INTEGER NOT NULL, devStateName TEXT NOT NULL, name TEXT NOT NULL, nameEnum INTEGER NOT NULL, value TEXT NOT NULL)",
)
GPU_DDL = "CREATE TABLE {table} (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, totalMemory INTEGER, smCount INTEGER, uuid TEXT, cuDevice INTEGER)"

THREAD = 281474976710656 + 1234  # a globalTid: process 1234 << 24 | thread
PID = 1234  # the globalPid of activities by default


def gpid(pid: int) -> int:
    """The globalPid nsys writes for process `pid` (VM 1): pid in bits 24..47."""
    return (1 << 48) | (pid << 24)


def gtid(pid: int, tid: int) -> int:
    """The globalTid nsys writes for thread `tid` of process `pid`."""
    return gpid(pid) | tid


@dataclass
class Kernel:
    """One kernel activity record."""

    start: int
    end: int
    name: str
    device: int = 0
    stream: int = 7
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (128, 1, 1)
    correlation: int | None = None
    pid: int = PID


@dataclass
class Memop:
    """One memcpy (kind set) or memset (kind None) record."""

    start: int
    end: int
    bytes: int
    kind: int | None = 1
    device: int = 0
    stream: int = 8
    pid: int = PID
    src_kind: int | None = None  # memory kinds (ENUM_CUDA_MEM_KIND): 0 pageable, 1 pinned, 2 device
    dst_kind: int | None = None


@dataclass
class Range:
    """One NVTX range; payload as an int (uint64Value) or a JSON text; registered=True stores text via textId."""

    start: int
    end: int
    text: str
    payload: int | None = None
    json: str | None = None
    registered: bool = False
    blob: bytes | None = None  # an extended payload's bytes (binaryData), stored in the TEXT column as nsys does
    domain: str = ""
    thread: int = THREAD
    event_type: int = 59


@dataclass
class Launch:
    """One CUDA runtime API call launching the kernel with the same correlation id."""

    start: int
    end: int
    correlation: int
    thread: int = THREAD


@dataclass
class ApiCall:
    """One CUDA runtime/driver API call (cudaStreamSynchronize_v3020, cuModuleLoadData ...) or, in `os_calls`, one
    OS runtime call (poll, futex ...), by function name."""

    start: int
    end: int
    name: str
    thread: int = THREAD


# As nsys 2020.5-2025.x write it (2026.x adds systemClockNs).
SESSION_START_DDL = "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT)"

OSRT_DDL = """CREATE TABLE OSRT_API (
    start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,
    nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, nestingLevel INTEGER, callchainId INTEGER NOT NULL)"""


@dataclass
class Export:
    """Contents of one synthetic export."""

    kernels: Sequence[Kernel] = ()
    memops: Sequence[Memop] = ()
    ranges: Sequence[Range] = ()
    launches: Sequence[Launch] = ()
    gpus: dict[int, str] = field(default_factory=lambda: {0: "NVIDIA H100 80GB HBM3"})
    version: str = "2022.4.2.1"
    hostname: str = "node-a"
    old_nvtx: bool = False
    gpu_table: str | None = "TARGET_INFO_GPU"  # None: no GPU table (files derived from exports drop it)
    cpu_only: bool = False
    env_blob: bytes | None = None  # a binary TARGET_INFO_SYSTEM_ENV value, as nsys <= 2022.4 wrote for GPU runs
    pruned: Sequence[str] = ()  # strings removed from StringIds after writing (derived files prune them)
    api_calls: Sequence[ApiCall] = ()  # CUDA API calls other than the launches (no correlation id)
    os_calls: Sequence[ApiCall] | None = None  # OS runtime calls (None: no OSRT_API table, osrt not traced)
    # Payload schemas: {schema id: (payload size, [(type, name, offset or None), ...])}, written `schema_copies`
    # times (once per profiled process, as nsys does); None: no schema tables.
    payload_schemas: dict[int, tuple[int, list[tuple[int, str, int | None]]]] | None = None
    schema_copies: int = 2
    # TARGET_INFO_SESSION_START_TIME: (utcEpochNs, utcTime, localTime) as nsys writes it; None: no such table
    session_start: tuple[int, str, str] | None = None


def write_export(path: Path, export: Export) -> Path:
    """Write `export` as an nsys SQLite export at `path`; returns the path."""
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        return strings.setdefault(text, len(strings) + 1)

    for ddl in COMMON_DDL:
        con.execute(ddl)
    con.execute(NVTX_DDL_OLD if export.old_nvtx else NVTX_DDL_NEW)
    if not export.cpu_only:
        for ddl in (KERNEL_DDL, MEMCPY_DDL, MEMSET_DDL, RUNTIME_DDL):
            con.execute(ddl)
        if export.gpu_table:
            con.execute(GPU_DDL.format(table=export.gpu_table))
            con.executemany(
                f"INSERT INTO {export.gpu_table} (vmId, id, name, cuDevice) VALUES (0, ?, ?, ?)",
                [(i, n, i) for i, n in export.gpus.items()],
            )
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,1,?,?,?,?,?,NULL,0,0,32,?,?,?,?,?,?,0,0,0,0,?,0,NULL,NULL)",
            [
                (
                    k.start,
                    k.end,
                    k.device,
                    k.stream,
                    k.correlation if k.correlation is not None else i,
                    k.pid,
                    sid(k.name),
                    sid(k.name.split("(")[0]),
                    *k.grid,
                    *k.block,
                    i,
                )
                for i, k in enumerate(export.kernels)
            ],
        )
        for m in export.memops:
            if m.kind is None:
                con.execute(
                    "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,1,?,NULL,?,0,?,NULL,2)",
                    (m.start, m.end, m.device, m.stream, m.pid, m.bytes),
                )
            else:
                con.execute(
                    "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start,end,deviceId,contextId,streamId,globalPid,bytes,copyKind,"
                    "srcKind,dstKind) VALUES (?,?,?,1,?,?,?,?,?,?)",
                    (m.start, m.end, m.device, m.stream, m.pid, m.bytes, m.kind, m.src_kind, m.dst_kind),
                )
        launch_name = sid("cudaLaunchKernel_v7000")
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,0,?,?,?,0,NULL)",
            [(x.start, x.end, x.thread, x.correlation, launch_name) for x in export.launches],
        )
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,0,?,NULL,?,0,NULL)",
            [(x.start, x.end, x.thread, sid(x.name)) for x in export.api_calls],
        )
    if export.os_calls is not None:
        con.execute(OSRT_DDL)
        con.executemany(
            "INSERT INTO OSRT_API VALUES (?,?,27,?,?,0,0,0)",
            [(x.start, x.end, x.thread, sid(x.name)) for x in export.os_calls],
        )
    domains: dict[str, int] = {}
    for r in export.ranges:
        if r.domain and r.domain not in domains:
            domains[r.domain] = len(domains) + 1
            con.execute(
                "INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (0, 75, ?, ?, ?)",
                (r.domain, r.thread, domains[r.domain]),
            )
    for r in export.ranges:
        domain = domains.get(r.domain, 0)
        if export.old_nvtx:
            con.execute(
                "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?,?,?,?,?,?)",
                (r.start, r.end, r.event_type, r.text, r.thread, domain),
            )
            continue
        text, text_id = (None, sid(r.text)) if r.registered else (r.text, None)
        con.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId, uint64Value, jsonText, "
            "binaryData) VALUES (?,?,?,?,?,?,?,?,?,CAST(? AS TEXT))",
            (r.start, r.end, r.event_type, text, r.thread, text_id, domain, r.payload, r.json, r.blob),
        )
    if export.payload_schemas is not None:
        _write_schemas(con, export)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in strings.items()])
    meta = {
        "EXPORT_PRODUCT_NAME": "NVIDIA Nsight Systems",
        "EXPORT_PRODUCT_VERSION": export.version,
        "EXPORT_SCHEMA_VERSION": "3.0.0",
    }
    con.executemany("INSERT INTO EXPORT_META_DATA VALUES (?, ?)", list(meta.items()))
    times = [x for k in export.kernels for x in (k.start, k.end)] + [
        x for r in export.ranges for x in (r.start, r.end)
    ] or [0]
    con.execute("INSERT INTO ANALYSIS_DETAILS VALUES (0, ?, ?, ?)", (max(times) - min(times), min(times), max(times)))
    con.execute("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (0, 'Local (CLI)', 'Hostname', 619, ?)", (export.hostname,))
    if export.env_blob is not None:  # stored as TEXT with bytes that are not UTF-8, as those nsys versions did
        con.execute(
            "INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (0, 'Local (CLI)', 'GpuInfo', 897, CAST(? AS TEXT))",
            (export.env_blob,),
        )
    if export.session_start is not None:
        con.execute(SESSION_START_DDL)
        con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, ?, ?)", export.session_start)
    con.executemany("DELETE FROM StringIds WHERE value = ?", [(text,) for text in export.pruned])
    con.commit()
    con.close()
    return path


def kernels_on(device: int, stream: int, name: str, spans: Iterable[tuple[int, int]]) -> list[Kernel]:
    """Kernels named `name` on one device/stream at the given (start, end) spans."""
    return [Kernel(s, e, name, device=device, stream=stream) for s, e in spans]


def _write_schemas(con: sqlite3.Connection, export: Export) -> None:
    """The payload schema tables, each schema's rows `schema_copies` times (NCCL's domain: id 1)."""
    for ddl in PAYLOAD_SCHEMA_DDL:
        con.execute(ddl)
    for _copy in range(export.schema_copies):
        for schema, (size, entries) in export.payload_schemas.items():
            con.execute("INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES (1, ?, NULL, 1, NULL, ?, ?, NULL)", (schema, len(entries), size))
            con.executemany(
                "INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES (1, ?, ?, NULL, ?, ?, NULL, NULL, ?)",
                [(schema, idx, kind, name, offset) for idx, (kind, name, offset) in enumerate(entries)],
            )
