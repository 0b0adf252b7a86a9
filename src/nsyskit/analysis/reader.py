"""The one module that knows the Nsight Systems SQLite export schema and its differences between versions.

Every other analysis module sees clean numpy columns. What differs between nsys versions (2020.5 … 2026.x, export
schemas 2.9 … 3.25) and is handled here, and only here:
- table name variants (GPU info, kernel tables, EXPORT_META_DATA -> META_DATA_EXPORT) and tables that are missing
  (CPU-only reports have no CUPTI tables; derived files lack TARGET_INFO_GPU) -> empty columns;
- names stored as StringIds references (kernel names, NVTX registered strings `textId`, possibly pruned) or as text
  (NVTX `text`), and columns only some versions have (`textId`, payload columns, `jsonText`);
- values of the wrong type (text, BLOB or NULL where an integer belongs) and activities ending before they start:
  left out with a warning, never a wrong number;
- several processes (ranks) in one file: every read can be scoped to one process (`pid`, a globalPid).
Parts of this reader, each in its own module: the GPU activities (kernels, memcpys, memsets: activityread.py, a
mixin), the NVTX ranges (nvtxread.py) and the CUDA API calls that launched kernels (launchread.py).

Large tables are read from the file's pages by C when every value is what it should be (pagescan.read_columns:
no SQLite virtual machine), else columnar through SQLite (sqlitefile.packed_scan: one scan, an aggregate per column:
blobagg's int64s BLOB of int64s where it can be built, else `group_concat` text parsed by numpy), which also leaves
out and reports bad rows.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np

from nsyskit.analysis import blobagg, pagescan, sqlitefile
from nsyskit.analysis.activityread import (  # noqa: F401  (the activity tables, named here too)
    KERNEL_NAME_COLUMNS,
    KERNEL_TABLES,
    MEMCPY_KINDS,
    MEMCPY_TABLES,
    MEMSET_TABLES,
    PID_SQL,
    GpuActivities,
)
from nsyskit.analysis.launchread import RUNTIME_TABLES, read_launch_calls, read_runtime_rows
from nsyskit.analysis.nvtxread import NVTX_RANGE_TYPES, NVTX_TABLES, PID_SHIFT, read_nvtx_ranges
from nsyskit.analysis.records import Intervals, Launches, NvtxRanges, distinct, join_launches
from nsyskit.analysis.sqlitefile import REEXPORT, connect, decode_text, read_ints, sqlite3
from nsyskit.analysis.sqlitefile import as_text as _text
from nsyskit.errors import ReportFileError

__all__ = ["ExportReader", "Intervals", "Launches", "NvtxRanges", "distinct"]

GPU_TABLES = ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU", "TARGET_INFO_CUDA_DEVICE")
META_TABLES = ("EXPORT_META_DATA", "META_DATA_EXPORT")  # renamed in 2023.x exports
# The export tables by which a file is recognised as an Nsight Systems export.
NSYS_MARKER_TABLES = ("StringIds", *META_TABLES, "TARGET_INFO_SESSION_START_TIME", "ANALYSIS_DETAILS")


class ExportReader(GpuActivities):
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

    # ---- schema helpers -------------------------------------------------------------------------------------

    def _query(self, sql: str, params: tuple = ()) -> list[tuple]:
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
        return {row[1] for row in self._query(f"PRAGMA table_info({table})")}

    def _read_ints(
        self, table: str, exprs: dict[str, str], raw: tuple[str, ...], where: str = ""
    ) -> dict[str, np.ndarray]:
        """Integer expressions over `table`'s rows as int64 columns; rows with a non-integer in `raw` left out, warned."""
        return read_ints(self._query, self.warn, self.path, table, exprs, raw, where, self.blob, self.bound(table))

    def bound(self, table: str) -> int | None:
        """At least the row count of `table` (None unknown): int64s_into then writes straight into numpy memory."""
        if not self.blob:
            return None
        if table not in self._bounds:
            self._bounds[table] = sqlitefile.rows_bound(self.con, table)
        return self._bounds[table]

    def pages(
        self, table: str, columns: dict[str, str], pid: int | None = None, kinds: tuple[str, ...] = ()
    ) -> dict[str, np.ndarray] | None:
        """`columns` (key -> column name) of every row of `table`, of process `pid` only when given, read from the
        file's pages (pagescan); plus "<key>:kind" for the columns named in `kinds`. None: read through SQLite."""
        names = list(columns.values())
        scope = None
        if pid is not None:  # the same test as _scope's SQL
            scope = "globalPid" if "globalPid" in self.columns(table) else "globalTid"
            names.append(scope)
        found = pagescan.read_columns(self.con, self.path, table, tuple(dict.fromkeys(names)), kinds)
        if found is None:
            return None
        out = {key: found[column] for key, column in columns.items()}
        out.update({f"{key}:kind": found[f"{column}:kind"] for key, column in columns.items() if column in kinds})
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
                for i, v in self._query(f"SELECT id, value FROM StringIds WHERE id IN ({marks})", tuple(part))
            )
        return found

    # ---- metadata ------------------------------------------------------------------------------------------

    @cached_property
    def meta(self) -> dict[str, str]:
        """The export's metadata table (EXPORT_META_DATA, META_DATA_EXPORT in 2023+) as a dict; empty without one."""
        table = self.table(META_TABLES)
        if not table:
            return {}
        return {_text(name): _text(value) for name, value in self._query(f"SELECT name, value FROM {table}")}

    @property
    def nsys_version(self) -> str:
        """The nsys version that wrote the export ('' when unknown)."""
        return self.meta.get("EXPORT_PRODUCT_VERSION", "")

    @cached_property
    def system_env(self) -> dict[str, str]:
        """TARGET_INFO_SYSTEM_ENV name -> value (hostname, CPU, driver...); binary values (nsys <= 2022.4) decoded lossily."""
        if "TARGET_INFO_SYSTEM_ENV" not in self.tables:
            return {}
        return {
            _text(name): _text(value) for name, value in self._query("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV")
        }

    @cached_property
    def session(self) -> tuple[int, int]:
        """The capture's (start, stop) in the export's ns timeline; (0, 0) when unknown."""
        if "ANALYSIS_DETAILS" in self.tables and {"startTime", "stopTime"} <= self.columns("ANALYSIS_DETAILS"):
            row = self._query("SELECT min(startTime), max(stopTime) FROM ANALYSIS_DETAILS")[0]
            if isinstance(row[0], int) and isinstance(row[1], int):
                return row[0], row[1]
        return 0, 0

    def gpus(self) -> dict[int, str]:
        """Device id -> GPU name (empty on CPU-only reports and on files without a GPU table)."""
        table = self.table(GPU_TABLES)
        if not table:
            return {}
        cols = self.columns(table)
        id_col = "id" if "id" in cols else "cuDevice" if "cuDevice" in cols else None
        if not id_col or "name" not in cols:
            return {}
        return {int(i): _text(n) for i, n in self._query(f"SELECT {id_col}, name FROM {table}") if isinstance(i, int)}

    def processes(self, kernels: Intervals | None = None) -> list[int]:
        """The globalPids with GPU activity (kernels, memcpys, memsets), sorted; one per rank recorded in this file.

        `kernels`: the whole file's kernels read with their `pid` (see kernels()), which spares a scan of the table.
        """
        pids: set[int] = set()
        tables = [self.table(KERNEL_TABLES), self.table(MEMCPY_TABLES), self.table(MEMSET_TABLES)]
        if kernels is not None and "pid" in kernels.extra:
            pid = kernels.extra["pid"]
            one = len(pid) and bool((pid == pid[0]).all())  # one process (the usual file): no sort of the ids
            pids.update(int(p) for p in (pid[:1] if one else distinct(pid)) if p != 0)  # 0: not an integer in the file
            tables = tables[1:]
        for table in tables:
            if table and "globalPid" in self.columns(table):
                pids.update(p for (p,) in self._query(f"SELECT DISTINCT globalPid FROM {table}") if isinstance(p, int))
        return sorted(pids)

    def _scope(self, table: str, pid: int | None, column: str = "globalPid", alias: str = "") -> str:
        """The WHERE condition selecting one process's rows ('' for the whole file)."""
        if pid is None:
            return ""
        if column == "globalPid" and column in self.columns(table):
            return f"{alias}globalPid = {int(pid)}"
        return f"({alias}globalTid >> {PID_SHIFT}) = {int(pid) >> PID_SHIFT}"

    # ---- activities ----------------------------------------------------------------------------------------

    def has_launches(self) -> bool:
        """Whether the export has CUDA API rows (the launches the NVTX-to-GPU join needs)."""
        runtime = self.table(RUNTIME_TABLES)
        return bool(runtime and self._query(f"SELECT EXISTS (SELECT 1 FROM {runtime})")[0][0])

    def has_nvtx_ranges(self) -> bool:
        """Whether the export has NVTX ranges (without reading them)."""
        table, types = self.table(NVTX_TABLES), ",".join(str(t) for t in NVTX_RANGE_TYPES)
        return bool(table and self._query(f"SELECT EXISTS (SELECT 1 FROM {table} WHERE eventType IN ({types}))")[0][0])

    def runtime_rows(self) -> dict[str, np.ndarray] | None:
        """Every CUDA API call's thread, start and correlation id from the file's pages (see launchread)."""
        return read_runtime_rows(self)

    def launch_calls(self, threads: np.ndarray, rows: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(thread, start, correlationId) of the CUDA API calls made on `threads` (see launchread)."""
        return read_launch_calls(self, threads, rows)

    def launches(self, kernels: Intervals, threads: np.ndarray) -> Launches:
        """The CUDA API calls on `threads` that launched `kernels` (read with correlation=True), joined in numpy."""
        return join_launches(*self.launch_calls(threads), kernels)

    def nvtx_ranges(self, pid: int | None = None) -> NvtxRanges:
        """NVTX push/pop and start/end ranges that ended, text resolved from `text` or `textId`; bad rows left out."""
        return read_nvtx_ranges(self, pid)
