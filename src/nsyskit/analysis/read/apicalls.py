"""The host calls the diagnoses read (reader.py names them): CUDA runtime/driver API calls and OS runtime waits by kind.

Every export version keeps runtime and driver API calls in CUPTI_ACTIVITY_KIND_RUNTIME (nameId -> StringIds) and,
when the capture traced `osrt`, the OS runtime calls in OSRT_API (same columns). Function names carry a version
suffix in most versions (`cudaMalloc_v3020`) and per-thread-stream variants (`_ptsz`, `_ptds`); a name is classified
without them. Calls of no kind a rule reads (event records, queries...) have kind 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from nsyskit.analysis.read import pagescan
from nsyskit.analysis.read.exportfile import PID_SHIFT, ExportFile
from nsyskit.analysis.read.records import distinct

OSRT_TABLES = ("OSRT_API",)
API_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME",)

# The kinds of host call a rule reads (codes of ApiCalls.kind).
LAUNCH, SYNC, ALLOC, MODULE, WAIT = 1, 2, 3, 4, 5

_SUFFIX = re.compile(r"(_v\d+)?(_ptsz|_ptds)?(_v\d+)?$")
_PATTERNS = (
    (LAUNCH, re.compile(r"cu(da)?Launch(Kernel(Ex|ExC)?|CooperativeKernel(MultiDevice)?|HostFunc)?|cu(da)?GraphLaunch")),
    # The calls that block the host until the GPU (a stream, the device, an event) is done: explicit syncs and the
    # synchronous copies and memsets (their Async forms are classified as nothing).
    (SYNC, re.compile(r"cuda(Stream|Device|Event|Thread)Synchronize|cu(Stream|Ctx|Event)Synchronize"
                      r"|cudaMemcpy(2D|3D)?((To|From)(Symbol|Array))?|cudaMemcpyPeer|cudaMemset(2D|3D)?"
                      r"|cuMemcpy(HtoD|DtoH|DtoD|Peer|2D|3D)?|cuMemsetD(8|16|32|2D8|2D16|2D32)")),
    (ALLOC, re.compile(r"cuda(Malloc(Async|Managed|Host|Pitch|3D|FromPoolAsync)?|Free(Async|Host)?|HostAlloc)"
                       r"|cuMem(Alloc(Async|Managed|Pitch|Host|FromPoolAsync)?|Free(Async|Host)?|HostAlloc"
                       r"|Map|Unmap|Create|Release|AddressReserve|AddressFree)")),
    (MODULE, re.compile(r"cuModuleLoad(Data|DataEx|FatBinary)?|cuLibraryLoad(Data|FromFile)|cuLink(Create|AddData"
                        r"|AddFile|Complete)|nvrtcCompileProgram|nvJitLink(Create|Complete)")),
)  # fmt: skip
# The OS runtime calls a thread blocks in while it waits for another (a DataLoader worker's batch, a queue, a pipe).
WAIT_CALLS = re.compile(r"(p?poll|p?select|epoll_wait|epoll_pwait|futex|pthread_cond_(timed)?wait|sem_(timed)?wait"
                        r"|read|recv|recvfrom|recvmsg|waitpid)")  # fmt: skip


@dataclass(frozen=True)
class ApiCalls:
    """Host calls of the rare kinds (SYNC, ALLOC, MODULE; WAIT for OS calls): calling thread, start, end (ns), kind;
    of the launches (a million in a big trace) only their count and the threads that call CUDA, so that no array of
    a million rows stays alive through the map (launch_spans reads them where a rule needs them)."""

    thread: np.ndarray
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray
    launches: int = 0
    cuda_threads: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.start)

    def of(self, kind: int) -> ApiCalls:
        """The calls of one kind (that end at or after their start)."""
        keep = (self.kind == kind) & (self.end >= self.start)
        return ApiCalls(self.thread[keep], self.start[keep], self.end[keep], self.kind[keep])

    @classmethod
    def empty(cls) -> ApiCalls:
        """No calls."""
        nothing = np.empty(0, dtype=np.int64)
        return cls(nothing, nothing, nothing, np.empty(0, dtype=np.int8))


def api_kind(name: str) -> int:
    """The kind of a CUDA runtime/driver function name (0: none a rule reads), version suffixes ignored."""
    bare = _SUFFIX.sub("", name)
    for kind, pattern in _PATTERNS:
        if pattern.fullmatch(bare):
            return kind
    return 0


def wait_kind(name: str) -> int:
    """WAIT for an OS runtime call a thread blocks in, 0 for the others."""
    return WAIT if WAIT_CALLS.fullmatch(name) else 0


def read_api_calls(reader: ExportFile, pid: int | None = None, rows: dict[str, np.ndarray] | None = None) -> ApiCalls:
    """The CUDA API calls of process `pid` (the whole file: None) that synchronize, allocate or load modules, and
    the launches' count; `rows`: the whole file's runtime rows read already from the pages (read_runtime_rows)."""
    if rows is not None and pid is not None:
        own = (rows["thread"] >> PID_SHIFT) == (pid >> PID_SHIFT)
        rows = {key: values[own] for key, values in rows.items()}
    return _read(reader, reader.table(API_TABLES), pid, api_kind, rows)


def read_launch_spans(reader: ExportFile, pid: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of the kernel launch calls of process `pid`, in start order (a read of the whole table)."""
    calls = _read(reader, reader.table(API_TABLES), pid, api_kind, keep=LAUNCH)
    start, end = calls.start, calls.end
    if not (start[1:] >= start[:-1]).all():
        order = np.argsort(start, kind="stable")
        start, end = start[order], end[order]
    return start, end


