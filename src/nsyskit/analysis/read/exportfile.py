"""One nsys SQLite export opened for reading: the file-level interface the reader's parts build on.

ExportFile checks the file (a whole SQLite file with nsys's tables), runs queries (corrupt files and non-UTF-8 text
handled), names tables and columns, reads integer columns (pages first, then SQLite) and scopes reads to one process.
The parts of the reader (activityread, launchread, nvtxread) use only this public interface; reader.ExportReader
puts them together.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nsyskit.analysis.read import blobagg, pagescan, sqlitefile
from nsyskit.analysis.read.records import distinct
from nsyskit.analysis.read.sqlitefile import REEXPORT, connect, decode_text, read_ints, sqlite3
from nsyskit.analysis.read.sqlitefile import as_text as _text
from nsyskit.errors import ReportFileError

META_TABLES = ("EXPORT_META_DATA", "META_DATA_EXPORT")  # renamed in 2023.x exports
# The export tables by which a file is recognised as an Nsight Systems export.
NSYS_MARKER_TABLES = ("StringIds", *META_TABLES, "TARGET_INFO_SESSION_START_TIME", "ANALYSIS_DETAILS")
PID_SHIFT = 24  # globalTid / globalPid: the process id sits above the low 24 bits (the thread id)


class ExportFile:
    """Read-only access to one nsys SQLite export; raises ReportFileError naming the file for unusable files.

    Problems that do not stop the analysis (bad rows left out, a missing name column) are collected in `warnings`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.warnings: list[str] = []
        self.con = connect(self.path)
        self.blob = blobagg.load(self.con)  # int64s(): integer columns read without text conversion
        self._bounds: dict[str, int | None] = {}
        try:
            self.tables = {
                row[0] for row in self.con.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")
            }
        except sqlite3.DatabaseError as exc:
            raise ReportFileError(self.path, f"corrupt SQLite file ({exc})", REEXPORT) from None
        if not any(t in self.tables for t in NSYS_MARKER_TABLES):
            problem, fix = "not an Nsight Systems export (no StringIds/EXPORT_META_DATA tables)", "pass a .nsys-rep"
            raise ReportFileError(self.path, problem, fix + " or the .sqlite 'nsys export' writes")

    def close(self) -> None:
        """Close the database connection."""
        self.con.close()

    def warn(self, message: str) -> None:
        """Record a problem that does not stop the analysis (shown once per file)."""
        if message not in self.warnings:
            self.warnings.append(message)

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        """The rows of an SQL query; non-UTF-8 text decoded lossily; a corrupt file raises ReportFileError naming it."""
        try:
            try:
                return self.con.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if "decode" not in str(exc).lower():
                    raise
            # Text that is not UTF-8 (binary blobs of old exports): decoded with replacement, for this query only:
            # a Python decode per value is ~2x slower than the C one.
            self.con.text_factory = decode_text
            try:
                return self.con.execute(sql, params).fetchall()
            finally:
                self.con.text_factory = str
        except sqlite3.DatabaseError as exc:
            raise ReportFileError(self.path, f"corrupt or truncated export ({exc})", REEXPORT) from None

    def table(self, candidates: tuple[str, ...]) -> str | None:
        """The first of the candidate table names this export has, or None (a CPU-only report has no CUPTI tables)."""
        return next((name for name in candidates if name in self.tables), None)

    def columns(self, table: str) -> set[str]:
        """The column names of a table."""
        return {row[1] for row in self.query(f"PRAGMA table_info({table})")}

    def read_ints(
        self, table: str, exprs: dict[str, str], raw: tuple[str, ...], where: str = ""
    ) -> dict[str, np.ndarray]:
        """Integer expressions over `table`'s rows as int64 columns; rows with a non-integer in `raw` left out, warned."""
        return read_ints(self.query, self.warn, self.path, table, exprs, raw, where, self.blob, self.bound(table))

    def bound(self, table: str) -> int | None:
        """At least the row count of `table` (None unknown): int64s_into then writes straight into numpy memory."""
        if not self.blob:
            return None
        if table not in self._bounds:
            self._bounds[table] = sqlitefile.rows_bound(self.con, table)
        return self._bounds[table]

    def pages(
        self, table: str, columns: dict[str, str], pid: int | None = None, kinds: tuple[str, ...] = (),
        texts: tuple[str, ...] = (),
    ) -> dict[str, np.ndarray] | None:  # fmt: skip
        """`columns` (key -> column name) of every row of `table`, of process `pid` only when given, read from the
        file's pages (pagescan); plus "<key>:kind" for the columns named in `kinds` and "<key>:text" (pagescan's
        texts) for those named in `texts`. None: read through SQLite."""
        names = list(columns.values())
        scope = None
        if pid is not None:  # the same test as scope()'s SQL
            scope = "globalPid" if "globalPid" in self.columns(table) else "globalTid"
            names.append(scope)
        found = pagescan.read_columns(self.con, self.path, table, tuple(dict.fromkeys(names)), kinds, texts)
        if found is None:
            return None
        out = {key: found[column] for key, column in columns.items()}
        out.update({f"{key}:kind": found[f"{column}:kind"] for key, column in columns.items() if column in kinds})
        out.update({f"{key}:text": found[f"{column}:text"] for key, column in columns.items() if column in texts})
        if pid is not None:
            if f"{scope}:kind" in found and (found[f"{scope}:kind"] != pagescan.KIND_CODES["integer"]).any():
                return None  # a process id that is not an integer: SQLite's comparison decides
            own = found[scope] == pid if scope == "globalPid" else (found[scope] >> PID_SHIFT) == (pid >> PID_SHIFT)
            if not own.all():
                out = {key: values[own] for key, values in out.items()}
        return out

    def strings(self, ids: np.ndarray) -> dict[int, str]:
        """StringIds values for the given ids (ids a derived file pruned from StringIds are absent)."""
        if "StringIds" not in self.tables:
            return {}
        wanted = [int(i) for i in distinct(ids)]
        found: dict[int, str] = {}
        for chunk in range(0, len(wanted), 500):
            part = wanted[chunk : chunk + 500]
            marks = ",".join("?" * len(part))
            found.update(
                (int(i), _text(v))
                for i, v in self.query(f"SELECT id, value FROM StringIds WHERE id IN ({marks})", tuple(part))
            )
        return found

    def scope(self, table: str, pid: int | None, column: str = "globalPid", alias: str = "") -> str:
        """The WHERE condition selecting one process's rows ('' for the whole file)."""
        if pid is None:
            return ""
        if column == "globalPid" and column in self.columns(table):
            return f"{alias}globalPid = {int(pid)}"
        return f"({alias}globalTid >> {PID_SHIFT}) = {int(pid) >> PID_SHIFT}"
