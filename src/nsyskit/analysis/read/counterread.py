"""The counters an export samples beside the trace (GPU metrics, EFA and NIC metrics) as series of timed values.

Part of the reader (reader.py names it; only the reader knows export versions). Forms read, by nsys version:
- GPU metrics as JSON generic events (nsys 2021.2 to 2023.3): a "GpuMetrics" source in GENERIC_EVENT_SOURCES, each
  event's values as text in its JSON `data`, `timestamp` NULL and `rawTimestamp` set. The source's "TimeSource" is
  "SessionNs": rawTimestamp is already on the trace's timeline (ns from the session's start, as the kernels are);
- GPU metrics in GPU_METRICS + TARGET_INFO_GPU_METRICS (nsys 2023.4 and later; names carry a `[unit]` suffix);
- EFA metrics (`--enable efa_metrics`, nsys 2024.4 and later): generic events whose fields are rates in bytes/s
  ("rdma_read_bytes per second", ...), values in GENERIC_EVENT_DATA (the first non-NULL of intVal, uintVal,
  floatVal, doubleVal; field names through GENERIC_EVENT_TYPE_FIELDS and StringIds) or in the JSON `data` where
  it is present; the EFA device is the low byte of the typeId;
- NIC metrics (`--nic-metrics`): NET_NIC_METRIC intervals, named and with their unit in TARGET_INFO_NETWORK_METRICS,
  the NIC's name through NIC_ID_MAP and TARGET_INFO_NIC_INFO.
A sample holds its value until the series' next sample (GPU and EFA metrics), or over its own [start, end) (NIC).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from nsyskit.analysis.read.exportfile import ExportFile
from nsyskit.analysis.read.sqlitefile import as_text

GPU, EFA, NIC = "gpu", "efa", "nic"
GPU_METRICS_SOURCE = "GpuMetrics"
SESSION_TIME = ("SessionNs", "")  # time sources on the trace's own timeline ('' where the source does not say)
RATE_SUFFIX = " per second"  # EFA fields are rates: "rdma_write_bytes per second"
RATE_UNIT = re.compile(r"(/\s*s(ec(ond)?)?|per\s+second|ps)$", re.IGNORECASE)  # a NIC unit that is already a rate
DEVICE_MASK = 0xFF  # the device (GPU, EFA) in a generic event type's id


@dataclass
class Series:
    """One counter of one device: each sample's value and the [start, end) it holds over (ns, trace timeline)."""

    kind: str  # gpu, efa or nic
    device: str  # "GPU 0", "EFA 1", the NIC's name
    metric: str  # as the file names it
    unit: str  # "%" style units from the name or table; "B/s" for EFA rates
    start: np.ndarray  # int64
    end: np.ndarray  # int64
    value: np.ndarray  # float64
    device_id: int = -1  # the GPU's id for GPU metrics (the rank whose kernels ran on it owns them)


def read_counters(export: ExportFile) -> list[Series]:
    """Every counter series of the export (empty when it sampled none); rows that cannot be read are warned about."""
    series = gpu_metrics_table(export)
    if not series:  # 2023.4+ keeps GPU metrics in their own table: the generic events are not read twice
        series = gpu_metrics_json(export)
    return series + efa_metrics(export) + nic_metrics(export)


def held(times: np.ndarray) -> np.ndarray:
    """Where each sample of a sorted series stops holding: the next sample's time (the last one's own: no time)."""
    return np.r_[times[1:], times[-1:]] if len(times) else times


# GPU metric names of nsys 2021.2-2023.3 carry no `[unit]` suffix ('GPC Clock Frequency', 'SM Active', 'DRAM Read
# Throughput', 'NVLink RX Responses User Data'): their unit by the form of the name, as 2023.4+ names the same
# metrics ('GPC Clock Frequency [MHz]', 'SMs Active [Throughput %]'; the old clocks are in Hz: 1154728113 on an
# A100). A name of no known form says 'value'.
OLD_FORM_UNITS = (
    (re.compile(r"Clock Frequency$"), "Hz"),
    (re.compile(r"(?:Throughput|Bandwidth|Active|Issue|Utilization|Warps in Active SMs|Warps In Flight"
                r"|(?:User|Protocol) Data)$", re.IGNORECASE), "%"),
)  # fmt: skip
UNKNOWN_UNIT = "value"


