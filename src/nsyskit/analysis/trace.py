"""The facade over a run's per-rank exports (as Holistic Trace Analysis does): find them, read each once, analyze.

A rank is one process: a file holding several processes with GPU activity (torchrun ranks recorded together) yields
one rank per process, each with its own devices, NVTX ranges and kernels. Files are analyzed in parallel processes.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from nsyskit.analysis.compute import (
    analyzers,
    commcauses,  # noqa: F401  (registers its evidence extractors)
    counters,
    diagnoses,  # registers its evidence extractors (and computes the GPU busy union beside the NVTX tables)
    evidence,
    modelflops,  # noqa: F401  (registers its evidence extractor)
    nccl,
    ncclbandwidth,
    nccldigest,
    nccllogjoin,
    recording,  # noqa: F401  (registers its evidence extractor)
)
from nsyskit.analysis.compute.metrics import window_steps, windowed_ranks
from nsyskit.analysis.compute.projection import project
from nsyskit.analysis.compute.result import Analysis, combine_kernel_summaries, with_rank
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.mapreduce.leftout import left_out_lines
from nsyskit.analysis.mapreduce.reduce import RANKED_KEYS, TABLE_KEYS, merge  # noqa: F401  (parts and tests take them here)
from nsyskit.analysis.process import keep_freed_memory
from nsyskit.analysis.read.discover import RANK_IN_NAME, REPORT_SUFFIXES, discover, open_export  # noqa: F401
from nsyskit.analysis.read.reader import ExportReader
from nsyskit.analysis.read.records import Intervals, distinct
from nsyskit.analysis.read.runinfo import not_profiled
from nsyskit.errors import NsyskitError

__all__ = [
    "Analysis",
    "RankTrace",
    "analyze_file",
    "analyze_run",
    "combine_kernel_summaries",
    "discover",
    "open_export",
]

MAX_WORKERS = 8  # files analyzed at once: bounds peak memory (~0.3 GB per 2M-kernel rank)
NVTX_GPU_TOP = 15  # user ranges shown in the NVTX GPU projection besides the example's
COUNTERS_VARIABLE = "NSYSKIT_COUNTERS"  # 0: the sampled counters (GPU, EFA, NIC metrics) are not read


@dataclass
class RankTrace:
    """One rank's data in an export (one process, or the whole file) and the analyses of it, each computed once."""

    rank: int
    source: Path
    reader: ExportReader
    pid: int | None = None

    @cached_property
    def nvtx(self):
        """The rank's NVTX ranges."""
        return self.reader.nvtx_ranges(self.pid)

    @cached_property
    def kernels(self):
        """The rank's CUDA kernels (empty on CPU-only reports); with correlation ids when NVTX needs the launches."""
        return self.reader.kernels(self.pid, correlation=len(self.nvtx) > 0 and self.reader.has_launches())

    @cached_property
    def counter_series(self):
        """This rank's counters sampled beside the trace (see analyze_file); none when NSYSKIT_COUNTERS=0. Where the
        prefetch started their read aside, it is waited for here (its warnings go where the prefetch's end put them)."""
        if os.environ.get(COUNTERS_VARIABLE) == "0":
            return []
        pending = self.__dict__.pop("_counters_aside", None)
        if pending is None:
            return self.reader.counters()
        series, warnings = pending.result()
        known, at = self.reader.warnings, self.__dict__.pop("_counters_warn_at", len(self.reader.warnings))
        known[at:at] = [w for w in dict.fromkeys(warnings) if w not in known]  # where the prefetch's end put them
        return series

    @cached_property
    def kernel_names(self) -> dict[int, str]:
        """StringId -> kernel name for the kernels of this rank (a pruned or absent name gets a placeholder)."""
        if not len(self.kernels):
            return {}
        ids = distinct(self.kernels.extra["name"])  # a counting pass, not a sort of every kernel
        names = self.reader.strings(ids)
        for missing in set(ids.tolist()) - set(names):
            names[missing] = "<unnamed kernel>" if missing == 0 else f"<kernel name {missing} not in StringIds>"
        return names

    @cached_property
    def launches(self):
        """The CUDA API calls that launched this rank's kernels (for the NVTX-to-GPU join)."""
        return self.reader.launches(self.kernels, self.nvtx.thread)

    @cached_property
    def memcpys(self):
        """The rank's memcpys."""
        return self.reader.memcpys(self.pid)

    @cached_property
    def memsets(self):
        """The rank's memsets."""
        return self.reader.memsets(self.pid)

    @cached_property
    def grouped_texts(self) -> tuple[list[str], np.ndarray]:
        """The NVTX texts without their per-call parts (analyzers.group_texts)."""
        return analyzers.group_texts(self.nvtx.texts[0])

    @cached_property
    def nvtx_labels(self) -> tuple[list[str], np.ndarray]:
        """(distinct summary labels, label of each NVTX range)."""
        return analyzers.nvtx_labels(self.nvtx, self.grouped_texts)

    def prefetch(self, with_pid: bool = False) -> None:
        """Read the big tables at once, each on its own connection: SQLite releases the GIL while it scans.

        Kernels already given (a process's share of the whole file's) are kept; `with_pid` reads their globalPids.
        """
        wants_correlation = self.reader.has_launches() and self.reader.has_nvtx_ranges()
        if "counter_series" not in self.__dict__ and os.environ.get(COUNTERS_VARIABLE) != "0":
            # the counters' scan and parse (C, mostly without the GIL) start now and go on past the prefetch: the
            # results' other tables are computed meanwhile, the counters' tables once they are read
            self.__dict__["_counters_aside"] = _read_aside(ExportReader(self.reader.path))
        side = [ExportReader(self.reader.path) for _ in range(2)]

        def copies_and_calls():  # the CUDA API calls of every thread when the pages give them (filtered below)
            copies = side[1].memcpys(self.pid), side[1].memsets(self.pid)
            return copies, *(side[1].runtime_rows_and_calls(self.pid) if wants_correlation else (None, None))

        ranges: Future = Future()

        def ranges_and_labels():  # the labels' per-text Python follows the read at once, beside the kernels' C
            try:
                nvtx = side[0].nvtx_ranges(self.pid)
            except BaseException as exc:
                ranges.set_exception(exc)
                raise
            ranges.set_result(nvtx)
            grouped = analyzers.group_texts(nvtx.texts[0])
            return grouped, analyzers.nvtx_labels(nvtx, grouped)

        try:
            with ThreadPoolExecutor(max_workers=len(side)) as pool:
                labels = pool.submit(ranges_and_labels)
                second = pool.submit(copies_and_calls)
                if "kernels" not in self.__dict__:
                    self.__dict__["kernels"] = self.reader.kernels(
                        self.pid, correlation=wants_correlation, with_pid=with_pid
                    )
                nvtx = self.__dict__["nvtx"] = ranges.result()
                (self.__dict__["memcpys"], self.__dict__["memsets"]), runtime, calls = second.result()
                self.reader.share_api_calls(self.pid, calls)  # the diagnoses' host calls (compute/diagnoses.py)
                if wants_correlation:
                    self.__dict__["launches"] = side[1].launches(self.kernels, nvtx.thread, runtime)
                self.__dict__["grouped_texts"], self.__dict__["nvtx_labels"] = labels.result()
        finally:
            for reader in side:
                for warning in reader.warnings:
                    self.reader.warn(warning)
                reader.close()
            self.__dict__["_counters_warn_at"] = len(self.reader.warnings)  # (the counters' read ends later)

    @property
    def host(self) -> str:
        """The host the rank ran on ('' when unknown)."""
        return self.reader.system_env.get("Hostname", "")

    def kernel_summary(self) -> Table:
        """The kernel summary of this rank (nsys stats' numbers)."""
        return analyzers.kernel_summary(self.kernels, self.kernel_names)

    def breakdown(self) -> Table:
        """Compute/communication/memory/idle time and overlaps per GPU of this rank."""
        return analyzers.gpu_breakdown(
            self.kernels, analyzers.nccl_name_ids(self.kernel_names), [self.memcpys, self.memsets]
        )

    def memcpy_by_kind(self) -> Table:
        """Memcpy count, bytes and bandwidth per copy kind."""
        return analyzers.memcpy_by_kind(self.memcpys, self.reader.memcpy_kind_names())

    def nvtx_summary(self) -> Table:
        """NVTX range summary (per-call names grouped)."""
        return analyzers.nvtx_summary(self.nvtx, self.nvtx_labels)

    def nvtx_gpu(self) -> Table:
        """The GPU time the example's ranges and the top user ranges project onto the GPU."""
        projection = project(self.nvtx.thread, self.nvtx.start, self.nvtx.end, self.launches, self.kernels)
        return analyzers.nvtx_gpu_summary(self.nvtx_labels, self.nvtx, projection, NVTX_GPU_TOP)

    def steps(self) -> Table:
        """Training steps inside the profiled window, from the 'step N' NVTX ranges."""
        skipped: list[str] = []
        steps = analyzers.step_times(self.nvtx, skipped=skipped, grouped=self.grouped_texts)
        for name in skipped[:3]:
            self.reader.warn(
                f"{self.source}: NVTX range {name[:60]!r} has a step number beyond int64 and is not counted as a step"
            )
        return steps

    def nccl_operations(self) -> Table:
        """NCCL operations with message sizes, timed on the GPU where the trace has the launches; where the trace
        holds no size of NCCL's calls, those of the rank's NCCL log beside the report (nccllogjoin)."""
        ops = nccl.nccl_operations(self.nvtx, self.kernels, self.kernel_names, self.launches, self.grouped_texts)
        ops, line = nccllogjoin.joined_to_log_beside(ops, Path(self.source), self.reader.session_clock)
        if line:  # how the sizes were joined, or why not
            self.reader.warn(f"{self.source}: {line}")
        return ops

    def counter_tables(self, in_window: Table) -> dict[str, Table]:
        """The counter tables over the rank's window (compute/counters.py); a line when none was sampled inside it."""
        names = analyzers.nccl_name_ids(self.kernel_names)
        tables = counters.rank_tables(self.counter_series, self.kernels, names, in_window)
        if self.counter_series and not len(tables["counters"]):
            self.reader.warn(counters.outside_line(str(self.source), self.counter_series))
        return tables

    def evidence_inputs(self, window: Table, breakdown: Table, operations: Table, busy=None) -> evidence.RankInputs:
        """This rank's tables as the findings' extractors read them (compute.evidence)."""
        return evidence.RankInputs(
            rank=self.rank, kernels=self.kernels, kernel_names=self.kernel_names, nvtx=self.nvtx,
            nvtx_labels=self.nvtx_labels, launches=self.launches,
            memcpys=self.memcpys, memsets=self.memsets, steps=window, breakdown=breakdown,
            nccl_operations=operations, reader=self.reader, pid=self.pid, busy=busy,
        )  # fmt: skip

    def results(self) -> dict[str, Any]:
        """Every per-rank analysis (tables carry a rank column; `summary` feeds the ranks table)."""
        self.kernels, self.kernel_names, self.memcpys, self.memsets  # noqa: B018  (read before two threads use them)
        with ThreadPoolExecutor(max_workers=2) as pool:
            # The kernel tables are numpy over every kernel (sorts and reductions release the GIL): they run beside
            # the NVTX and NCCL tables, whose per-text work holds it; so do the counters' (numpy over the samples).
            kernel_tables = pool.submit(lambda: (self.kernel_summary(), self.breakdown()))
            gpu_busy = pool.submit(diagnoses.gpu_busy, self.kernels, self.memcpys, self.memsets)  # numpy too
            rank = self.rank
            nvtx_summary, nvtx_gpu, steps = self.nvtx_summary(), self.nvtx_gpu(), self.steps()
            # The rank's window steps, as the run's view finds them (its own 'profile_window' range or warm-up)
            in_window, _how = window_steps(with_rank(rank, steps), windowed_ranks(with_rank(rank, nvtx_summary)))
            counted = pool.submit(self.counter_tables, in_window)
            operations = self.nccl_operations()
            nccl_digest, memcpy = nccldigest.digest(operations, in_window), self.memcpy_by_kind()
            kernel_summary, breakdown = kernel_tables.result()
            found = evidence.rank_evidence(self.evidence_inputs(in_window, breakdown, operations, gpu_busy.result()))
            counter_tables = counted.result()  # last: the counters' read and tables went on beside all of the above
        window = int(breakdown["window_ns"].sum()) if len(breakdown) else 0
        busy = int(breakdown["busy_ns"].sum()) if len(breakdown) else 0
        comm = int(breakdown["comm_ns"].sum()) if len(breakdown) else 0
        durations = steps["duration_ns"]
        return {
            "rank": rank,
            "source": str(self.reader.path)
            + (f" (process {(self.pid >> 24) & 0xFFFFFF})" if self.pid is not None else ""),
            "nsys_version": self.reader.nsys_version,
            "kernel_summary": kernel_summary,
            "breakdown": with_rank(rank, breakdown),
            "memcpy": with_rank(rank, memcpy),
            "nvtx": with_rank(rank, nvtx_summary),
            "nvtx_gpu": with_rank(rank, nvtx_gpu),
            "steps": with_rank(rank, steps),
            "nccl": nccl_digest,
            "evidence": found,
            **{name: with_rank(rank, table) for name, table in counter_tables.items()},
            "summary": {
                "rank": rank,
                "host": self.host,
                "steps": len(durations),
                "step_mean_ns": float(durations.mean()) if len(durations) else np.nan,
                "step_median_ns": float(np.median(durations)) if len(durations) else np.nan,
                "gpu_busy_ns": busy if window else np.nan,
                "gpu_busy_pct": busy * 100.0 / window if window else np.nan,
                "comm_share_pct": comm * 100.0 / busy if busy else np.nan,
            },
        }


