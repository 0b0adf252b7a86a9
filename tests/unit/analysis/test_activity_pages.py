"""The GPU activity reads from the file's pages (pagescan) give what the reads through SQLite give, bad rows included."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from nsys_fixtures import Export, Kernel, Memop, gpid, write_export

from nsyskit.analysis.read import pagescan
from nsyskit.analysis.read.reader import ExportReader


def _columns(intervals) -> dict:
    return {"start": intervals.start.tolist(), "end": intervals.end.tolist(), "device": intervals.device.tolist(),
            **{name: values.tolist() for name, values in sorted(intervals.extra.items())}}  # fmt: skip


def _reads(path, monkeypatch, pid=None) -> list:
    """(kernels, memcpys, memsets, warnings) read from the pages, then through SQLite."""
    results = []
    for pages in ("1", "0"):
        monkeypatch.setenv("NSYSKIT_PAGE_SCAN", pages)
        reader = ExportReader(path)
        results.append((_columns(reader.kernels(pid, correlation=True, with_pid=True)), _columns(reader.memcpys(pid)),
                        _columns(reader.memsets(pid)), reader.warnings))  # fmt: skip
    return results


@pytest.mark.parametrize("src_dst", [(0, 1), (1, 0), (None, 0), (0, None), (None, None), (1, 1), ("x", 0), ("x", 1)])
def test_pageable_copies_are_what_sqlite_says(tmp_path, monkeypatch, src_dst):
    # pageable is coalesce(srcKind = 0 OR dstKind = 0, 0): NULL and text sides included, read from the pages or not.
    copies = [Memop(10 * i, 10 * i + 5, bytes=64, kind=1, src_kind=1, dst_kind=1) for i in range(20)]
    path = write_export(tmp_path / "m.sqlite", Export(kernels=[Kernel(0, 5, "k")], memops=copies))
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET srcKind = ?, dstKind = ? WHERE start = 30", src_dst)
    con.commit()
    con.close()
    pages_read, sql_read = _reads(path, monkeypatch)
    assert pages_read == sql_read
    sides = ("srcKind", "dstKind")
    monkeypatch.setenv("NSYSKIT_PAGE_SCAN", "1")  # the pages can read it (not a fallback to SQLite)
    assert pagescan.read_columns(sqlite3.connect(path), path, "CUPTI_ACTIVITY_KIND_MEMCPY", sides, sides) is not None
    expected = 1 if 0 in src_dst else 0
    assert pages_read[1]["pageable"][3] == expected and sum(pages_read[1]["pageable"]) == expected


def test_one_process_of_a_shared_file_from_the_pages(tmp_path, monkeypatch):
    # Two processes in one file (torchrun ranks recorded together): each one's share, as the SQL WHERE gives it.
    first, second = gpid(11), gpid(12)
    kernels = [Kernel(i, i + 3, "k", pid=first if i % 3 else second) for i in range(0, 300, 5)]
    copies = [Memop(i, i + 2, bytes=8, kind=2, pid=first if i % 2 else second) for i in range(0, 100, 7)]
    path = write_export(tmp_path / "two.sqlite", Export(kernels=kernels, memops=copies))
    assert pagescan.read_columns(sqlite3.connect(path), path, "CUPTI_ACTIVITY_KIND_KERNEL", ("start",)) is not None
    for pid in (first, second):
        pages_read, sql_read = _reads(path, monkeypatch, pid)
        assert pages_read == sql_read and set(pages_read[0]["pid"]) == {pid}


def test_bad_rows_are_left_out_alike(tmp_path, monkeypatch):
    # A text start, a REAL size and an activity ending before it starts: the pages give way to SQLite's read,
    # which leaves them out with a warning; a file with no such row is read from the pages with the same result.
    copies = [Memop(10 * i, 10 * i + 5, bytes=64, kind=1) for i in range(10)]
    path = write_export(
        tmp_path / "bad.sqlite", Export(kernels=[Kernel(i, i + 2, "k") for i in range(9)], memops=copies)
    )
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'late' WHERE start = 3")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 2.5 WHERE start = 20")
    con.execute('UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET "end" = 1 WHERE start = 40')
    con.commit()
    con.close()
    pages_read, sql_read = _reads(path, monkeypatch)
    assert pages_read == sql_read
    kernels, memcpys, _memsets, warnings = pages_read
    assert 3 not in kernels["start"] and len(memcpys["start"]) == 8 and len(warnings) == 3
    assert np.all(np.diff(kernels["start"]) > 0)