def unit_of(name: str) -> str:
    """The unit of a GPU metric: the `[unit]` suffix of a 2023.4+ name, else by an older name's form (OLD_FORM_UNITS),
    else UNKNOWN_UNIT."""
    found = re.search(r"\[([^\]]*)\]\s*$", name)
    if found:
        return found.group(1)
    return next((unit for form, unit in OLD_FORM_UNITS if form.search(name.strip())), UNKNOWN_UNIT)


def gpu_metrics_table(export: ExportFile) -> list[Series]:
    """GPU_METRICS samples (nsys 2023.4+), named through TARGET_INFO_GPU_METRICS; the GPU is the typeId's low byte."""
    if "GPU_METRICS" not in export.tables:
        return []
    names = {}  # without the names table the samples are kept, each metric named by its ids
    if "TARGET_INFO_GPU_METRICS" in export.tables:
        names = {(int(t), int(m)): as_text(n) for t, m, n in export.query(
            "SELECT DISTINCT typeId, metricId, metricName FROM TARGET_INFO_GPU_METRICS")}  # fmt: skip
    rows = export.read_ints("GPU_METRICS", {"timestamp": "timestamp", "typeId": "typeId", "metricId": "metricId",
                                            "value": "value"}, ("timestamp", "typeId", "metricId", "value"))  # fmt: skip
    if not rows or not len(rows["timestamp"]):
        return []
    order = np.lexsort((rows["timestamp"], rows["metricId"], rows["typeId"]))
    type_id, metric_id = rows["typeId"][order], rows["metricId"][order]
    times, values = rows["timestamp"][order], rows["value"][order].astype(np.float64)
    cuts = np.flatnonzero((np.diff(type_id) != 0) | (np.diff(metric_id) != 0)) + 1
    series = []
    for low, high in zip(np.r_[0, cuts], np.r_[cuts, len(times)], strict=True):
        key = (int(type_id[low]), int(metric_id[low]))
        name = names.get(key, f"<metric {key[1]} of type {key[0]} not in TARGET_INFO_GPU_METRICS>")
        device = key[0] & DEVICE_MASK
        start = times[low:high]
        series.append(Series(GPU, f"GPU {device}", name, unit_of(name), start, held(start), values[low:high], device))
    return series


def _sources(export: ExportFile) -> dict[int, tuple[str, str]]:
    """Generic event source id -> (name, time source): from nameId/timeSourceId (newer) or the JSON `data` (older)."""
    if "GENERIC_EVENT_SOURCES" not in export.tables:
        return {}
    columns = export.columns("GENERIC_EVENT_SOURCES")
    found: dict[int, tuple[str, str]] = {}
    picked = [c for c in ("nameId", "data") if c in columns]
    for row in export.query(f"SELECT sourceId, {', '.join(picked)} FROM GENERIC_EVENT_SOURCES"):
        described = _json(row[-1]) if "data" in picked else {}
        name = described.get("Name", "")
        if "nameId" in picked and isinstance(row[1], int):
            name = export.strings(np.array([row[1]])).get(row[1], name)
        found[int(row[0])] = (as_text(name), as_text(described.get("TimeSource", "")))
    return found


