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
The NVTX read lives in nvtxread.py, a part of this reader.

Large tables are read from the file's pages by C when every value is what it should be (pagescan.read_columns:
no SQLite virtual machine), else columnar through SQLite (sqlitefile.packed_scan: one scan, an aggregate per column:
blobagg's int64s BLOB of int64s where it can be built, else `group_concat` text parsed by numpy), which also leaves
out and reports bad rows.
A kernel's duration and name id travel as ONE integer (duration * 2^b + name, b the bit length of the largest
StringId): one value less to aggregate.
"""

from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path

import numpy as np

from nsyskit.analysis import blobagg, pagescan, sqlitefile
from nsyskit.analysis.nvtxread import NVTX_RANGE_TYPES, NVTX_TABLES, PID_SHIFT, read_nvtx_ranges
from nsyskit.analysis.records import Intervals, Launches, NvtxRanges, distinct, join_launches
from nsyskit.analysis.sqlitefile import REEXPORT, connect, decode_text, packed_scan, read_ints, sqlite3
from nsyskit.analysis.sqlitefile import as_text as _text
from nsyskit.errors import ReportFileError

__all__ = ["ExportReader", "Intervals", "Launches", "NvtxRanges", "distinct"]

KERNEL_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")
MEMCPY_TABLES = ("CUPTI_ACTIVITY_KIND_MEMCPY",)
MEMSET_TABLES = ("CUPTI_ACTIVITY_KIND_MEMSET",)
RUNTIME_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME",)
GPU_TABLES = ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU", "TARGET_INFO_CUDA_DEVICE")
META_TABLES = ("EXPORT_META_DATA", "META_DATA_EXPORT")  # renamed in 2023.x exports
# Kernel name columns, best first: what `nsys stats` summarizes by default (the demangled, templated name).
KERNEL_NAME_COLUMNS = ("demangledName", "shortName", "mangledName")
# CUPTI's CUpti_ActivityMemcpyKind, the values of `copyKind` in every export version.
MEMCPY_KINDS = {
    0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
    8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD",
}  # fmt: skip
# The export tables by which a file is recognised as an Nsight Systems export.
NSYS_MARKER_TABLES = ("StringIds", *META_TABLES, "TARGET_INFO_SESSION_START_TIME", "ANALYSIS_DETAILS")
# A kernel's name StringId and its duration travel packed as duration * 2^b + name, b the bit length of the largest
# StringId, up to MAX_NAME_BITS (durations up to +-2^40 ns then still fit an int64; longer ones fall back).
MAX_NAME_BITS = 23
PID_SQL = "CASE WHEN typeof(globalPid) = 'integer' THEN globalPid ELSE 0 END"  # a kernel's process (0: not known)
MAX_CASE_THREADS = 32  # NVTX threads up to which the runtime read sends thread indices instead of globalTids


class ExportReader:
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

    @cached_property
    def _name_bits(self) -> int | None:
        """Bits that hold every StringId (names are references into StringIds), None when too many to pack names."""
        if "StringIds" not in self.tables:
            return None
        highest = int(self._query("SELECT max(id) FROM StringIds")[0][0] or 0)  # the rowid: one B-tree descent
        return max(1, highest.bit_length()) if 0 <= highest < (1 << MAX_NAME_BITS) else None

    def _durations_and_names(
        self, table: str, name_col: str | None, process: int | None, **more: str
    ) -> dict[str, np.ndarray]:
        """`duration` (end - start) and `name` (StringId, 0 without one) of every row (of `process`), plus `more`
        integer columns.

        From the file's pages when every value is an integer; else duration and name travel as one packed integer
        when the names fit; else (or when a value is not an integer) they are read as two columns, a name that is not
        an integer read as 0.
        """
        raw = ("start", "end", *(c for c in more.values() if c.isidentifier() and c not in ("start", "end")))
        raw_more = {key: "globalPid" if sql == PID_SQL else sql for key, sql in more.items()}  # a text pid: below
        if name_col and all(column.isidentifier() for column in raw_more.values()):
            cols = self.pages(table, {"start": "start", **raw_more, "end": "end", "name": name_col}, process)
            duration = None if cols is None else sqlitefile.span(cols["start"], cols["end"])
            if duration is not None:
                cols["duration"] = duration
                if "start" not in more:  # as below: `end` stays with `start`
                    del cols["start"], cols["end"]
                return cols
        where = self._scope(table, process)
        bits = self._name_bits
        if self.blob and name_col:  # raw columns, each checked by int64s itself: no arithmetic, no type check
            cols = packed_scan(self._query, table, {"start": "start", **raw_more, "end": "end", "name": name_col},
                               where, blob=True, bound=self.bound(table))  # fmt: skip
            duration = None if cols is None else sqlitefile.span(cols["start"], cols["end"])
            if duration is not None:
                cols["duration"] = duration
                if "start" not in more:  # `end` stays with `start`: callers need not add them up again
                    del cols["start"], cols["end"]
                return cols
        elif bits is not None and name_col:
            checks = sqlitefile.type_check(("end", name_col))  # the others are read as is (see _read_ints)
            exprs = {**more, "packed": f"(end - start) * {1 << bits} + {name_col}"}
            cols = packed_scan(self._query, table, exprs, where, checks, self.blob)
            if cols is not None:
                packed = cols.pop("packed")
                cols["duration"] = packed >> bits  # arithmetic shift: exact for negative durations too
                cols["name"] = packed & ((1 << bits) - 1)
                return cols
        name_sql = f"CASE WHEN typeof({name_col}) = 'integer' THEN {name_col} ELSE 0 END" if name_col else "0"
        return self._read_ints(table, {**more, "duration": "end - start", "name": name_sql}, raw, where)

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
            pids.update(int(p) for p in distinct(kernels.extra["pid"]) if p != 0)  # 0: not an integer in the file
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

    def kernel_name_column(self) -> str | None:
        """The kernel name column of this export (a StringIds reference); None (with a warning) when it has none."""
        table = self.table(KERNEL_TABLES)
        if not table:
            return None
        name = next((c for c in KERNEL_NAME_COLUMNS if c in self.columns(table)), None)
        if name is None:
            self.warn(
                f"{self.path}: {table} has no kernel name column ({'/'.join(KERNEL_NAME_COLUMNS)}); kernels are "
                f"summarized as one unnamed kernel; fix: {REEXPORT}"
            )
        return name

    def kernels(
        self, pid: int | None = None, correlation: bool = False, stream: bool = False, with_pid: bool = False
    ) -> Intervals:
        """CUDA kernels: start, end, device, `name` (StringId of the demangled name) and, when asked, `correlation`,
        `stream` and `pid` (the globalPid, 0 where it is not an integer), each only when the table has the column."""
        table = self.table(KERNEL_TABLES)
        if not table:
            return Intervals.empty("name")
        more = {"start": "start", "device": "deviceId"}
        asked = {"correlation": ("correlationId", correlation), "stream": ("streamId", stream)}
        more.update({key: col for key, (col, want) in asked.items() if want and col in self.columns(table)})
        if with_pid and "globalPid" in self.columns(table):
            more["pid"] = PID_SQL
        cols = self._durations_and_names(table, self.kernel_name_column(), pid, **more)
        extra = {"name": cols["name"], **{k: cols[k] for k in ("correlation", "stream", "pid") if k in cols}}
        return self._valid(table, Intervals(cols["start"], self._end(cols), cols["device"], extra))

    def kernel_durations(self, pid: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(name StringId, duration) of every kernel: all a kernel summary needs, read in one narrow scan."""
        table = self.table(KERNEL_TABLES)
        if not table:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        cols = self._durations_and_names(table, self.kernel_name_column(), pid)
        keep = cols["duration"] >= 0
        return cols["name"][keep], cols["duration"][keep]

    def memcpys(self, pid: int | None = None) -> Intervals:
        """CUDA memcpys: start, end, device, `bytes`, `kind` (CUpti_ActivityMemcpyKind), `pageable` (srcKind/dstKind 0)."""
        table = self.table(MEMCPY_TABLES)
        pageable = "coalesce(srcKind = 0 OR dstKind = 0, 0)" if table and "srcKind" in self.columns(table) else "0"
        return self._activities(MEMCPY_TABLES, pid, bytes="bytes", kind="copyKind", pageable=pageable)

    def memsets(self, pid: int | None = None) -> Intervals:
        """CUDA memsets: start, end, device, `bytes`."""
        return self._activities(MEMSET_TABLES, pid, bytes="bytes")

    def _activities(self, tables: tuple[str, ...], pid: int | None, **extra: str) -> Intervals:
        """start, end, device and the `extra` integer columns of a GPU activity table (raw end with int64s; as text,
        end - start has fewer digits)."""
        table = self.table(tables)
        if not table:
            return Intervals.empty(*extra)
        span = {"start": "start", "end": "end"} if self.blob else {"start": "start", "duration": "end - start"}
        raw = ("start", "end", "deviceId", *(column for column in extra.values() if column.isidentifier()))
        cols = self._read_ints(table, {**span, "device": "deviceId", **extra}, raw, self._scope(table, pid))
        extras = {name: cols[name] for name in extra}
        return self._valid(table, Intervals(cols["start"], self._end(cols), cols["device"], extras))

    @staticmethod
    def _end(cols: dict[str, np.ndarray]) -> np.ndarray:
        """The end column of a read of `end` or of `duration`."""
        return cols["end"] if "end" in cols else cols["start"] + cols["duration"]

    def _valid(self, table: str, activities: Intervals) -> Intervals:
        """The activities that end at or after their start; the others are left out with a warning."""
        bad = activities.end < activities.start
        if not bad.any():
            return activities
        self.warn(
            f"{self.path}: {int(bad.sum())} rows of {table} end before they start and were left out; fix: {REEXPORT}"
        )
        return activities.take(~bad)

    def memcpy_kind_names(self) -> dict[int, str]:
        """copyKind -> short name; the export's own ENUM table when it has one, else CUPTI's values."""
        names = dict(MEMCPY_KINDS)
        if "ENUM_CUDA_MEMCPY_OPER" in self.tables:
            for kind, name in self._query("SELECT id, name FROM ENUM_CUDA_MEMCPY_OPER"):
                if isinstance(kind, int):
                    names.setdefault(kind, re.sub(r"^CUDA_MEMCPY_KIND_", "", _text(name)).replace("_", " "))
        return names

    def has_launches(self) -> bool:
        """Whether the export has CUDA API rows (the launches the NVTX-to-GPU join needs)."""
        runtime = self.table(RUNTIME_TABLES)
        return bool(runtime and self._query(f"SELECT EXISTS (SELECT 1 FROM {runtime})")[0][0])

    def has_nvtx_ranges(self) -> bool:
        """Whether the export has NVTX ranges (without reading them)."""
        table, types = self.table(NVTX_TABLES), ",".join(str(t) for t in NVTX_RANGE_TYPES)
        return bool(table and self._query(f"SELECT EXISTS (SELECT 1 FROM {table} WHERE eventType IN ({types}))")[0][0])

    def runtime_rows(self) -> dict[str, np.ndarray] | None:
        """thread, start and corr (with their kinds) of every CUDA API call, from the file's pages (None: SQLite's
        read is needed); read before the NVTX threads are known, filtered by launch_calls."""
        runtime = self.table(RUNTIME_TABLES)
        if not runtime:
            return None
        return self.pages(runtime, {"thread": "globalTid", "start": "start", "corr": "correlationId"},
                          kinds=("globalTid", "start", "correlationId"))  # fmt: skip

    def launch_calls(
        self, threads: np.ndarray, rows: dict[str, np.ndarray] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(thread, start, correlationId) of the CUDA API calls made on `threads` (the threads of NVTX ranges);
        `rows`: runtime_rows() read already.

        Through SQLite, threads travel as their index in `threads` (one digit instead of a 17-digit globalTid).
        """
        runtime, threads = self.table(RUNTIME_TABLES), np.unique(threads)
        if not runtime or not len(threads):
            return (np.empty(0, dtype=np.int64),) * 3
        found = self.runtime_rows() if rows is None else rows
        if found is not None:  # the WHERE below in numpy; a start that is not an integer: SQLite's read warns
            integer = pagescan.KIND_CODES["integer"]
            thread = found["thread"]
            on = thread == threads[0] if len(threads) == 1 else np.isin(thread, threads)
            calls = (found["corr:kind"] == integer) & (found["thread:kind"] == integer) & on
            if (found["start:kind"][calls] == integer).all():
                return thread[calls], found["start"][calls], found["corr"][calls]
        if self.blob and len(threads) == 1:  # one thread (the usual training loop): no thread column to read
            where = f"correlationId IS NOT NULL AND globalTid = {int(threads[0])}"
            exprs = {"start": "start", "corr": "correlationId"}
            cols = self._read_ints(runtime, exprs, ("start", "correlationId"), where)
            return np.full(len(cols["start"]), threads[0], dtype=np.int64), cols["start"], cols["corr"]
        if self.blob:  # globalTids cost no digits in int64s: read them as they are
            where = f"correlationId IS NOT NULL AND globalTid IN ({', '.join(str(int(t)) for t in threads)})"
            exprs = {"thread": "globalTid", "start": "start", "corr": "correlationId"}
            cols = self._read_ints(runtime, exprs, ("globalTid", "start", "correlationId"), where)
            return cols["thread"], cols["start"], cols["corr"]
        if len(threads) > MAX_CASE_THREADS:  # a long CASE per row would cost more than the digits it saves
            where = "correlationId IS NOT NULL AND globalTid IS NOT NULL"
            exprs = {"thread": "globalTid", "start": "start", "corr": "correlationId"}
            cols = self._read_ints(runtime, exprs, ("globalTid", "start", "correlationId"), where)
            return cols["thread"], cols["start"], cols["corr"]
        cases = " ".join(f"WHEN {int(t)} THEN {i}" for i, t in enumerate(threads))
        listed = ", ".join(str(int(t)) for t in threads)
        where = f"correlationId IS NOT NULL AND globalTid IN ({listed})"
        exprs = {"thread": f"CASE globalTid {cases} END", "start": "start", "corr": "correlationId"}
        cols = self._read_ints(runtime, exprs, ("start", "correlationId"), where)
        return threads[cols["thread"]], cols["start"], cols["corr"]

    def launches(self, kernels: Intervals, threads: np.ndarray) -> Launches:
        """The CUDA API calls on `threads` that launched `kernels` (read with correlation=True), joined in numpy."""
        return join_launches(*self.launch_calls(threads), kernels)

    def nvtx_ranges(self, pid: int | None = None) -> NvtxRanges:
        """NVTX push/pop and start/end ranges that ended, text resolved from `text` or `textId`; bad rows left out."""
        return read_nvtx_ranges(self, pid)
