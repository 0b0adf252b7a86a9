"""The counters' JSON generic events read from the file's pages (pagescan + jsonvals.c's spans) give the series
SQLite's path gives: on the real A100 export, on a copy of it whose objects spill to overflow pages, on the EFA
fixtures, without the JSON helper, and where a value is not what nsys writes (SQLite's path decides)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from counter_fixtures import EFA_FIELDS, Counters
from native_built import do_without, require_built
from real_exports import decompress
from test_counters import MS, export_with

from nsyskit.analysis.read import counterread, pagescan
from nsyskit.analysis.read.reader import ExportReader
from nsyskit.native import jsonvals

A100 = "aiprofiler_a100_secondOptimization.sqlite"
STAMPS = ["timestamp", "rawTimestamp"]


@pytest.fixture(scope="module")
def a100(tmp_path_factory):
    return decompress(A100, tmp_path_factory.mktemp("a100-pages"))


def both_ways(path, monkeypatch) -> tuple[list, list]:
    """(series, warnings) read with the page reader, then through SQLite (NSYSKIT_PAGE_SCAN=0)."""
    found = []
    for setting in ("1", "0"):
        monkeypatch.setenv(pagescan.DISABLE_VARIABLE, setting)
        reader = ExportReader(path)
        try:
            found.append((reader.counters(), reader.warnings))
        finally:
            reader.close()
    monkeypatch.delenv(pagescan.DISABLE_VARIABLE)
    return found[0], found[1]


def assert_same(first: list, second: list) -> None:
    assert len(first) == len(second) and first
    for a, b in zip(first, second, strict=True):
        assert (a.kind, a.device, a.metric, a.unit, a.device_id) == (b.kind, b.device, b.metric, b.unit, b.device_id)
        assert a.start.dtype == b.start.dtype and a.value.dtype == b.value.dtype
        assert np.array_equal(a.start, b.start) and np.array_equal(a.end, b.end)
        assert np.array_equal(a.value, b.value, equal_nan=True), a.metric


def paged(path, type_id: int) -> tuple | None:
    """The page path's (times, values) of one type, None where it leaves the type to SQLite."""
    reader = ExportReader(path)
    try:
        return counterread._paged_json_events(reader, type_id, counterread._types(reader)[type_id][1], STAMPS)
    finally:
        reader.close()


def gpu_type(path) -> int:
    with sqlite3.connect(path) as con:
        return con.execute("SELECT DISTINCT typeId FROM GENERIC_EVENTS").fetchone()[0]


def test_the_real_export_reads_the_same_from_the_pages(a100, monkeypatch):
    require_built(pagescan, pagescan.functions, "pagescan")
    require_built(jsonvals, jsonvals.function, "jsonvals")
    assert paged(a100, gpu_type(a100)) is not None  # the pages, not SQLite, answered
    (pages, page_warnings), (sql, sql_warnings) = both_ways(a100, monkeypatch)
    assert len(pages) == 22 and len(pages[0].value) == 76_502
    assert_same(pages, sql)
    assert page_warnings == sql_warnings == []
    do_without(monkeypatch, jsonvals, jsonvals.function)  # the page reader without the JSON helper: numpy's parse
    (without, _), _ = both_ways(a100, monkeypatch)
    assert_same(without, sql)


def test_objects_spilling_to_overflow_pages_are_copied_and_read_the_same(a100, tmp_path, monkeypatch):
    """512-byte pages: each ~1.2 kB object continues on overflow pages, so it does not lie in one place in the file."""
    small = tmp_path / "small-pages.sqlite"
    with sqlite3.connect(small) as con:
        con.execute("PRAGMA page_size = 512")
        con.execute("ATTACH ? AS real", (str(a100),))
        for table, limit in (("StringIds", ""), ("EXPORT_META_DATA", ""), ("GENERIC_EVENT_SOURCES", ""),
                             ("GENERIC_EVENT_TYPES", ""), ("GENERIC_EVENTS", " ORDER BY rowid LIMIT 3000")):  # fmt: skip
            con.execute(con.execute("SELECT sql FROM real.sqlite_master WHERE name = ?", (table,)).fetchone()[0])
            con.execute(f"INSERT INTO main.{table} SELECT * FROM real.{table}{limit}")
    assert paged(small, gpu_type(small)) is not None
    (pages, _), (sql, _) = both_ways(small, monkeypatch)
    assert len(pages[0].value) == 3000
    assert_same(pages, sql)


def test_efa_json_fixtures_and_odd_values_read_the_same(tmp_path, monkeypatch):
    gb = 1e9
    efa = {0: [(0, {EFA_FIELDS[0]: 2 * gb, EFA_FIELDS[2]: 1 * gb}), (50 * MS, {EFA_FIELDS[0]: 4.5 * gb}),
               (100 * MS, {})], 3: [(0, {EFA_FIELDS[2]: 0.5 * gb}), (100 * MS, {})]}  # fmt: skip
    path = export_with(tmp_path / "efa.sqlite", Counters(efa=efa, efa_json=True))
    (pages, _), (sql, _) = both_ways(path, monkeypatch)
    assert {s.device for s in pages} == {"EFA 0", "EFA 3"}
    assert_same(pages, sql)
    with sqlite3.connect(path) as con:  # an event holding no JSON object: left out and warned about either way
        (type_id,) = con.execute("SELECT typeId FROM GENERIC_EVENTS ORDER BY rowid LIMIT 1").fetchone()
        con.execute("UPDATE GENERIC_EVENTS SET data = 'not json' WHERE rowid = (SELECT min(rowid) FROM GENERIC_EVENTS)")
    assert paged(path, type_id) is not None
    (pages, page_warnings), (sql, sql_warnings) = both_ways(path, monkeypatch)
    assert_same(pages, sql)
    assert page_warnings == sql_warnings and "no JSON object" in page_warnings[0]
    with sqlite3.connect(path) as con:  # a time that is no integer: SQLite's path decides (and warns)
        con.execute("UPDATE GENERIC_EVENTS SET timestamp = 2.5 WHERE rowid = (SELECT max(rowid) FROM GENERIC_EVENTS "
                    "WHERE typeId = ?)", (type_id,))  # fmt: skip
    assert paged(path, type_id) is None
    (pages, page_warnings), (sql, sql_warnings) = both_ways(path, monkeypatch)
    assert_same(pages, sql)
    assert page_warnings == sql_warnings and "not integers" in page_warnings[0]