def _json(text: object) -> dict:
    """A JSON object's text as a dict ({} for NULL or anything that is not a JSON object)."""
    try:
        found = json.loads(as_text(text)) if text is not None else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _types(export: ExportFile) -> dict[int, tuple[int, list[str]]]:
    """Generic event type id -> (source id, field names in field order), from GENERIC_EVENT_TYPE_FIELDS (newer) or
    the type's JSON `data` "Fields" (older)."""
    if "GENERIC_EVENT_TYPES" not in export.tables:
        return {}
    columns = export.columns("GENERIC_EVENT_TYPES")
    data = ", data" if "data" in columns else ", NULL"
    types = {int(t): (int(s), [as_text(f.get("Name", "")) for f in _json(d).get("Fields", []) if isinstance(f, dict)])
             for t, s, d in export.query(f"SELECT typeId, sourceId{data} FROM GENERIC_EVENT_TYPES")}  # fmt: skip
    if "GENERIC_EVENT_TYPE_FIELDS" in export.tables:
        rows = export.query(
            "SELECT typeId, fieldIdx, fieldNameId FROM GENERIC_EVENT_TYPE_FIELDS ORDER BY typeId, fieldIdx"
        )
        strings = export.strings(np.array([r[2] for r in rows if isinstance(r[2], int)], dtype=np.int64))
        by_type: dict[int, dict[int, str]] = {}
        for type_id, index, name_id in rows:
            by_type.setdefault(int(type_id), {})[int(index)] = strings.get(name_id, f"<field {index}>")
        for type_id, fields in by_type.items():
            names = [fields.get(i, f"<field {i}>") for i in range(max(fields) + 1)]
            types[type_id] = (types.get(type_id, (-1, []))[0], names)
    return types


def gpu_metrics_json(export: ExportFile) -> list[Series]:
    """GPU metrics kept as JSON generic events of the "GpuMetrics" source (values as text)."""
    sources = _sources(export)
    wanted = {s for s, (name, _time) in sources.items() if name == GPU_METRICS_SOURCE}
    if not wanted or "GENERIC_EVENTS" not in export.tables:
        return []
    series = []
    for type_id, (source, fields) in sorted(_types(export).items()):
        if source not in wanted or not fields:
            continue
        if sources[source][1] not in SESSION_TIME:
            export.warn(f"{export.path}: GPU metrics of time source {sources[source][1]!r} are not on the trace's "
                        "timeline and were left out; fix: re-export the report with a current nsys")  # fmt: skip
            continue
        times, values = _json_events(export, type_id, fields)
        device, ends = type_id & DEVICE_MASK, held(times)  # one time array for all: the analysis shares its work
        series += [Series(GPU, f"GPU {device}", name, unit_of(name), times, ends, values[:, i], device)
                   for i, name in enumerate(fields)]  # fmt: skip
    return series


def _stamp(columns: set[str], prefix: str = "") -> str:
    """A generic event's time in SQL: `timestamp`, else `rawTimestamp` where it is NULL or the column is missing."""
    found = [prefix + c for c in ("timestamp", "rawTimestamp") if c in columns]
    return f"coalesce({', '.join(found)})" if len(found) > 1 else "".join(found)


