"""NCCL's payloads as nsys 2026.4 exports them with --dynamic-tables=all (Nsight Systems' SQLite schema reference,
schema 3.28.1): one DYNAMIC_NVTXPAYLOAD_DATATYPE_<globalPid>_<domainId>_<schemaId> table per schema, a column per
field under a sanitized name, rows joined to NVTX_EVENTS on eventId; uint64 values stored signed. They give the
collectives table the jsonText form of the same payloads gives."""

from __future__ import annotations

import re
import sqlite3
import struct

import pytest
from nccl_payloads import FORMATS, LAYOUTS, SCHEMA_BASE, nccl_export, planted_calls
from nsys_fixtures import write_export
from test_ncclpayload import operations

from nsyskit.analysis.read import nvtxread
from nsyskit.analysis.read.discover import open_export
from nsyskit.analysis.read.payloadblob import exported_without_values


def sanitized(name: str) -> str:
    """An identifier for a field name, as the dynamic export makes one (its rule is nsys's; the translation table
    is what the reader goes by, so any rule serves here)."""
    return re.sub(r"\W", "_", name)


def as_dynamic_tables(path, layout: str) -> None:
    """Turn a blob-form export into the --dynamic-tables form: each blob's fields into its schema's table (the
    uint64 communicator ids above 2^63 stored as the signed integers of their bits), linked by eventId (the
    rowid), the names' translation beside; binaryData emptied, as an export without --include-blobs has it."""
    entries = {SCHEMA_BASE + sid: (size, fields) for sid, size, fields in LAYOUTS[layout].values()}
    con = sqlite3.connect(path)
    rows = con.execute("SELECT rowid, globalTid >> 24 << 24, domainId, CAST(binaryData AS BLOB) FROM NVTX_EVENTS "
                       "WHERE binaryData IS NOT NULL")
    con.execute("CREATE TABLE NVTX_EVENTS_PAYLOAD_SCHEMAS (eventId INTEGER NOT NULL, globalPid INTEGER NOT NULL, "
                "domainId INTEGER NOT NULL, payloadSchemaID INTEGER NOT NULL)")  # fmt: skip
    con.execute("CREATE TABLE NVTX_EXPORT_TRANSLATION (originalName TEXT NOT NULL, sanitizedName TEXT NOT NULL)")
    made, names = set(), set()
    for event, process, domain, data in rows.fetchall():
        schema = struct.unpack_from("<Q", data, 8)[0]
        _size, fields = entries[schema]
        table = f"DYNAMIC_NVTXPAYLOAD_DATATYPE_{process}_{domain}_{schema}"
        columns = [sanitized(name) for _kind, name, _offset in fields]
        if table not in made:
            typed = ", ".join(column + " INTEGER" for column in columns)
            con.execute(f"CREATE TABLE {table} (eventId INTEGER NOT NULL, {typed})")
            made.add(table)
        values = [struct.unpack_from(FORMATS[kind], data, 32 + (offset or 0))[0] for kind, _name, offset in fields]
        signed = [v - (1 << 64) if v >= 1 << 63 else v for v in values]
        con.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * (len(values) + 1))})", (event, *signed))
        con.execute("INSERT INTO NVTX_EVENTS_PAYLOAD_SCHEMAS VALUES (?, ?, ?, ?)", (event, process, domain, schema))
        names.update((name, sanitized(name)) for _kind, name, _offset in fields)
    con.executemany("INSERT INTO NVTX_EXPORT_TRANSLATION VALUES (?, ?)", sorted(names))
    con.execute("UPDATE NVTX_EVENTS SET binaryData = NULL")
    con.commit()
    con.close()


@pytest.mark.parametrize("read", ["pages", "sqlite columns", "sqlite rows"])
@pytest.mark.parametrize("layout", ["2.19", "2.28"])
def test_payload_tables_give_the_json_forms_collectives_table(tmp_path, monkeypatch, layout, read):
    """In each of the reader's three ways through NVTX_EVENTS (the file's pages, SQLite's columnar scans, one
    row-wise query)."""
    tables = write_export(tmp_path / "tables.sqlite", nccl_export(layout, "blob"))
    as_dynamic_tables(tables, layout)
    if read != "pages":
        monkeypatch.setattr(nvtxread, "_read_pages", lambda *_args: None)
    if read == "sqlite rows":
        monkeypatch.setattr(nvtxread, "_read_columnar", lambda *_args: None)
    from_tables, warnings = operations(tables)
    jsons, _ = operations(write_export(tmp_path / "json.sqlite", nccl_export(layout, "json")))
    assert len(from_tables) == len([c for c in planted_calls() if c.api in LAYOUTS[layout]]) and warnings == []
    for column in from_tables.columns:
        if column != "size_origin":
            assert str(from_tables[column].tolist()) == str(jsons[column].tolist()), column
    assert set(from_tables["size_origin"]) == {"payload"}


def test_a_payload_tables_export_is_not_one_without_values(tmp_path):
    """Its binaryData is empty, yet the values are there: no re-export for them, no missing-payload warning."""
    path = write_export(tmp_path / "tables.sqlite", nccl_export("2.28", "blob"))
    as_dynamic_tables(path, "2.28")
    reader = open_export(path)
    try:
        assert not exported_without_values(reader)
    finally:
        reader.close()
