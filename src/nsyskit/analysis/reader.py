"""The one module that knows the Nsight Systems SQLite export schema and its differences between versions.

Every other analysis module sees clean numpy columns. What differs between nsys versions (2022.4 … current)
and is handled here, and only here:
- table name variants (GPU info, kernel tables) and tables missing from CPU-only reports (-> empty columns);
- names stored as StringIds references (kernel names, NVTX registered strings: `textId`) or as plain text
  (NVTX `text`), and columns that only newer exports have (`textId`, payload columns, `jsonText`);
- memcpy kinds as numbers (with or without the ENUM_CUDA_MEMCPY_OPER table of newer exports).

Large tables are read columnar: one table scan returns each needed integer column as one `group_concat` string
that numpy parses. That avoids building millions of Python tuples and is several times faster than fetchall()
on the 2M-row tables of real GPU runs. A kernel's duration and name id travel as ONE integer (duration * 2^b + name,
b the bit length of the largest StringId): the text conversion of each value, more than the scan, is what a
group_concat read spends its time on, so fewer and shorter numbers read faster.
"""

from __future__ import annotations

import re
import struct
import urllib.parse
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from nsyskit.errors import ReportFileError

try:  # a current SQLite (the wheel's 3.51) scans the big tables ~30% faster than Debian 12's system SQLite 3.40
    from pysqlite3 import dbapi2 as sqlite3
except ImportError:  # platforms without the wheel: the standard library's
    import sqlite3

SQLITE_MAGIC = b"SQLite format 3\x00"

KERNEL_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")
MEMCPY_TABLES = ("CUPTI_ACTIVITY_KIND_MEMCPY",)
MEMSET_TABLES = ("CUPTI_ACTIVITY_KIND_MEMSET",)
RUNTIME_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME",)
NVTX_TABLES = ("NVTX_EVENTS",)
GPU_TABLES = ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU", "TARGET_INFO_CUDA_DEVICE")
# Kernel name columns, best first: what `nsys stats` summarizes by default (the demangled, templated name).
KERNEL_NAME_COLUMNS = ("demangledName", "shortName", "mangledName")
# NVTX event types of ranges: push/pop, start/end, and their NVTX-T (imported .nvtxt) twins.
NVTX_RANGE_TYPES = (59, 60, 70, 71)
NVTX_DOMAIN_CREATE = 75
PAYLOAD_COLUMNS = ("uint64Value", "int64Value", "uint32Value", "int32Value", "doubleValue", "floatValue")
# CUPTI's CUpti_ActivityMemcpyKind, the values of `copyKind` in every export version.
MEMCPY_KINDS = {
    0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
    8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD",
}  # fmt: skip
# The export tables by which a file is recognised as an Nsight Systems export.
NSYS_MARKER_TABLES = ("StringIds", "EXPORT_META_DATA", "TARGET_INFO_SESSION_START_TIME", "ANALYSIS_DETAILS")
# A kernel's name StringId and its duration travel packed as duration * 2^b + name, b the bit length of the largest
# StringId, up to MAX_NAME_BITS (durations up to +-2^40 ns then still fit an int64; longer ones fall back).
MAX_NAME_BITS = 23


@dataclass(frozen=True)
class Intervals:
    """GPU activities of one kind: start/end (ns), device, and per kind `name` (StringId), `bytes`, `kind`."""

    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.start)

    @classmethod
    def empty(cls, *extra: str) -> Intervals:
        """No activities, with the given extra columns."""
        nothing = np.empty(0, dtype=np.int64)
        return cls(nothing, nothing, nothing, {name: nothing for name in extra})


@dataclass(frozen=True)
class NvtxRanges:
    """NVTX ranges with resolved text, domain and numeric payload (NaN when absent)."""

    start: np.ndarray
    end: np.ndarray
    text: np.ndarray  # object array of str
    domain: np.ndarray  # object array of str ('' for the default domain)
    thread: np.ndarray
    payload: np.ndarray  # float64, NaN when the range has no numeric payload
    json: np.ndarray  # object array: JSON payload text or None

    def __len__(self) -> int:
        return len(self.start)