def _read_aside(reader: ExportReader) -> Future:
    """reader.counters() in a thread of its own, then the reader closed: a future of (series, its warnings)."""
    done: Future = Future()

    def read() -> None:
        try:
            done.set_result((reader.counters(), list(reader.warnings)))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for the series
            done.set_exception(exc)
        finally:
            reader.close()

    threading.Thread(target=read, name="nsyskit-counters", daemon=True).start()
    return done


def analyze_file(rank: int, path: Path) -> list[dict[str, Any]]:
    """The per-rank results of one report: one per process with GPU activity (one for the whole file otherwise)."""
    reader = open_export(path)
    try:
        whole = RankTrace(rank, path, reader)
        if len(reader.processes(Intervals.empty("pid"))) > 1:  # no kernels given: memcpy/memset processes only
            pids = reader.processes()
        else:  # usually one process: the whole file is read, its kernels' globalPids tell, no scan for them alone
            whole.prefetch(with_pid=True)
            pids = reader.processes(whole.kernels)
        traces = [whole]
        if len(pids) > 1:
            traces = [RankTrace(rank, path, reader, pid) for pid in pids]
            if "kernels" in whole.__dict__ and "pid" in whole.kernels.extra:  # each process's share of those read
                for trace in traces:
                    trace.__dict__["kernels"] = whole.kernels.take(whole.kernels.extra["pid"] == trace.pid)
            devices = [distinct(trace.kernels.device) for trace in traces]
            for trace, mine in zip(traces, counters.shares(whole.counter_series, devices), strict=True):
                trace.__dict__["counter_series"] = mine
        results = []
        for offset, trace in enumerate(traces):
            trace.rank = rank + offset
            if "memcpys" not in trace.__dict__:  # not read yet (the whole file's trace was, when it is the rank)
                trace.prefetch()
            results.append(trace.results())
        results[-1]["warnings"] = list(reader.warnings)
        return results
    finally:
        reader.close()


