"""The NVTX part of the export reader (reader.py): ranges, their text, domains and payloads in every export version."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from nsyskit.analysis.records import NvtxRanges, empty_nvtx
from nsyskit.analysis.sqlitefile import REEXPORT, packed_scan
from nsyskit.analysis.sqlitefile import as_text as _text

if TYPE_CHECKING:
    from nsyskit.analysis.reader import ExportReader

NVTX_TABLES = ("NVTX_EVENTS",)
# NVTX event types of ranges: push/pop, start/end, and their NVTX-T (imported .nvtxt) twins.
NVTX_RANGE_TYPES = (59, 60, 70, 71)
NVTX_DOMAIN_CREATE = 75
PAYLOAD_COLUMNS = ("uint64Value", "int64Value", "uint32Value", "int32Value", "doubleValue", "floatValue")
PID_SHIFT = 24  # globalTid / globalPid: the process id sits above the low 24 bits (the thread id)


def read_nvtx_ranges(reader: ExportReader, pid: int | None = None) -> NvtxRanges:
    """NVTX push/pop and start/end ranges that ended, text resolved from `text` or `textId`; bad rows left out."""
    table = reader.table(NVTX_TABLES)
    if not table:
        return empty_nvtx()
    cols = reader.columns(table)
    types = ",".join(str(t) for t in NVTX_RANGE_TYPES)
    scope = reader._scope(table, pid, column="globalTid", alias="e.")
    where = f"e.eventType IN ({types}) AND e.end IS NOT NULL{' AND ' + scope if scope else ''}"
    valid = "typeof(e.start) = 'integer' AND typeof(e.end) = 'integer'"
    dropped = reader._query(f"SELECT count(*) FROM {table} AS e WHERE {where} AND NOT ({valid})")[0][0]
    if dropped:
        reader.warn(f"{reader.path}: {dropped} NVTX ranges with a non-integer start/end were left out; fix: {REEXPORT}")
    ranges = _read_columnar(reader, table, cols, f"{where} AND {valid}") if reader.blob else None
    if ranges is None:  # no int64s, or a thread/domain id that is not an integer: one row-wise query, joins in SQL
        ranges = _read_rows(reader, table, cols, f"{where} AND {valid}")
    backwards = ranges.end < ranges.start
    if backwards.any():
        reader.warn(
            f"{reader.path}: {int(backwards.sum())} NVTX ranges end before they start and were left out; fix: {REEXPORT}"
        )
        ranges = ranges.take(~backwards)
    return ranges


def _text_sql(reader: ExportReader, cols: set[str]) -> tuple[str, str]:
    """(the text of a range, the join it needs): inline `text`, else the StringIds value of `textId`."""
    if "textId" in cols and "StringIds" in reader.tables:
        return (
            "coalesce(e.text, s.value, CASE WHEN e.textId IS NOT NULL THEN '<string ' || e.textId || '>' END)",
            "LEFT JOIN StringIds AS s ON e.textId = s.id",
        )
    return "e.text", ""


def _payload_sql(cols: set[str]) -> str:
    """The range's numeric payload: the first payload column holding a number, else NULL."""
    payload_cols = [
        f"CASE WHEN typeof(e.{c}) IN ('integer', 'real') THEN e.{c} END" for c in PAYLOAD_COLUMNS if c in cols
    ]
    return f"coalesce({', '.join(payload_cols)}, NULL)" if payload_cols else "NULL"