class ExportReader:
    """Read-only access to one nsys SQLite export; raises ReportFileError naming the file for unusable files."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        _check_sqlite_file(self.path)
        uri = "file:" + urllib.parse.quote(str(self.path.resolve())) + "?mode=ro&immutable=1"
        try:
            self.con = sqlite3.connect(uri, uri=True, check_same_thread=False)
            self.tables = {
                row[0] for row in self.con.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")
            }
        except sqlite3.DatabaseError as exc:
            raise ReportFileError(
                self.path, f"corrupt SQLite file ({exc})", "re-export it with 'nsys export --type sqlite'"
            ) from None
        if not any(t in self.tables for t in NSYS_MARKER_TABLES):
            raise ReportFileError(
                self.path,
                "not an Nsight Systems export (no StringIds/EXPORT_META_DATA tables)",
                "pass a .nsys-rep or the .sqlite 'nsys export' writes",
            )

    def close(self) -> None:
        """Close the database connection."""
        self.con.close()

    # ---- schema helpers -------------------------------------------------------------------------------------

    def _query(self, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            return self.con.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise ReportFileError(
                self.path, f"corrupt or truncated export ({exc})", "re-export it with 'nsys export --type sqlite'"
            ) from None

    def table(self, candidates: tuple[str, ...]) -> str | None:
        """The first of the candidate table names this export has, or None (a CPU-only report has no CUPTI tables)."""
        return next((name for name in candidates if name in self.tables), None)

    def columns(self, table: str) -> set[str]:
        """The column names of a table."""
        return {row[1] for row in self._query(f"PRAGMA table_info({table})")}

    def _packed_columns(self, table: str, exprs: dict[str, str], where: str = "") -> dict[str, np.ndarray]:
        """Integer SQL expressions over every row of `table` as int64 numpy columns (row order kept), read columnar.

        One table scan feeds one group_concat per column (the same rows in the same order); numpy parses the text.
        """
        columns = self._try_packed_columns(table, exprs, where)
        if columns is None:
            raise ReportFileError(
                self.path,
                f"table {table} has non-integer values in {', '.join(exprs.values())}",
                "re-export the report",
            )
        return columns

    def _try_packed_columns(self, table: str, exprs: dict[str, str], where: str = "") -> dict[str, np.ndarray] | None:
        """Like _packed_columns, but None when a value is NULL or not an integer (e.g. an overflow turned REAL)."""
        where_sql = f" WHERE {where}" if where else ""
        concats = ", ".join(f"group_concat({expr}, ',')" for expr in exprs.values())
        texts = self._query(f"SELECT count(*), {concats} FROM {table} NOT INDEXED{where_sql}")[0]
        count, result = texts[0], {}
        for name, text in zip(exprs, texts[1:], strict=True):
            with warnings.catch_warnings():  # older numpy warns (and stops) where newer numpy raises
                warnings.simplefilter("ignore", DeprecationWarning)
                try:
                    column = np.fromstring(text, dtype=np.int64, sep=",") if text else np.empty(0, dtype=np.int64)
                except ValueError:
                    return None
            if len(column) != count:
                return None
            result[name] = column
        return result

    @cached_property
    def _name_bits(self) -> int | None:
        """Bits that hold every StringId (names are references into StringIds), None when too many to pack names."""
        if "StringIds" not in self.tables:
            return None
        highest = int(self._query("SELECT max(id) FROM StringIds")[0][0] or 0)  # the rowid: one B-tree descent
        return max(1, highest.bit_length()) if 0 <= highest < (1 << MAX_NAME_BITS) else None

    def _durations_and_names(self, table: str, name_col: str, **more: str) -> dict[str, np.ndarray]:
        """`duration` (end - start) and `name` (StringId, 0 when NULL) of every row, plus `more` integer columns.

        Duration and name travel as one packed integer when the names fit. A duration so large that the packing
        overflows (SQLite then yields a REAL) or a NULL name (the export schema says NOT NULL; group_concat would skip
        the row: no coalesce() per row, it costs ~10% of the scan) falls back to reading them as two columns.
        """
        name_sql, bits = f"coalesce({name_col}, 0)", self._name_bits
        if bits is not None:
            cols = self._try_packed_columns(table, {**more, "packed": f"(end - start) * {1 << bits} + {name_col}"})
            if cols is not None:
                packed = cols.pop("packed")
                cols["duration"] = packed >> bits  # arithmetic shift: exact for negative durations too
                cols["name"] = packed & ((1 << bits) - 1)
                return cols
        return self._packed_columns(table, {**more, "duration": "end - start", "name": name_sql})

    def strings(self, ids: np.ndarray) -> dict[int, str]:
        """StringIds values for the given ids."""
        wanted = [int(i) for i in distinct(ids)]
        found: dict[int, str] = {}
        for chunk in range(0, len(wanted), 500):
            part = wanted[chunk : chunk + 500]
            marks = ",".join("?" * len(part))
            found.update(self._query(f"SELECT id, value FROM StringIds WHERE id IN ({marks})", tuple(part)))
        return found

    # ---- metadata ------------------------------------------------------------------------------------------

    @cached_property
    def meta(self) -> dict[str, str]:
        """EXPORT_META_DATA as a dict (empty for exports that lack it)."""
        if "EXPORT_META_DATA" not in self.tables:
            return {}
        return {name: value for name, value in self._query("SELECT name, value FROM EXPORT_META_DATA")}

    @property
    def nsys_version(self) -> str:
        """The nsys version that wrote the export ('' when unknown)."""
        return self.meta.get("EXPORT_PRODUCT_VERSION", "")

    @cached_property
    def system_env(self) -> dict[str, str]:
        """TARGET_INFO_SYSTEM_ENV name -> value (hostname, CPU, driver...)."""
        if "TARGET_INFO_SYSTEM_ENV" not in self.tables:
            return {}
        return {name: value for name, value in self._query("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV")}

    @cached_property
    def session(self) -> tuple[int, int]:
        """The capture's (start, stop) in the export's ns timeline; (0, 0) when unknown."""
        if "ANALYSIS_DETAILS" in self.tables and {"startTime", "stopTime"} <= self.columns("ANALYSIS_DETAILS"):
            row = self._query("SELECT min(startTime), max(stopTime) FROM ANALYSIS_DETAILS")[0]
            if row[0] is not None:
                return int(row[0]), int(row[1])
        return 0, 0

    def gpus(self) -> dict[int, str]:
        """Device id -> GPU name (empty on CPU-only reports)."""
        table = self.table(GPU_TABLES)
        if not table:
            return {}
        cols = self.columns(table)
        id_col = "id" if "id" in cols else "cuDevice" if "cuDevice" in cols else None
        if not id_col or "name" not in cols:
            return {}
        return {int(i): str(n) for i, n in self._query(f"SELECT {id_col}, name FROM {table}") if i is not None}

    # ---- activities ----------------------------------------------------------------------------------------

    def kernel_name_column(self) -> str | None:
        """The kernel name column of this export (a StringIds reference)."""
        table = self.table(KERNEL_TABLES)
        if not table:
            return None
        cols = self.columns(table)
        return next((c for c in KERNEL_NAME_COLUMNS if c in cols), None)

    def kernels(self) -> Intervals:
        """CUDA kernels: start, end, device and `name` (StringId of the demangled name); empty without GPU data."""
        table, name_col = self.table(KERNEL_TABLES), self.kernel_name_column()
        if not table or not name_col:
            return Intervals.empty("name")
        cols = self._durations_and_names(table, name_col, start="start", device="deviceId")
        return Intervals(cols["start"], cols["start"] + cols["duration"], cols["device"], {"name": cols["name"]})

    def kernel_durations(self) -> tuple[np.ndarray, np.ndarray]:
        """(name StringId, duration) of every kernel: all a kernel summary needs, read in one narrow scan."""
        table, name_col = self.table(KERNEL_TABLES), self.kernel_name_column()
        if not table or not name_col:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        cols = self._durations_and_names(table, name_col)
        return cols["name"], cols["duration"]

    def memcpys(self) -> Intervals:
        """CUDA memcpys: start, end, device, `bytes`, `kind` (CUpti_ActivityMemcpyKind)."""
        table = self.table(MEMCPY_TABLES)
        if not table:
            return Intervals.empty("bytes", "kind")
        cols = self._packed_columns(
            table,
            {"start": "start", "duration": "end - start", "device": "deviceId", "bytes": "bytes", "kind": "copyKind"},
        )
        return Intervals(
            cols["start"],
            cols["start"] + cols["duration"],
            cols["device"],
            {"bytes": cols["bytes"], "kind": cols["kind"]},
        )

    def memsets(self) -> Intervals:
        """CUDA memsets: start, end, device, `bytes`."""
        table = self.table(MEMSET_TABLES)
        if not table:
            return Intervals.empty("bytes")
        cols = self._packed_columns(
            table, {"start": "start", "duration": "end - start", "device": "deviceId", "bytes": "bytes"}
        )
        return Intervals(cols["start"], cols["start"] + cols["duration"], cols["device"], {"bytes": cols["bytes"]})

    def memcpy_kind_names(self) -> dict[int, str]:
        """copyKind -> short name; the export's own ENUM table when it has one, else CUPTI's values."""
        names = dict(MEMCPY_KINDS)
        if "ENUM_CUDA_MEMCPY_OPER" in self.tables:
            for kind, name in self._query("SELECT id, name FROM ENUM_CUDA_MEMCPY_OPER"):
                short = re.sub(r"^CUDA_MEMCPY_KIND_", "", str(name)).replace("_", " ")
                names.setdefault(int(kind), short)
        return names

    def nvtx_ranges(self) -> NvtxRanges:
        """NVTX push/pop and start/end ranges that ended, with text resolved from `text` or `textId`."""
        table = self.table(NVTX_TABLES)
        if not table:
            return _empty_nvtx()
        cols = self.columns(table)
        text_sql = "coalesce(e.text, s.value)" if "textId" in cols else "e.text"
        join = "LEFT JOIN StringIds AS s ON e.textId = s.id" if "textId" in cols and "StringIds" in self.tables else ""
        if not join:
            text_sql = "e.text"
        payload_cols = [c for c in PAYLOAD_COLUMNS if c in cols]
        payload_sql = f"coalesce({', '.join('e.' + c for c in payload_cols)}, NULL)" if payload_cols else "NULL"
        json_sql = "e.jsonText" if "jsonText" in cols else "NULL"
        domain_sql, domain_join = "''", ""
        if "domainId" in cols:
            # Domain names come from the domain-create events of the same process (globalTid >> 24 is the process).
            domain_join = (
                "LEFT JOIN (SELECT domainId, globalTid >> 24 AS proc, max(text) AS name FROM "
                f"{table} WHERE eventType = {NVTX_DOMAIN_CREATE} GROUP BY 1, 2) AS d "
                "ON e.domainId = d.domainId AND (e.globalTid >> 24) = d.proc"
            )
            domain_sql = "coalesce(d.name, '')"
        types = ",".join(str(t) for t in NVTX_RANGE_TYPES)
        rows = self._query(
            f"SELECT e.start, e.end, {text_sql}, {domain_sql}, e.globalTid, {payload_sql}, {json_sql} "
            f"FROM {table} AS e {join} {domain_join} WHERE e.eventType IN ({types}) AND e.end IS NOT NULL ORDER BY e.start"
        )
        if not rows:
            return _empty_nvtx()
        start, end, text, domain, thread, payload, json_text = zip(*rows, strict=True)
        return NvtxRanges(
            np.asarray(start, dtype=np.int64),
            np.asarray(end, dtype=np.int64),
            np.asarray([t or "" for t in text], dtype=object),
            np.asarray([d or "" for d in domain], dtype=object),
            np.asarray([t or 0 for t in thread], dtype=np.int64),
            np.asarray([np.nan if p is None else float(p) for p in payload], dtype=np.float64),
            np.asarray(json_text, dtype=object),
        )

    def kernels_launched_in(self, thread: int, start: int, end: int) -> list[tuple[int, int, int]]:
        """(start, end, name StringId) of the kernels whose CUDA API launch call ran on `thread` within [start, end]."""
        kernel, runtime, name_col = self.table(KERNEL_TABLES), self.table(RUNTIME_TABLES), self.kernel_name_column()
        if not kernel or not runtime or not name_col:
            return []
        return self._query(
            f"SELECT k.start, k.end, k.{name_col} FROM {runtime} AS r JOIN {kernel} AS k ON k.correlationId = r.correlationId "
            "WHERE r.globalTid = ? AND r.start >= ? AND r.start <= ? ORDER BY k.start",
            (thread, start, end),
        )


def distinct(ids: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an integer array; a counting pass instead of a sort when their range is small."""
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) == 0:
        return ids
    low, high = int(ids.min()), int(ids.max())
    if high - low < max(1 << 20, len(ids)):
        return np.flatnonzero(np.bincount(ids - low)) + low
    return np.unique(ids)


