"""The NVTX part of the export reader (reader.py): ranges, their text, domains and payloads in every export version."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from nsyskit.analysis.records import NvtxRanges, empty_nvtx
from nsyskit.analysis.sqlitefile import REEXPORT
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
    has_ids = "textId" in cols and "StringIds" in reader.tables
    text_sql = (
        "coalesce(e.text, s.value, CASE WHEN e.textId IS NOT NULL THEN '<string ' || e.textId || '>' END)"
        if has_ids
        else "e.text"
    )
    join = "LEFT JOIN StringIds AS s ON e.textId = s.id" if has_ids else ""
    payload_cols = [
        f"CASE WHEN typeof(e.{c}) IN ('integer', 'real') THEN e.{c} END" for c in PAYLOAD_COLUMNS if c in cols
    ]
    payload_sql = f"coalesce({', '.join(payload_cols)}, NULL)" if payload_cols else "NULL"
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
    types = ",".join(str(t) for t in NVTX_RANGE_TYPES)
    scope = reader._scope(table, pid, column="globalTid", alias="e.")
    where = f"e.eventType IN ({types}) AND e.end IS NOT NULL{' AND ' + scope if scope else ''}"
    valid = "typeof(e.start) = 'integer' AND typeof(e.end) = 'integer'"
    rows = reader._query(
        f"SELECT e.start, e.end, {text_sql}, {domain_sql}, "
        f"CASE WHEN typeof(e.globalTid) = 'integer' THEN e.globalTid ELSE 0 END, {payload_sql}, {json_sql} "
        f"FROM {table} AS e {join} {domain_join} WHERE {where} AND {valid} ORDER BY e.start"
    )
    dropped = reader._query(f"SELECT count(*) FROM {table} AS e WHERE {where} AND NOT ({valid})")[0][0]
    if dropped:
        reader.warn(f"{reader.path}: {dropped} NVTX ranges with a non-integer start/end were left out; fix: {REEXPORT}")
    if not rows:
        return empty_nvtx()
    start, end, text, domain, thread, payload, json_text = zip(*rows, strict=True)
    ranges = NvtxRanges(
        np.asarray(start, dtype=np.int64),
        np.asarray(end, dtype=np.int64),
        np.asarray([t if t.__class__ is str else _text(t) for t in text], dtype=object),
        np.asarray([d if d.__class__ is str else _text(d) for d in domain], dtype=object),
        np.asarray(thread, dtype=np.int64),
        np.asarray(payload, dtype=np.float64),  # NULL -> NaN
        np.asarray([j if j.__class__ is str else None for j in json_text], dtype=object),
    )
    backwards = ranges.end < ranges.start
    if backwards.any():
        reader.warn(
            f"{reader.path}: {int(backwards.sum())} NVTX ranges end before they start and were left out; fix: {REEXPORT}"
        )
        ranges = ranges.take(~backwards)
    return ranges