def _read_columnar(reader: ExportReader, table: str, cols: set[str], where: str) -> NvtxRanges | None:
    """The ranges read in narrow scans: integers through int64s, texts as one column, payloads only where present.

    None when a thread or domain id is not an integer (the row-wise read handles those). Rows come in rowid order
    (NOT INDEXED scans), so the scans line up; then they are ordered by start as the row-wise read's ORDER BY does.
    """
    domains = "domainId" in cols
    numbers = {"row": "e.rowid", "start": "e.start", "end": "e.end", "thread": "e.globalTid"}
    if domains:
        numbers["domain"] = "e.domainId"
    found = packed_scan(reader._query, f"{table} AS e", numbers, where, blob=True, bound=reader.bound(table))
    if found is None:
        return None
    row = found["row"]  # ascending: the scan order of every query below
    if not len(row):
        return empty_nvtx()
    text_sql, join = _text_sql(reader, cols)
    texts = reader._query(f"SELECT {text_sql} FROM {table} AS e NOT INDEXED {join} WHERE {where}")
    if len(texts) != len(row):
        return None
    payload, json_text = np.full(len(row), np.nan), np.full(len(row), None, dtype=object)
    payload_sql, json_sql = _payload_sql(cols), "e.jsonText" if "jsonText" in cols else "NULL"
    if payload_sql != "NULL" or json_sql != "NULL":  # few ranges carry one: only those rows are fetched
        sparse = reader._query(
            f"SELECT e.rowid, {payload_sql} AS p, {json_sql} AS j FROM {table} AS e NOT INDEXED "
            f"WHERE {where} AND (p IS NOT NULL OR j IS NOT NULL)"
        )
        if sparse:
            ids, values, jsons = zip(*sparse, strict=True)
            at = np.searchsorted(row, np.asarray(ids, dtype=np.int64))
            payload[at] = np.asarray(values, dtype=np.float64)  # NULL -> NaN
            json_text[at] = [j if j.__class__ is str else None for j in jsons]
    text = np.asarray([t if t.__class__ is str else _text(t) for (t,) in texts], dtype=object)
    thread = found["thread"]
    domain = _domain_names(reader, table, found["domain"], thread) if domains else np.full(len(row), "", dtype=object)
    ranges = NvtxRanges(found["start"], found["end"], text, domain, thread, payload, json_text)
    start = found["start"]
    if (start[1:] >= start[:-1]).all():  # recorded in start order already
        return ranges
    return ranges.take(np.argsort(start, kind="stable"))


def _domain_names(reader: ExportReader, table: str, domain: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """The domain name of each range: its process's domain-create event's text, else `domain N` ('' for 0)."""
    created = {
        (d, p): name
        for d, p, name in reader._query(
            f"SELECT domainId, globalTid >> {PID_SHIFT}, max(text) FROM {table} "
            f"WHERE eventType = {NVTX_DOMAIN_CREATE} GROUP BY 1, 2"
        )
    }
    # A few domains and processes: their distinct pairs from the codes of each (a unique over pairs sorts them all).
    domains, domain_code = np.unique(domain, return_inverse=True)
    processes, process_code = np.unique(thread >> PID_SHIFT, return_inverse=True)
    pairs, codes = np.unique(domain_code.reshape(-1) * len(processes) + process_code.reshape(-1), return_inverse=True)
    names = []
    for pair in pairs.tolist():
        d, p = int(domains[pair // len(processes)]), int(processes[pair % len(processes)])
        name = created.get((d, p))
        names.append(_text(name) if name is not None else f"domain {d}" if d > 0 else "")
    return np.asarray(names, dtype=object)[codes.reshape(-1)]


def _read_rows(reader: ExportReader, table: str, cols: set[str], where: str) -> NvtxRanges:
    """The ranges in one row-wise query, text, domain and payload resolved by SQL joins."""
    text_sql, join = _text_sql(reader, cols)
    json_sql = "e.jsonText" if "jsonText" in cols else "NULL"
    domain_sql, domain_join = "''", ""
    if "domainId" in cols:
        # Domain names come from the domain-create events of the same process (globalTid >> 24 is the process).
        domain_join = (
            f"LEFT JOIN (SELECT domainId, globalTid >> {PID_SHIFT} AS proc, max(text) AS name FROM "
            f"{table} WHERE eventType = {NVTX_DOMAIN_CREATE} GROUP BY 1, 2) AS d "
            f"ON e.domainId = d.domainId AND (e.globalTid >> {PID_SHIFT}) = d.proc"
        )
        # A domain whose create event a derived file cut off is still a domain: named by its id.
        domain_sql = "coalesce(d.name, CASE WHEN e.domainId > 0 THEN 'domain ' || e.domainId ELSE '' END)"
    rows = reader._query(
        f"SELECT e.start, e.end, {text_sql}, {domain_sql}, "
        f"CASE WHEN typeof(e.globalTid) = 'integer' THEN e.globalTid ELSE 0 END, {_payload_sql(cols)}, {json_sql} "
        f"FROM {table} AS e {join} {domain_join} WHERE {where} ORDER BY e.start"
    )
    if not rows:
        return empty_nvtx()
    start, end, text, domain, thread, payload, json_text = zip(*rows, strict=True)
    return NvtxRanges(
        np.asarray(start, dtype=np.int64),
        np.asarray(end, dtype=np.int64),
        np.asarray([t if t.__class__ is str else _text(t) for t in text], dtype=object),
        np.asarray([d if d.__class__ is str else _text(d) for d in domain], dtype=object),
        np.asarray(thread, dtype=np.int64),
        np.asarray(payload, dtype=np.float64),  # NULL -> NaN
        np.asarray([j if j.__class__ is str else None for j in json_text], dtype=object),
    )
