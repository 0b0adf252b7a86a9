"""The CUDA API calls part of the export reader (reader.py), built on ExportFile's public interface: which call launched which kernel, on which thread.

From the file's pages (pagescan) when every value is clean, the SQL reads' WHERE applied in numpy; else through
SQLite, which leaves out and reports bad rows.
"""

from __future__ import annotations

import numpy as np

from nsyskit.analysis.read import pagescan
from nsyskit.analysis.read.exportfile import ExportFile
from nsyskit.analysis.read.records import Intervals, Launches, dense_correlations, join_launches
from nsyskit.native import launches as compiled

RUNTIME_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME",)
MAX_CASE_THREADS = 32  # NVTX threads up to which the runtime read sends thread indices instead of globalTids


def read_runtime_rows(reader: ExportFile) -> dict[str, np.ndarray] | None:
    """thread, start, corr, end and name (with their kinds) of every CUDA API call, from the file's pages (None:
    SQLite's read is needed); read before the NVTX threads are known, filtered by read_launch_calls; end and name
    (nameId) serve the diagnoses' host calls (apicalls.py), at no extra pass."""
    runtime = reader.table(RUNTIME_TABLES)
    if not runtime:
        return None
    columns = {"thread": "globalTid", "start": "start", "corr": "correlationId", "end": "end", "name": "nameId"}
    return reader.pages(runtime, columns, kinds=tuple(columns.values()))


def read_launch_calls(
    reader: ExportFile, threads: np.ndarray, rows: dict[str, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thread, start, correlationId) of the CUDA API calls made on `threads` (the threads of NVTX ranges);
    `rows`: runtime_rows() read already.

    Through SQLite, threads travel as their index in `threads` (one digit instead of a 17-digit globalTid).
    """
    runtime, threads = reader.table(RUNTIME_TABLES), np.unique(threads)
    if not runtime or not len(threads):
        return (np.empty(0, dtype=np.int64),) * 3
    found = read_runtime_rows(reader) if rows is None else rows
    if found is not None:  # the WHERE below in numpy; a start that is not an integer: SQLite's read warns
        integer = pagescan.KIND_CODES["integer"]
        thread = found["thread"]
        on = thread == threads[0] if len(threads) == 1 else np.isin(thread, threads)
        calls = (found["corr:kind"] == integer) & (found["thread:kind"] == integer) & on
        if (found["start:kind"][calls] == integer).all():
            return thread[calls], found["start"][calls], found["corr"][calls]
    if reader.blob and len(threads) == 1:  # one thread (the usual training loop): no thread column to read
        where = f"correlationId IS NOT NULL AND globalTid = {int(threads[0])}"
        exprs = {"start": "start", "corr": "correlationId"}
        cols = reader.read_ints(runtime, exprs, ("start", "correlationId"), where)
        return np.full(len(cols["start"]), threads[0], dtype=np.int64), cols["start"], cols["corr"]
    if reader.blob:  # globalTids cost no digits in int64s: read them as they are
        where = f"correlationId IS NOT NULL AND globalTid IN ({', '.join(str(int(t)) for t in threads)})"
        exprs = {"thread": "globalTid", "start": "start", "corr": "correlationId"}
        cols = reader.read_ints(runtime, exprs, ("globalTid", "start", "correlationId"), where)
        return cols["thread"], cols["start"], cols["corr"]
    if len(threads) > MAX_CASE_THREADS:  # a long CASE per row would cost more than the digits it saves
        where = "correlationId IS NOT NULL AND globalTid IS NOT NULL"
        exprs = {"thread": "globalTid", "start": "start", "corr": "correlationId"}
        cols = reader.read_ints(runtime, exprs, ("globalTid", "start", "correlationId"), where)
        return cols["thread"], cols["start"], cols["corr"]
    cases = " ".join(f"WHEN {int(t)} THEN {i}" for i, t in enumerate(threads))
    listed = ", ".join(str(int(t)) for t in threads)
    where = f"correlationId IS NOT NULL AND globalTid IN ({listed})"
    exprs = {"thread": f"CASE globalTid {cases} END", "start": "start", "corr": "correlationId"}
    cols = reader.read_ints(runtime, exprs, ("start", "correlationId"), where)
    return threads[cols["thread"]], cols["start"], cols["corr"]


def read_launches(
    reader: ExportFile, kernels: Intervals, threads: np.ndarray, rows: dict[str, np.ndarray] | None = None
) -> Launches:
    """The CUDA API calls on `threads` that launched `kernels` (read with correlation=True); `rows`: runtime_rows()
    read already. From the pages' rows in one C pass (launches.c) where it is built and the kernels' correlationIds
    are dense; else the calls filtered and joined in numpy (the same launches)."""
    kernel_corr = kernels.extra.get("correlation")
    if rows is not None and kernel_corr is not None and len(kernel_corr) and len(threads):
        low, high = int(kernel_corr.min()), int(kernel_corr.max())
        if dense_correlations(low, high, len(kernel_corr)):
            kinds = tuple(rows[f"{name}:kind"] for name in ("thread", "start", "corr"))
            found = compiled.join(rows["thread"], rows["start"], rows["corr"], kinds, np.unique(threads), kernel_corr, low, high)
            if isinstance(found, tuple):
                return Launches(*found)
    return join_launches(*read_launch_calls(reader, threads, rows), kernels)