def _json_events(export: ExportFile, type_id: int, fields: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(time of each event of `type_id`, its values in field order: a row per event) from the JSON `data`, by time.

    The time is `timestamp`, or `rawTimestamp` where it is NULL (the old exports' session-time generic events).
    """
    columns = export.columns("GENERIC_EVENTS")
    stamp = _stamp(columns)
    if "data" not in columns or not stamp:
        return np.empty(0, dtype=np.int64), np.empty((0, len(fields)))
    found = _paged_json_events(export, type_id, fields, [c for c in ("timestamp", "rawTimestamp") if c in columns])
    if found is not None:
        return found
    # One scan, in the table's own order (no sort of the texts in SQLite): the times say the order
    count, stamps, text = export.query(
        f"SELECT count(*), group_concat({stamp}, ','), CAST(group_concat(data, char(1)) AS "
        f"BLOB) FROM GENERIC_EVENTS WHERE typeId = {int(type_id)} AND data IS NOT NULL"
    )[0]
    try:
        times = np.array(as_text(stamps).split(","), dtype=np.int64) if count else np.empty(0, dtype=np.int64)
    except (ValueError, OverflowError):
        times = np.empty(0, dtype=np.int64)
    if not count or len(times) != count:  # a time that is not an integer: the events cannot be placed
        if count:
            export.warn(f"{export.path}: generic events of type {type_id} have times that are not integers and were "
                        "left out; fix: re-export the report with 'nsys export --type sqlite'")  # fmt: skip
        return times[:0], np.empty((0, len(fields)))
    from nsyskit.analysis.read.jsonvalues import parse_values

    values = parse_values(text if isinstance(text, bytes) else as_text(text).encode(), count, fields, export.warn,
                          str(export.path))  # fmt: skip
    return _in_time_order(times, values)


def _in_time_order(times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The events by time (stable: events of one time keep their order; nsys writes them sorted: then no copy),
    each field's column contiguous (a series' values)."""
    if len(times) > 1 and not (times[1:] >= times[:-1]).all():
        order = np.argsort(times, kind="stable")
        times, values = times[order], values[order]
    return times, np.asfortranarray(values)


def _paged_json_events(
    export: ExportFile, type_id: int, fields: list[str], stamps: list[str]
) -> tuple[np.ndarray, np.ndarray] | None:
    """_json_events from the file's pages (pagescan: the JSON bytes parsed where C put them, no str per event); None
    where SQLite's path must decide (no page reader here, a value that is not what nsys writes: it warns)."""
    from nsyskit.analysis.read import pagescan
    from nsyskit.analysis.read.jsonvalues import parse_spans

    def parse(found: dict, address: int, size: int, starts: np.ndarray, ends: np.ndarray):
        kind = {name: found[f"{name}:kind"] for name in ("data", *stamps)}
        chosen = (found["typeId"] == type_id) & (kind["data"] != pagescan.KIND_CODES["null"])
        if not (np.isin(kind["data"][chosen], (pagescan.KIND_CODES["text"], pagescan.KIND_CODES["blob"]))).all():
            return None  # a number as `data`: SQLite's text of it
        times, time_kind = found[stamps[-1]][chosen], kind[stamps[-1]][chosen]
        if len(stamps) > 1:  # coalesce(timestamp, rawTimestamp)
            first = kind[stamps[0]][chosen] != pagescan.KIND_CODES["null"]
            times = np.where(first, found[stamps[0]][chosen], times)
            time_kind = np.where(first, kind[stamps[0]][chosen], time_kind)
        if (time_kind != pagescan.KIND_CODES["integer"]).any():
            return None  # a time that is not an integer: SQLite's path warns
        values = parse_spans(address, size, starts[0][chosen], ends[0][chosen], fields, export.warn, str(export.path))
        return _in_time_order(times, values)

    names = ("typeId", "data", *stamps)
    return pagescan.read_columns(export.con, export.path, "GENERIC_EVENTS", names, names[1:], ("data",), raw=parse)


def efa_metrics(export: ExportFile) -> list[Series]:
    """EFA rates (bytes/s) of generic event types whose fields are named '... per second', one series per device."""
    if "GENERIC_EVENTS" not in export.tables:
        return []
    sources = _sources(export)
    kinds = {t: f for t, (s, f) in _types(export).items()
             if f and sources.get(s, ("", ""))[0] != GPU_METRICS_SOURCE and any(n.endswith(RATE_SUFFIX) for n in f)}  # fmt: skip
    series = []
    has_data = "GENERIC_EVENT_DATA" in export.tables and "genericEventId" in export.columns("GENERIC_EVENTS")
    for type_id, fields in sorted(kinds.items()):
        times, values = _json_events(export, type_id, fields) if _has_json(export, type_id) else (None, None)
        if times is None and has_data:
            times, values = _data_events(export, type_id, len(fields))
        if times is None or not len(times):
            continue
        device, ends = f"EFA {type_id & DEVICE_MASK}", held(times)
        series += [Series(EFA, device, name, "B/s", times, ends, values[:, i])
                   for i, name in enumerate(fields) if name.endswith(RATE_SUFFIX)]  # fmt: skip
    return series


def _has_json(export: ExportFile, type_id: int) -> bool:
    """Whether the events of `type_id` carry their values as JSON `data` (read instead of GENERIC_EVENT_DATA)."""
    if "data" not in export.columns("GENERIC_EVENTS"):
        return False
    found = export.query(
        f"SELECT EXISTS (SELECT 1 FROM GENERIC_EVENTS WHERE typeId = {int(type_id)} AND data IS NOT NULL)"
    )
    return bool(found[0][0])


def _data_events(export: ExportFile, type_id: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(time of each event of `type_id`, its values: a row per event, NaN where a field has none) from
    GENERIC_EVENT_DATA, each value the first non-NULL of intVal, uintVal, floatVal, doubleVal."""
    stamp = _stamp(export.columns("GENERIC_EVENTS"), "e.")
    if not stamp:
        return np.empty(0, dtype=np.int64), np.empty((0, width))
    rows = export.query(
        f"SELECT e.genericEventId, {stamp}, d.fieldIdx, "
        "coalesce(d.intVal, d.uintVal, d.floatVal, d.doubleVal) FROM GENERIC_EVENTS e JOIN GENERIC_EVENT_DATA d "
        f"ON d.genericEventId = e.genericEventId WHERE e.typeId = {int(type_id)}"
    )
    good = [r for r in rows if isinstance(r[1], int) and isinstance(r[2], int) and 0 <= r[2] < width
            and isinstance(r[3], (int, float))]  # fmt: skip
    if len(good) < len(rows):
        export.warn(f"{export.path}: {len(rows) - len(good)} GENERIC_EVENT_DATA values of EFA type {type_id} are not "
                    "numbers and were left out; fix: re-export the report with 'nsys export --type sqlite'")  # fmt: skip
    events = {}
    for event, time, _index, _value in good:
        events.setdefault(event, time)
    order = sorted(events, key=lambda e: (events[e], e))
    position = {event: i for i, event in enumerate(order)}
    values = np.full((len(order), width), np.nan)
    for event, _time, index, value in good:
        values[position[event], index] = float(value)
    return np.array([events[e] for e in order], dtype=np.int64), values


def nic_metrics(export: ExportFile) -> list[Series]:
    """NET_NIC_METRIC intervals per NIC, port and metric; an amount (bytes, packets) per interval becomes a rate per
    second (its unit '<unit>/s'), a rate stays as it is."""
    if "NET_NIC_METRIC" not in export.tables:
        return []
    metrics = {}  # without the names table the samples are kept, each metric named by its ids
    if "TARGET_INFO_NETWORK_METRICS" in export.tables:
        metrics = {(int(li), int(ix)): (as_text(n), as_text(u)) for li, ix, n, u in export.query(
            "SELECT metricsListId, metricsIdx, name, unit FROM TARGET_INFO_NETWORK_METRICS")}  # fmt: skip
    names: dict[int, str] = {}
    if {"NIC_ID_MAP", "TARGET_INFO_NIC_INFO"} <= export.tables:
        names = {int(g): as_text(n) for g, n in export.query(
            "SELECT m.globalId, i.name FROM NIC_ID_MAP m JOIN TARGET_INFO_NIC_INFO i ON i.nicId = m.nicId")}  # fmt: skip
    rows = export.query('SELECT globalId, portId, metricsListId, metricsIdx, start, "end", value FROM NET_NIC_METRIC '
                        'ORDER BY globalId, portId, metricsListId, metricsIdx, start')  # fmt: skip
    good = [
        r for r in rows if all(isinstance(v, int) for v in r[:6]) and isinstance(r[6], (int, float)) and r[5] > r[4]
    ]
    if len(good) < len(rows):
        export.warn(f"{export.path}: {len(rows) - len(good)} of {len(rows)} NET_NIC_METRIC rows have no number or "
                    "end before they start and were left out; fix: re-export the report")  # fmt: skip
    groups: dict[tuple, list] = {}
    for row in good:
        groups.setdefault(row[:4], []).append(row[4:])
    ports = {}
    for global_id, port, _l, _i in groups:
        ports.setdefault(global_id, set()).add(port)
    series = []
    for (global_id, port, list_id, index), samples in groups.items():
        start, end, value = (np.array(c) for c in zip(*samples, strict=True))
        name, unit = metrics.get((list_id, index), (f"<metric {list_id}/{index}>", ""))
        if not RATE_UNIT.search(unit.strip()):  # an amount over each interval: its rate per second
            value, unit = value * 1e9 / (end - start), f"{unit}/s" if unit else "/s"
        device = names.get(global_id, f"NIC {global_id}") + (f" port {port}" if len(ports[global_id]) > 1 else "")
        series.append(Series(NIC, device, name, unit, start.astype(np.int64), end.astype(np.int64),
                             value.astype(np.float64)))  # fmt: skip
    return series