def analyze_run(
    paths: list[str | Path], straggler_pct: float = 5.0, workers: int | None = None,
    progress: Callable[[int, int], None] | None = None, strict: bool = False,
) -> Analysis:  # fmt: skip
    """Read every rank's export under `paths` and run every analyzer; several files at once in worker processes.

    Processes, not threads: the Python parts of an analysis (NVTX text, tables) hold the GIL. A file holding
    several ranks gives them consecutive rank numbers from the file's own. `progress(done, total)` follows the files.
    A report that cannot be read (a rank killed while writing it) is left out and named in `incomplete`, unless
    `strict` (then the first such report stops the analysis); when none can be read, the first one's error stops it.
    """
    found = discover(paths)
    _unprofiled, unprofiled_line = not_profiled([path for _rank, path in found])  # a broken run.json stops us now
    keep_freed_memory()  # each rank's arrays reuse the pages of the ones before (analysis/process.py); forks inherit it
    workers = workers or max(1, min(len(found), os.cpu_count() or 1, MAX_WORKERS))
    if workers == 1:
        outcomes = list(_counted((_analyze_here(rank, path) for rank, path in found), len(found), progress))
    else:
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            outcomes = list(_counted(pool.map(_analyze_in_worker, *zip(*found, strict=True)), len(found), progress))
    failed = [(rank, path, out) for (rank, path), out in zip(found, outcomes, strict=True) if not isinstance(out, list)]
    if failed and (strict or len(failed) == len(found)):  # the first file that failed stops the analysis
        first = failed[0][2]
        if isinstance(first, NsyskitError):
            raise first
        message, _sep, fix = first.partition("; fix: ")  # a worker's one line: its fix kept apart
        raise NsyskitError(message, fix=fix)
    per_file = [outcome for outcome in outcomes if isinstance(outcome, list)]
    why = [(rank, str(path), out if isinstance(out, str) else out.one_line()) for rank, path, out in failed]
    incomplete = left_out_lines(why, len(found), Path(str(paths[0])))  # one line naming them all, then the reasons
    world = ncclbandwidth.world_size([path for _rank, path in found], sum(map(len, per_file)))
    return merge(per_file, straggler_pct, unprofiled_line, incomplete, world)


def _analyze_here(rank: int, path: Path) -> list[dict[str, Any]] | NsyskitError:
    """analyze_file in this process; a user error comes back as the error, to stop or to leave the rank out."""
    try:
        return analyze_file(rank, path)
    except NsyskitError as exc:
        return exc


def _analyze_in_worker(rank: int, path: Path) -> list[dict[str, Any]] | str:
    """analyze_file in a worker process; a user error comes back as its one line (its class may not unpickle)."""
    try:
        return analyze_file(rank, path)
    except NsyskitError as exc:
        return exc.one_line()


def _counted(items: Iterable[Any], total: int, progress: Callable[[int, int], None] | None) -> Iterator[Any]:
    """The items, calling progress(done, total) after each (as results arrive, in order)."""
    for done, item in enumerate(items, start=1):
        yield item
        if progress:
            progress(done, total)