def _empty_nvtx() -> NvtxRanges:
    ints, objs = np.empty(0, dtype=np.int64), np.empty(0, dtype=object)
    return NvtxRanges(ints, ints, objs, objs, ints, np.empty(0, dtype=np.float64), objs)


def _check_sqlite_file(path: Path) -> None:
    """Raise ReportFileError unless `path` is a complete SQLite file (exists, not empty, not truncated)."""
    if not path.exists():
        raise ReportFileError(path, "no such file", "check the path")
    if path.is_dir():
        raise ReportFileError(path, "is a folder, not an export", "pass the run folder to 'invoke analyze' instead")
    size = path.stat().st_size
    if size == 0:
        raise ReportFileError(
            path, "is empty (0 bytes)", "the profile did not finish: re-run it or re-export the report"
        )
    with path.open("rb") as handle:
        header = handle.read(100)
    if not header.startswith(SQLITE_MAGIC):
        raise ReportFileError(
            path, "not an SQLite file", "pass a .nsys-rep or the .sqlite 'nsys export --type sqlite' writes"
        )
    if len(header) < 100:
        raise ReportFileError(path, f"truncated ({size} bytes, shorter than an SQLite header)", "re-export the report")
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    pages = struct.unpack(">I", header[28:32])[0]
    if pages and size < pages * page_size:
        raise ReportFileError(
            path,
            f"truncated ({size} of {pages * page_size} bytes)",
            "copy the file again or re-export it with 'nsys export --type sqlite'",
        )
