"""The GPU activities part of the export reader (reader.py): kernels, memcpys and memsets in every export version.

An ExportFile (its table, columns, pages, query, read_ints and warn) that ExportReader builds on. Read from the
file's pages (pagescan) when every value is clean, else through SQLite, which leaves out and reports bad rows.
A kernel's duration and name id travel as ONE integer through SQLite (duration * 2^b + name, b the bit length of the
largest StringId): one value less to aggregate.
"""

from __future__ import annotations

import re
from functools import cached_property

import numpy as np

from nsyskit.analysis.read import pagescan, sqlitefile
from nsyskit.analysis.read.exportfile import ExportFile
from nsyskit.analysis.read.records import Intervals
from nsyskit.analysis.read.sqlitefile import REEXPORT, packed_scan
from nsyskit.analysis.read.sqlitefile import as_text as _text

KERNEL_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")
MEMCPY_TABLES = ("CUPTI_ACTIVITY_KIND_MEMCPY",)
MEMSET_TABLES = ("CUPTI_ACTIVITY_KIND_MEMSET",)
# Kernel name columns, best first: what `nsys stats` summarizes by default (the demangled, templated name).
KERNEL_NAME_COLUMNS = ("demangledName", "shortName", "mangledName")
# CUPTI's CUpti_ActivityMemcpyKind, the values of `copyKind` in every export version.
MEMCPY_KINDS = {
    0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
    8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD",
}  # fmt: skip
# A kernel's name StringId and its duration travel packed as duration * 2^b + name, b the bit length of the largest
# StringId, up to MAX_NAME_BITS (durations up to +-2^40 ns then still fit an int64; longer ones fall back).
MAX_NAME_BITS = 23
PID_SQL = "CASE WHEN typeof(globalPid) = 'integer' THEN globalPid ELSE 0 END"  # a kernel's process (0: not known)


