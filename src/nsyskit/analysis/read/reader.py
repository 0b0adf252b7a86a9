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
Parts of this reader, each in its own module over the file-level interface of exportfile.ExportFile: the GPU
activities (kernels, memcpys, memsets: activityread.py, the reader's base class), the NVTX ranges (nvtxread.py, with
their extended payloads as blobs, payloadblob.py, or as 2026.4's dynamic tables, payloadtables.py), the CUDA API
calls that launched kernels (launchread.py) and the host calls the diagnoses read (apicalls.py). The session's start
on the wall clock (session_clock) is read here too.

Large tables are read from the file's pages by C when every value is what it should be (pagescan.read_columns:
no SQLite virtual machine), else columnar through SQLite (sqlitefile.packed_scan: one scan, an aggregate per column:
blobagg's int64s BLOB of int64s where it can be built, else `group_concat` text parsed by numpy), which also leaves
out and reports bad rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

import numpy as np

from nsyskit.analysis.read.activityread import (  # noqa: F401  (the activity tables, named here too)
    KERNEL_NAME_COLUMNS,
    KERNEL_TABLES,
    MEMCPY_KINDS,
    MEMCPY_TABLES,
    MEMSET_TABLES,
    PID_SQL,
    GpuActivities,
)
from nsyskit.analysis.read.apicalls import ApiCalls, read_api_calls, read_launch_spans, read_os_waits
from nsyskit.analysis.read.counterread import Series, read_counters
from nsyskit.analysis.read.exportfile import META_TABLES, NSYS_MARKER_TABLES, PID_SHIFT  # noqa: F401  (named here too)
from nsyskit.analysis.read.launchread import RUNTIME_TABLES, read_launch_calls, read_launches, read_runtime_rows
from nsyskit.analysis.read.nvtxread import NVTX_RANGE_TYPES, NVTX_TABLES, read_nvtx_ranges
from nsyskit.analysis.read.records import Intervals, Launches, NvtxRanges, distinct
from nsyskit.analysis.read.sqlitefile import as_text as _text

__all__ = ["ExportReader", "Intervals", "Launches", "NvtxRanges", "Series", "SessionClock", "distinct"]

GPU_TABLES = ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU", "TARGET_INFO_CUDA_DEVICE")


@dataclass(frozen=True)
class SessionClock:
    """The export's event timestamps on the wall clock: event ns + utc_ns is UTC ns since the epoch; utc_offset_s:
    the target's local time minus UTC (None when the export's two texts cannot be read)."""

    utc_ns: int
    utc_offset_s: int | None


def _utc_offset_s(utc_text: str, local_text: str) -> int | None:
    """Local minus UTC of the session start's two texts ('2023-01-26T01:13:11', '2023-01-25T17:13:11': -8 h),
    to the quarter hour (the zones' step; the texts are whole seconds of one instant)."""
    try:
        seconds = (datetime.fromisoformat(local_text) - datetime.fromisoformat(utc_text)).total_seconds()
    except ValueError:
        return None
    return int(round(seconds / 900) * 900)


class ExportReader(GpuActivities):
    """Read-only access to one nsys SQLite export; raises ReportFileError naming the file for unusable files.

    Problems that do not stop the analysis (bad rows left out, a missing name column) are collected in `warnings`.
    """

    # ---- metadata ------------------------------------------------------------------------------------------

    @cached_property
    def meta(self) -> dict[str, str]:
        """The export's metadata table (EXPORT_META_DATA, META_DATA_EXPORT in 2023+) as a dict; empty without one."""
        table = self.table(META_TABLES)
        if not table:
            return {}
        return {_text(name): _text(value) for name, value in self.query(f"SELECT name, value FROM {table}")}

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
            _text(name): _text(value) for name, value in self.query("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV")
        }

    @cached_property
    def session(self) -> tuple[int, int]:
        """The capture's (start, stop) in the export's ns timeline; (0, 0) when unknown."""
        if "ANALYSIS_DETAILS" in self.tables and {"startTime", "stopTime"} <= self.columns("ANALYSIS_DETAILS"):
            row = self.query("SELECT min(startTime), max(stopTime) FROM ANALYSIS_DETAILS")[0]
            if isinstance(row[0], int) and isinstance(row[1], int):
                return row[0], row[1]
        return 0, 0

    @cached_property
    def session_clock(self) -> SessionClock | None:
        """When the capture started in UTC, and the target's UTC offset; None when the export does not say.

        TARGET_INFO_SESSION_START_TIME (every export of 2020.5-2026.2 at hand) holds utcEpochNs, the UTC instant
        of the session's start, the 0 of the export's event timestamps (the schema reference of 2026.4 calls that
        timeline SessionNs); utcTime and localTime as text give the target's offset from UTC (what a log stamped in
        local time without a zone needs). 2026.x adds systemClockNs, the target's clock at that start, not used:
        event times stay relative to the start.
        """
        table = "TARGET_INFO_SESSION_START_TIME"
        if table not in self.tables or not {"utcEpochNs", "utcTime", "localTime"} <= self.columns(table):
            return None
        rows = self.query(f"SELECT utcEpochNs, utcTime, localTime FROM {table} LIMIT 1")
        if not rows or not isinstance(rows[0][0], int):
            return None
        utc_ns, utc_text, local_text = rows[0]
        return SessionClock(utc_ns, _utc_offset_s(_text(utc_text), _text(local_text)))

    def gpus(self) -> dict[int, str]:
        """Device id -> GPU name (empty on CPU-only reports and on files without a GPU table)."""
        table = self.table(GPU_TABLES)
        if not table:
            return {}
        cols = self.columns(table)
        id_col = "id" if "id" in cols else "cuDevice" if "cuDevice" in cols else None
        if not id_col or "name" not in cols:
            return {}
        return {int(i): _text(n) for i, n in self.query(f"SELECT {id_col}, name FROM {table}") if isinstance(i, int)}

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
                pids.update(self._distinct_pids(table))
        return sorted(pids)

    def _distinct_pids(self, table: str) -> set[int]:
        """The integer globalPids of `table`, scanned once per reader (analyze_file asks twice: before and after the
        kernels are read)."""
        known = self.__dict__.setdefault("_pids_of_table", {})
        if table not in known:
            known[table] = {p for (p,) in self.query(f"SELECT DISTINCT globalPid FROM {table}") if isinstance(p, int)}
        return known[table]

    # ---- activities ----------------------------------------------------------------------------------------

    def has_launches(self) -> bool:
        """Whether the export has CUDA API rows (the launches the NVTX-to-GPU join needs)."""
        runtime = self.table(RUNTIME_TABLES)
        return bool(runtime and self.query(f"SELECT EXISTS (SELECT 1 FROM {runtime})")[0][0])

    def has_nvtx_ranges(self) -> bool:
        """Whether the export has NVTX ranges (without reading them)."""
        table, types = self.table(NVTX_TABLES), ",".join(str(t) for t in NVTX_RANGE_TYPES)
        return bool(table and self.query(f"SELECT EXISTS (SELECT 1 FROM {table} WHERE eventType IN ({types}))")[0][0])

    def runtime_rows(self) -> dict[str, np.ndarray] | None:
        """Every CUDA API call's thread, start and correlation id from the file's pages (see launchread)."""
        return read_runtime_rows(self)

    def launch_calls(self, threads: np.ndarray, rows: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(thread, start, correlationId) of the CUDA API calls made on `threads` (see launchread)."""
        return read_launch_calls(self, threads, rows)

    def launches(self, kernels: Intervals, threads: np.ndarray, rows: dict | None = None) -> Launches:
        """The CUDA API calls on `threads` that launched `kernels` (read with correlation=True); `rows`: runtime_rows()
        read already (see launchread)."""
        return read_launches(self, kernels, threads, rows)

    def runtime_rows_and_calls(self, pid: int | None) -> tuple[dict[str, np.ndarray] | None, ApiCalls | None]:
        """runtime_rows() for the launches' join and, classified from the same rows, api_calls(pid); the columns only
        the calls read are freed at once (None, None: SQLite's read is needed)."""
        rows = self.runtime_rows()
        if rows is None:
            return None, None
        calls = self.api_calls(pid, rows)
        for key in ("end", "name", "end:kind", "name:kind"):
            rows.pop(key, None)
        return rows, calls

    def share_api_calls(self, pid: int | None, calls: ApiCalls | None) -> None:
        """Keep the api_calls(pid) another reader of this file read (the prefetch's): api_calls(pid) then returns them."""
        if calls is not None:
            self.__dict__.setdefault("shared_api_calls", {})[pid] = calls

    def api_calls(self, pid: int | None = None, rows: dict[str, np.ndarray] | None = None) -> ApiCalls:
        """The CUDA API calls of process `pid` by kind (launch, sync, alloc, module; see apicalls); `rows`: the
        runtime_rows() read already."""
        shared = self.__dict__.get("shared_api_calls", {})
        return shared[pid] if pid in shared else read_api_calls(self, pid, rows)

    def launch_spans(self, pid: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of the kernel launch calls of process `pid` in start order (see apicalls)."""
        return read_launch_spans(self, pid)

    def os_waits(self, pid: int | None = None) -> ApiCalls:
        """The OS runtime calls threads block in (poll, futex, pthread_cond_wait, read...; see apicalls)."""
        return read_os_waits(self, pid)

    def nvtx_ranges(self, pid: int | None = None) -> NvtxRanges:
        """NVTX push/pop and start/end ranges that ended, text resolved from `text` or `textId`; bad rows left out."""
        return read_nvtx_ranges(self, pid)

    # ---- counters ------------------------------------------------------------------------------------------

    def counters(self) -> list[Series]:
        """The counters sampled beside the trace (GPU, EFA, NIC metrics), each series by time (see counterread)."""
        return read_counters(self)