def read_os_waits(reader: ExportFile, pid: int | None = None) -> ApiCalls:
    """The OS runtime calls of process `pid` a thread blocks in (empty when the capture did not trace `osrt`)."""
    return _read(reader, reader.table(OSRT_TABLES), pid, wait_kind)


def _read(
    reader: ExportFile, table: str | None, pid: int | None, classify, rows: dict | None = None, keep: int | None = None
) -> ApiCalls:
    """thread, start, end and kind of `table`'s calls whose name `classify` gives a kind other than LAUNCH (`keep`:
    of that kind only), with the launches' count and the calling threads; from the pages when clean (`rows`: those
    pages read already)."""
    if not table or not {"globalTid", "start", "end", "nameId"} <= reader.columns(table):
        return ApiCalls.empty()
    columns = {"thread": "globalTid", "start": "start", "end": "end", "name": "nameId"}
    if rows is not None and all(f"{key}:kind" in rows for key in columns):
        found = rows
    else:
        found = reader.pages(table, columns, pid, kinds=tuple(columns.values()))
    if found is not None:
        integer = pagescan.KIND_CODES["integer"]
        kinds = [found[f"{key}:kind"] for key in columns]  # min and max: no mask of a million rows
        if any(len(kind) and not kind.min() == kind.max() == integer for kind in kinds):
            found = None  # a NULL thread or a text value: SQLite's read leaves those rows out and says so
    if found is None:
        raw = ("globalTid", "start", "end", "nameId")
        where = reader.scope(table, pid, "globalTid")
        found = reader.read_ints(table, {"thread": "globalTid", "start": "start", "end": "end", "name": "nameId"},
                                 raw, where)  # fmt: skip
    names = found["name"]
    if len(names) and names.min() < 0:  # a negative id names nothing: StringId 0's kind, as any unknown id
        names = np.maximum(names, 0)
    if not len(names):
        return ApiCalls.empty()
    ids = distinct(names)
    text = reader.strings(ids)
    kinds = np.zeros(int(ids.max()) + 1, dtype=np.int8)
    for name_id in ids.tolist():
        kinds[name_id] = classify(text.get(name_id, ""))
    kind = kinds[names]
    wanted = np.flatnonzero(kind == keep if keep is not None else (kind != 0) & (kind != LAUNCH))
    thread = found["thread"]
    runs = np.flatnonzero(thread[1:] != thread[:-1]) + 1  # a thread's calls come in runs: their values, no sort
    threads = (
        np.unique(np.concatenate((thread[:1], thread[runs]))) if len(runs) < len(thread) // 2 else np.unique(thread)
    )
    return ApiCalls(thread[wanted], found["start"][wanted], found["end"][wanted], kind[wanted],
                    launches=int(np.count_nonzero(kind == LAUNCH)),
                    cuda_threads=threads)  # fmt: skip
