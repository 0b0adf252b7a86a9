"""NVTX extended payloads exported as tables (nsys 2026.4+ `nsys export --dynamic-tables=all`), read as blobs are.

The layout, as Nsight Systems' SQLite schema reference (2026.4, schema 3.28.1) and its SQLite examples describe it:
each payload schema of each process becomes a table DYNAMIC_NVTXPAYLOAD_DATATYPE_<globalPid>_<domainId>_<schemaId>
with one row per payload and one column per scalar field, named by a sanitized identifier (NVTX_EXPORT_TRANSLATION
maps it back to the field's name); NVTX_EVENTS_PAYLOAD_SCHEMAS links each event to the table that holds its payload,
and the tables join NVTX_EVENTS on eventId, its INTEGER PRIMARY KEY (the rowid). SQLite has no unsigned integers:
a uint64 field is stored as the signed 64-bit integer of the same bits. The fields are found by name as the blob and
jsonText routes find them (payloadblob's patterns), so all three forms of one payload give the same numbers.
"""

from __future__ import annotations

import re

import numpy as np

from nsyskit.analysis.read.payloadblob import (
    COMM_KEY,
    ENTRY_TABLE,
    LINK_TABLE,
    NO_COMM,
    NRANKS_KEY,
    SIZE_KEY,
    BlobValues,
)

TRANSLATION_TABLE = "NVTX_EXPORT_TRANSLATION"
TABLE_PREFIX = "DYNAMIC_NVTXPAYLOAD_DATATYPE_"
EVENT_COLUMN = "eventId"
SAFE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a table or column name that may stand unquoted in SQL


def read_values(reader) -> tuple[np.ndarray, BlobValues] | None:
    """(event ids, ascending; what each event's payload states, as payloadblob.decode gives it), over every
    payload table the export links; None when it has none (not a --dynamic-tables export)."""
    if LINK_TABLE not in reader.tables:
        return None
    names = _original_names(reader)
    ids, sizes, comms, nranks = [], [], [], []
    links = reader.query(f"SELECT DISTINCT globalPid, domainId, payloadSchemaID FROM {LINK_TABLE}")
    for pid, domain, schema in links:
        table = f"{TABLE_PREFIX}{pid}_{domain}_{schema}"
        if table not in reader.tables or not SAFE_NAME.match(table):
            continue  # a schema without scalar fields has no table of its own
        found = _columns(reader, table, schema, names)
        if found is None:
            continue
        rows = reader.query(f"SELECT {', '.join(found.values())} FROM {table}")
        if not rows:
            continue
        values = np.asarray([[np.nan if v is None else v for v in row] for row in rows], dtype=object)
        ids.append(values[:, 0].astype(np.int64))
        sizes.append(_column(values, found, "size", np.nan))
        comms.append(_column(values, found, "comm", NO_COMM))
        nranks.append(_column(values, found, "nranks", 0))
    if not ids:
        return None
    every = np.concatenate(ids)
    order = np.argsort(every, kind="stable")
    size = np.concatenate(sizes)[order]
    size = np.where(size < 0, size + 2.0**64, size)  # a uint64 stored as the signed integer of its bits
    comm = np.concatenate(comms)[order].astype(np.int64)  # an id: its 64 bits, as the blob route keeps them
    ranks = np.concatenate(nranks)[order]
    return every[order], BlobValues(size, comm, np.where(ranks > 0, ranks, 0).astype(np.int64), 0)


def _original_names(reader) -> dict[str, str]:
    """Sanitized identifier -> the field's own name (NVTX_EXPORT_TRANSLATION; empty without one)."""
    if TRANSLATION_TABLE not in reader.tables:
        return {}
    return {str(s): str(o) for o, s in reader.query(f"SELECT originalName, sanitizedName FROM {TRANSLATION_TABLE}")}


def _columns(reader, table: str, schema: int, names: dict[str, str]) -> dict[str, str] | None:
    """{'event': eventId, then 'size'/'comm'/'nranks': the column of the first field (in the schema's entry order)
    whose name each pattern finds}; None without an eventId column or any such field."""
    columns = [str(row[1]) for row in reader.query(f"PRAGMA table_info({table})") if SAFE_NAME.match(str(row[1]))]
    if EVENT_COLUMN not in columns:
        return None
    order = _entry_order(reader, schema)
    fields = sorted((c for c in columns if c != EVENT_COLUMN), key=lambda c: order.get(names.get(c, c), len(order)))
    found = {"event": EVENT_COLUMN}
    for kind, pattern in (("size", SIZE_KEY), ("comm", COMM_KEY), ("nranks", NRANKS_KEY)):
        for column in fields:
            name = names.get(column, column)
            if pattern.search(name) if pattern is SIZE_KEY else pattern.match(name.strip()):
                found[kind] = column
                break
    return found if len(found) > 1 else None


def _entry_order(reader, schema: int) -> dict[str, int]:
    """The schema's field names by entry index (NVTX_PAYLOAD_SCHEMA_ENTRIES), so the first matching field is the
    blob route's first."""
    if ENTRY_TABLE not in reader.tables:
        return {}
    rows = reader.query(f"SELECT name, min(idx) FROM {ENTRY_TABLE} WHERE schemaId = ? GROUP BY name", (schema,))
    return {str(name): int(idx) for name, idx in rows if isinstance(idx, int)}


def _column(values: np.ndarray, found: dict[str, str], kind: str, missing) -> np.ndarray:
    """One found field's values as float64 (sizes) or int64 (ids, counts); `missing` where the schema has none."""
    if kind not in found:
        return np.full(len(values), missing, dtype=np.float64 if kind == "size" else np.int64)
    column = values[:, list(found).index(kind)]
    if kind == "size":
        return column.astype(np.float64)
    return np.asarray([missing if isinstance(v, float) else int(v) for v in column], dtype=np.int64)
