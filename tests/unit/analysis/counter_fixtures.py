"""Test helper: counters added to a synthetic export, in the tables of NVIDIA's Analysis Guide ("SQLite Schema
Reference", schema 3.28.1): GPU_METRICS + TARGET_INFO_GPU_METRICS (nsys 2023.4+), EFA metrics as generic events
with GENERIC_EVENT_DATA (nsys 2024.4+, `--enable efa_metrics`), and NET_NIC_METRIC with its info tables
(`--nic-metrics`).

No public export holds EFA or NIC samples (nor does ../shared/real-data hold a 2023.4+ GPU metrics export), so these
fixtures are built from the documented schema: the column names, types and the links between the tables are the
guide's; the EFA field names ("rdma_read_bytes per second", ...) and the device in the typeId's low byte are those
of NVIDIA's network_map_aws recipe; the GPU metric names carry the `[unit]` suffix of 2023.4+ exports.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

GENERIC_DDL = (
    """CREATE TABLE GENERIC_EVENT_SOURCES (sourceId INTEGER NOT NULL PRIMARY KEY, nameId INTEGER NOT NULL,
       timeSourceId INTEGER NOT NULL, sourceGroupId INTEGER NOT NULL, hyperType TEXT, hyperVersion TEXT,
       hyperStructPrefix TEXT, hyperMacroPrefix TEXT, hyperFilterFlags INTEGER, hyperDomain TEXT, data TEXT)""",
    """CREATE TABLE GENERIC_EVENT_TYPES (typeId INTEGER NOT NULL PRIMARY KEY, sourceId INTEGER NOT NULL,
       nameId INTEGER NOT NULL, hyperComment TEXT, ftraceFormat TEXT, etwProviderId INTEGER,
       etwProviderNameId INTEGER, etwTaskId INTEGER, etwTaskNameId INTEGER, etwEventId INTEGER, etwVersion INTEGER,
       etwGuidHigh INTEGER, etwGuidLow INTEGER, etwGuid TEXT, data TEXT)""",
    """CREATE TABLE GENERIC_EVENT_TYPE_FIELDS (typeId INTEGER NOT NULL, fieldIdx INTEGER NOT NULL,
       fieldNameId INTEGER NOT NULL, offset INTEGER NOT NULL, size INTEGER NOT NULL, type INTEGER NOT NULL,
       hyperTypeName TEXT, hyperFormat TEXT, hyperComment TEXT, ftracePrefix TEXT, ftraceSuffix TEXT,
       etwFlags INTEGER, etwCountFieldIndex INTEGER, etwLengthFieldIndex INTEGER, etwType INTEGER,
       etwMapInfoFlags INTEGER, etwOrderedFieldIndex INTEGER)""",
    """CREATE TABLE GENERIC_EVENTS (genericEventId INTEGER NOT NULL PRIMARY KEY, rawTimestamp INTEGER NOT NULL,
       timestamp INTEGER NOT NULL, typeId INTEGER NOT NULL, globalTid INTEGER, data TEXT)""",
    """CREATE TABLE GENERIC_EVENT_DATA (genericEventId INTEGER NOT NULL, fieldIdx INTEGER NOT NULL, intVal INTEGER,
       uintVal INTEGER, floatVal REAL, doubleVal REAL)""",
)
GPU_METRICS_DDL = (
    """CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL,
       typeName TEXT NOT NULL, metricId INTEGER NOT NULL, metricName TEXT NOT NULL)""",
    """CREATE TABLE GPU_METRICS (rawTimestamp INTEGER NOT NULL, timestamp INTEGER NOT NULL, typeId INTEGER NOT NULL,
       metricId INTEGER NOT NULL, value INTEGER NOT NULL)""",
)
NIC_DDL = (
    """CREATE TABLE TARGET_INFO_NIC_INFO (GUID INTEGER NOT NULL, stateName TEXT NOT NULL, nicId INTEGER NOT NULL,
       name TEXT NOT NULL, deviceId INTEGER NOT NULL, vendorId INTEGER NOT NULL, linkLayer INTEGER NOT NULL)""",
    "CREATE TABLE NIC_ID_MAP (nicId INTEGER NOT NULL, globalId INTEGER NOT NULL)",
    """CREATE TABLE TARGET_INFO_NETWORK_METRICS (metricsListId INTEGER NOT NULL, metricsIdx INTEGER NOT NULL,
       name TEXT NOT NULL, description TEXT NOT NULL, unit TEXT NOT NULL)""",
    """CREATE TABLE NET_NIC_METRIC (start INTEGER NOT NULL, end INTEGER NOT NULL, globalId INTEGER NOT NULL,
       portId INTEGER NOT NULL, metricsListId INTEGER NOT NULL, metricsIdx INTEGER NOT NULL, value INTEGER NOT NULL)""",
)
EFA_FIELDS = ("rdma_read_bytes per second", "rdma_read_resp_bytes per second", "rdma_write_bytes per second",
              "rdma_write_recv_bytes per second")  # fmt: skip
SOURCE_ID = 0x1000100000000  # a serialized GlobalId (VM 1), as real exports write
GPU_TYPE_BASE = 0x1000100000100  # + the GPU's id in the low byte
EFA_TYPE_BASE = 0x1000100000200  # + the EFA device's index in the low byte


@dataclass
class Counters:
    """Counters to add: `gpu` metric name -> GPU id -> [(time, value)]; `efa` device -> [(time, {field: rate})]
    (`efa_json`: as JSON `data` instead of GENERIC_EVENT_DATA); `nic` (NIC name, metric name, unit) ->
    [(start, end, value)]."""

    gpu: dict[str, dict[int, Sequence[tuple[int, int]]]] = field(default_factory=dict)
    efa: dict[int, Sequence[tuple[int, dict[str, float]]]] = field(default_factory=dict)
    efa_json: bool = False
    nic: dict[tuple[str, str, str], Sequence[tuple[int, int, float]]] = field(default_factory=dict)


def add_counters(path: Path, counters: Counters) -> Path:
    """Write `counters` into the export at `path` (made by nsys_fixtures.write_export); returns the path."""
    con = sqlite3.connect(path)
    strings = dict(con.execute("SELECT value, id FROM StringIds"))

    def sid(text: str) -> int:
        if text not in strings:
            strings[text] = (max(strings.values()) + 1) if strings else 1
            con.execute("INSERT INTO StringIds VALUES (?, ?)", (strings[text], text))
        return strings[text]

    for ddl in GENERIC_DDL:
        con.execute(ddl)
    if counters.gpu:
        _gpu(con, sid, counters)
    if counters.efa:
        _efa(con, sid, counters)
    if counters.nic:
        _nic(con, counters)
    con.commit()
    con.close()
    return path


def _gpu(con: sqlite3.Connection, sid, counters: Counters) -> None:
    """GPU_METRICS rows; a generic event type per GPU (its fields the metrics) as 2023.4+ exports link them."""
    for ddl in GPU_METRICS_DDL:
        con.execute(ddl)
    con.execute("INSERT INTO GENERIC_EVENT_SOURCES (sourceId, nameId, timeSourceId, sourceGroupId) VALUES (?, ?, 0, 0)",
                (SOURCE_ID, sid("GPU Metrics")))  # fmt: skip
    gpus = sorted({gpu for per_gpu in counters.gpu.values() for gpu in per_gpu})
    for gpu in gpus:
        type_id = GPU_TYPE_BASE + gpu
        con.execute("INSERT INTO GENERIC_EVENT_TYPES (typeId, sourceId, nameId) VALUES (?, ?, ?)",
                    (type_id, SOURCE_ID, sid("GA100")))  # fmt: skip
        for metric_id, name in enumerate(counters.gpu):
            con.execute(
                "INSERT INTO TARGET_INFO_GPU_METRICS VALUES (?, ?, 'GA100', ?, ?)",
                (type_id, SOURCE_ID, metric_id, name),
            )
            con.execute("INSERT INTO GENERIC_EVENT_TYPE_FIELDS (typeId, fieldIdx, fieldNameId, offset, size, type) "
                        "VALUES (?, ?, ?, ?, 8, 1)", (type_id, metric_id, sid(name), 8 * metric_id))  # fmt: skip
            for time, value in counters.gpu[name].get(gpu, ()):
                con.execute(
                    "INSERT INTO GPU_METRICS VALUES (?, ?, ?, ?, ?)", (time + 7, time, type_id, metric_id, value)
                )


def _efa(con: sqlite3.Connection, sid, counters: Counters) -> None:
    """EFA metrics: a generic event type per device (fields the rates), an event per sample."""
    con.execute("INSERT INTO GENERIC_EVENT_SOURCES (sourceId, nameId, timeSourceId, sourceGroupId) VALUES (?, ?, 0, 0)",
                (SOURCE_ID + 1, sid("EFA Metrics")))  # fmt: skip
    event = 1 + (con.execute("SELECT max(genericEventId) FROM GENERIC_EVENTS").fetchone()[0] or 0)
    for device, samples in sorted(counters.efa.items()):
        type_id = EFA_TYPE_BASE + device
        con.execute("INSERT INTO GENERIC_EVENT_TYPES (typeId, sourceId, nameId) VALUES (?, ?, ?)",
                    (type_id, SOURCE_ID + 1, sid(f"rdmap{device}")))  # fmt: skip
        for index, name in enumerate(EFA_FIELDS):
            con.execute("INSERT INTO GENERIC_EVENT_TYPE_FIELDS (typeId, fieldIdx, fieldNameId, offset, size, type) "
                        "VALUES (?, ?, ?, ?, 8, 2)", (type_id, index, sid(name), 8 * index))  # fmt: skip
        for time, rates in samples:
            data = json.dumps({name: rates.get(name, 0) for name in EFA_FIELDS}) if counters.efa_json else None
            con.execute(
                "INSERT INTO GENERIC_EVENTS VALUES (?, ?, ?, ?, NULL, ?)", (event, time + 11, time, type_id, data)
            )
            if not counters.efa_json:
                for index, name in enumerate(EFA_FIELDS):  # each field in one of the four value columns
                    value = rates.get(name, 0)
                    column = ("uintVal", "doubleVal")[isinstance(value, float)]
                    con.execute(f"INSERT INTO GENERIC_EVENT_DATA (genericEventId, fieldIdx, {column}) VALUES (?, ?, ?)",
                                (event, index, value))  # fmt: skip
            event += 1


def _nic(con: sqlite3.Connection, counters: Counters) -> None:
    """NET_NIC_METRIC intervals; each NIC in TARGET_INFO_NIC_INFO and NIC_ID_MAP, each metric in the metrics list."""
    for ddl in NIC_DDL:
        con.execute(ddl)
    nics = sorted({nic for nic, _m, _u in counters.nic})
    metrics = list(dict.fromkeys((metric, unit) for _n, metric, unit in counters.nic))
    for index, (metric, unit) in enumerate(metrics):
        con.execute("INSERT INTO TARGET_INFO_NETWORK_METRICS VALUES (1, ?, ?, ?, ?)", (index, metric, metric, unit))
    for nic_id, nic in enumerate(nics):
        global_id = 0x1000000000000 + nic_id
        con.execute(
            "INSERT INTO TARGET_INFO_NIC_INFO VALUES (?, 'ACTIVE', ?, ?, 4123, 5555, 1)", (9000 + nic_id, nic_id, nic)
        )
        con.execute("INSERT INTO NIC_ID_MAP VALUES (?, ?)", (nic_id, global_id))
        for (name, metric, unit), samples in counters.nic.items():
            if name == nic:
                index = metrics.index((metric, unit))
                for start, end, value in samples:
                    con.execute(
                        "INSERT INTO NET_NIC_METRIC VALUES (?, ?, ?, 1, 1, ?, ?)", (start, end, global_id, index, value)
                    )