class GpuActivities(ExportFile):
    """The reader's kernel, memcpy and memset reads (ExportReader inherits them)."""

    @cached_property
    def _name_bits(self) -> int | None:
        """Bits that hold every StringId (names are references into StringIds), None when too many to pack names."""
        if "StringIds" not in self.tables:
            return None
        highest = int(self.query("SELECT max(id) FROM StringIds")[0][0] or 0)  # the rowid: one B-tree descent
        return max(1, highest.bit_length()) if 0 <= highest < (1 << MAX_NAME_BITS) else None

    def _durations_and_names(
        self, table: str, name_col: str | None, process: int | None, **more: str
    ) -> dict[str, np.ndarray]:
        """`duration` (end - start) and `name` (StringId, 0 without one) of every row (of `process`), plus `more`
        integer columns; when `more` asks for `start`, `end` may come instead of `duration` (Intervals keep both).

        From the file's pages when every value is an integer; else duration and name travel as one packed integer
        when the names fit; else (or when a value is not an integer) they are read as two columns, a name that is not
        an integer read as 0.
        """
        raw = ("start", "end", *(c for c in more.values() if c.isidentifier() and c not in ("start", "end")))
        raw_more = {key: "globalPid" if sql == PID_SQL else sql for key, sql in more.items()}  # a text pid: below
        if name_col and all(column.isidentifier() for column in raw_more.values()):
            cols = self.pages(table, {"start": "start", **raw_more, "end": "end", "name": name_col}, process)
            # with `start` asked for, `end` stays with it: the check only, no durations the caller does not take
            duration = None if cols is None else sqlitefile.span(cols["start"], cols["end"], keep="start" not in more)
            if duration is not None:
                if "start" not in more:
                    cols["duration"] = duration
                    del cols["start"], cols["end"]
                return cols
        where = self.scope(table, process)
        bits = self._name_bits
        if self.blob and name_col:  # raw columns, each checked by int64s itself: no arithmetic, no type check
            cols = packed_scan(self.query, table, {"start": "start", **raw_more, "end": "end", "name": name_col},
                               where, blob=True, bound=self.bound(table))  # fmt: skip
            duration = None if cols is None else sqlitefile.span(cols["start"], cols["end"], keep="start" not in more)
            if duration is not None:
                if "start" not in more:  # `end` stays with `start`: callers need not add them up again
                    cols["duration"] = duration
                    del cols["start"], cols["end"]
                return cols
        elif bits is not None and name_col:
            checks = sqlitefile.type_check(("end", name_col))  # the others are read as is (see _read_ints)
            exprs = {**more, "packed": f"(end - start) * {1 << bits} + {name_col}"}
            cols = packed_scan(self.query, table, exprs, where, checks, self.blob)
            if cols is not None:
                packed = cols.pop("packed")
                cols["duration"] = packed >> bits  # arithmetic shift: exact for negative durations too
                cols["name"] = packed & ((1 << bits) - 1)
                return cols
        name_sql = f"CASE WHEN typeof({name_col}) = 'integer' THEN {name_col} ELSE 0 END" if name_col else "0"
        return self.read_ints(table, {**more, "duration": "end - start", "name": name_sql}, raw, where)

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
        sides = ("srcKind", "dstKind") if table and "srcKind" in self.columns(table) else ()
        found = self._activity_pages(table, pid, {"bytes": "bytes", "kind": "copyKind"}, sides)
        if found is not None:
            return found
        pageable = "coalesce(srcKind = 0 OR dstKind = 0, 0)" if sides else "0"
        return self._activities(MEMCPY_TABLES, pid, bytes="bytes", kind="copyKind", pageable=pageable)

    def memsets(self, pid: int | None = None) -> Intervals:
        """CUDA memsets: start, end, device, `bytes`."""
        found = self._activity_pages(self.table(MEMSET_TABLES), pid, {"bytes": "bytes"})
        return found if found is not None else self._activities(MEMSET_TABLES, pid, bytes="bytes")

    def _activity_pages(
        self, table: str | None, pid: int | None, extra: dict[str, str], sides: tuple[str, ...] = ()
    ) -> Intervals | None:
        """_activities from the file's pages (None: read through SQLite); with `sides` (a memcpy's srcKind and
        dstKind) also `pageable`, as coalesce(srcKind = 0 OR dstKind = 0, 0) is: 1 where either is an INTEGER 0."""
        if not table:
            return None
        found = self.pages(table, {"start": "start", "end": "end", "device": "deviceId", **extra,
                                   **{side: side for side in sides}}, pid, kinds=sides)  # fmt: skip
        if found is None or any((found[f"{side}:kind"] == pagescan.KIND_CODES["real"]).any() for side in sides):
            return None  # a REAL 0.0 equals 0 in SQLite's comparison: that file is read through SQLite
        columns = {name: found[name] for name in extra}
        if sides:
            zero = [(found[f"{side}:kind"] == pagescan.KIND_CODES["integer"]) & (found[side] == 0) for side in sides]
            columns["pageable"] = np.logical_or.reduce(zero).astype(np.int64)
        return self._valid(table, Intervals(found["start"], found["end"], found["device"], columns))

    def _activities(self, tables: tuple[str, ...], pid: int | None, **extra: str) -> Intervals:
        """start, end, device and the `extra` integer columns of a GPU activity table (raw end with int64s; as text,
        end - start has fewer digits)."""
        table = self.table(tables)
        if not table:
            return Intervals.empty(*extra)
        span = {"start": "start", "end": "end"} if self.blob else {"start": "start", "duration": "end - start"}
        raw = ("start", "end", "deviceId", *(column for column in extra.values() if column.isidentifier()))
        cols = self.read_ints(table, {**span, "device": "deviceId", **extra}, raw, self.scope(table, pid))
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
            for kind, name in self.query("SELECT id, name FROM ENUM_CUDA_MEMCPY_OPER"):
                if isinstance(kind, int):
                    names.setdefault(kind, re.sub(r"^CUDA_MEMCPY_KIND_", "", _text(name)).replace("_", " "))
        return names
