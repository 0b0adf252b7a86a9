"""Test helper: pagescan's reads compared with SQLite's, table by table, column by column, as integers (REAL values
as their bits) and as texts (also run as a script on damaged files in a child process, so that a crash fails the
test instead of killing pytest).

Script: python pagescan_check.py FILE... prints one line per file: `ok R N` (R reads equal to SQLite's, N None),
`sqlite-failed` (SQLite cannot read it: only the absence of a crash is checked) or `DIFFERS <what>`.
PAGESCAN_LIBRARY=path.so reads with that build of pagescan.c (e.g. one made with -fsanitize=address,undefined).
"""

from __future__ import annotations

import ctypes
import os
import sqlite3
import sys
from pathlib import Path

import numpy as np

from nsyskit.analysis.read import pagescan

KINDS = {"null": 0, "integer": 1, "real": 2, "text": 3, "blob": 4}


def quoted(name: str) -> str:
    """An SQL identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


def rowid_tables(con) -> list[str]:
    """The tables of the file that have rowids (no views, no WITHOUT ROWID, no virtual or internal tables)."""
    rows = con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND rootpage > 0").fetchall()
    return [name for name, sql in rows if not name.startswith("sqlite_") and "WITHOUT ROWID" not in sql.upper()]


def columns_of(con, table: str) -> list[str]:
    """The table's column names, in order."""
    return [row[1] for row in con.execute(f"PRAGMA table_xinfo({quoted(table)})")]


def real_bits(value: float) -> int:
    """The IEEE-754 bits of a double, as an int64."""
    return int(np.array([value], dtype=np.float64).view(np.int64)[0])


def as_text(value) -> str | None:
    """A value as nsyskit shows SQLite's result as text: str kept, bytes decoded (errors replaced), str() of numbers."""
    if value is None or isinstance(value, str):
        return value
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def sqlite_read(con, table: str, columns: list[str]) -> tuple[list[int], dict[str, tuple]]:
    """(rowids, per column: (int64 values: INTEGER, a REAL's bits, else 0; kinds; texts as nsyskit shows them)) as
    SQLite's full scan reads them."""
    parts = ", ".join(f"{quoted(c)}, typeof({quoted(c)})" for c in columns)
    rows = con.execute(f"SELECT rowid, {parts} FROM {quoted(table)} NOT INDEXED").fetchall()
    result = {}
    for index, name in enumerate(columns):
        values = [r[1 + 2 * index] for r in rows]
        kinds = np.array([KINDS[r[2 + 2 * index]] for r in rows], dtype=np.uint8)
        # a NaN on disk is NULL, though typeof() says 'real' when it lies in an overflow page (it reads the serial
        # type only): pagescan says NULL, as the value SQLite returns
        kinds[(kinds == KINDS["real"]) & np.array([v is None for v in values], dtype=bool)] = KINDS["null"]
        ints = [v if k == 1 else real_bits(v) if k == 2 else 0 for v, k in zip(values, kinds, strict=True)]
        result[name] = (np.array(ints, dtype=np.int64), kinds, [as_text(v) for v in values])
    return [r[0] for r in rows], result


class Comparison:
    """What the reads of one file showed: how many, those that differ from SQLite, those that were None."""

    def __init__(self) -> None:
        self.reads = 0
        self.differs: list[str] = []
        self.none: list[str] = []

    def read(self, con, path: Path, table: str, columns: tuple[str, ...], kinds: tuple[str, ...] = (), texts=()):
        """pagescan's read, counted (and noted when None)."""
        self.reads += 1
        found = pagescan.read_columns(con, path, table, columns, kinds, texts)
        if found is None:
            if texts:
                self.none.append(f"{table}.{'/'.join(texts)} as texts")
            else:
                self.none.append(f"{table}.{'/'.join(columns)}{' with kinds' if kinds else ''}")
        return found

    def same_texts(self, found: np.ndarray, expected: list, what: str) -> None:
        """Note `what` when the texts differ from SQLite's (in length, type or value)."""
        if found.dtype != object or found.tolist() != expected:
            self.differs.append(what)

    def same(self, found: np.ndarray, expected: np.ndarray, what: str) -> None:
        """Note `what` when the two arrays differ (in length, type or values)."""
        if found.dtype != expected.dtype or not np.array_equal(found, expected):
            self.differs.append(what)


def compare_table(con, path: Path, table: str, comparison: Comparison, thorough: bool = True) -> None:
    """Every column of `table` read by pagescan (each alone with and without kinds when `thorough`, then all at once
    with kinds) against SQLite's full scan, into `comparison`."""
    columns = columns_of(con, table)
    rowids, expected = sqlite_read(con, table, columns)
    rowid = np.array(rowids, dtype=np.int64)
    read = comparison.read(con, path, table, ("rowid",))
    if read is not None:
        comparison.same(read["rowid"], rowid, f"{table}.rowid")
    for name in columns if thorough else ():
        values, kinds, texts = expected[name]
        both = comparison.read(con, path, table, (name, "rowid"), kinds=(name,))
        if both is not None:
            comparison.same(both[f"{name}:kind"], kinds, f"{table}.{name}:kind")
            comparison.same(both[name], values, f"{table}.{name} with kinds")
            comparison.same(both["rowid"], rowid, f"{table}.{name} rowids")
        as_texts = comparison.read(con, path, table, ("rowid",), texts=(name,))
        if as_texts is not None:
            comparison.same_texts(as_texts[f"{name}:text"], texts, f"{table}.{name}:text")
            comparison.same(as_texts[f"{name}:kind"], kinds, f"{table}.{name}:kind read as text")
            comparison.same(as_texts[name], values, f"{table}.{name} read as text")
        plain = pagescan.read_columns(con, path, table, (name,))
        if plain is not None:
            comparison.same(plain[name], values, f"{table}.{name} without kinds")
        if both is not None and (plain is None) != bool((kinds != 1).any()):
            comparison.differs.append(f"{table}.{name} without kinds: {'None' if plain is None else 'read'}")
    if columns:
        chosen = tuple(columns[: pagescan.MAX_COLUMNS])
        every = comparison.read(con, path, table, chosen, kinds=chosen)
        if every is not None:
            for name in chosen:
                comparison.same(every[name], expected[name][0], f"{table}.{name} read with all columns")
                comparison.same(every[f"{name}:kind"], expected[name][1], f"{table}.{name}:kind with all columns")
        every = comparison.read(con, path, table, ("rowid",), texts=chosen)
        if every is not None:
            for name in chosen:
                comparison.same_texts(every[f"{name}:text"], expected[name][2], f"{table}.{name}:text with all columns")
                comparison.same(every[name], expected[name][0], f"{table}.{name} with all columns as texts")
        raw = read_raw(con, path, table, chosen)  # the bytes where they lie (or copied), as the counters read them
        if raw is not None:
            for index, name in enumerate(chosen):
                cast = [
                    r[0] for r in con.execute(f"SELECT CAST({quoted(name)} AS BLOB) FROM {quoted(table)} NOT INDEXED")
                ]
                bytes_of = [
                    c if k in (KINDS["text"], KINDS["blob"]) else b""
                    for c, k in zip(cast, expected[name][1], strict=True)
                ]
                if raw[index] != bytes_of:
                    comparison.differs.append(f"{table}.{name} bytes where they lie")


def read_raw(con, path: Path, table: str, names: tuple[str, ...]) -> list[list[bytes]] | None:
    """Per column, each row's bytes as pagescan's raw read hands them over (its spans), or None."""

    def spans(found: dict, address: int, size: int, starts: np.ndarray, ends: np.ndarray) -> list[list[bytes]]:
        assert ((starts >= 0) & (starts <= ends) & (ends <= size)).all()
        return [[ctypes.string_at(address + int(a), int(b - a)) for a, b in zip(s, e, strict=True)]
                for s, e in zip(starts, ends, strict=True)]  # fmt: skip

    return pagescan.read_columns(con, path, table, ("rowid",), texts=names, raw=spans)


def compare_file(path: Path, thorough: bool = True) -> Comparison:
    """Every rowid table of the file compared (see compare_table)."""
    con = connect(path)
    comparison = Comparison()
    for table in rowid_tables(con):
        compare_table(con, path, table, comparison, thorough)
    return comparison


def connect(path: Path):
    """A read-only connection that decodes any text (exports hold binary text: TARGET_INFO_SYSTEM_ENV)."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    con.text_factory = lambda raw: raw.decode("utf-8", "replace")
    return con


def check_file(path: Path) -> str:
    """This file's verdict line (see the module's docstring)."""
    con = connect(path)
    tables: list[str] = []
    try:
        tables = rowid_tables(con)
        for table in tables:  # SQLite must read every row of every table first
            con.execute(f"SELECT * FROM {quoted(table)} NOT INDEXED").fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError, MemoryError):  # (UnicodeDecodeError: a damaged schema)
        try:  # whatever SQLite makes of it, pagescan must not crash (nor loop)
            for table in tables:
                names = tuple(columns_of(con, table)[: pagescan.MAX_COLUMNS])
                pagescan.read_columns(con, path, table, (*names, "rowid"), kinds=names)
                pagescan.read_columns(con, path, table, ("rowid",), texts=names)
                read_raw(con, path, table, names)
        except (sqlite3.DatabaseError, UnicodeDecodeError):
            pass
        return "sqlite-failed"
    comparison = Comparison()
    for table in tables:
        compare_table(con, path, table, comparison, thorough=False)
    if comparison.differs:
        return f"DIFFERS {' '.join(comparison.differs)}"
    return f"ok {comparison.reads - len(comparison.none)} {len(comparison.none)}"


def use_library(path: str) -> None:
    """Read through this compiled pagescan.c instead of the cached build."""
    pagescan._loaded[:] = [pagescan.bind(path)]


if __name__ == "__main__":
    if os.environ.get("PAGESCAN_LIBRARY"):
        use_library(os.environ["PAGESCAN_LIBRARY"])
    for argument in sys.argv[1:]:
        print(f"{argument} {check_file(Path(argument))}", flush=True)
