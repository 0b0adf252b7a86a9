"""analyze(): scan the logs once and assemble every result table into one NcclLogAnalysis (the data; render.py
turns it into terminal tables and HTML, as the words are used in nsyskit.analysis.present.report)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nsyskit.nccllog.scan.blocks import BLOCK_SIZE
from nsyskit.nccllog.scan.lines import fix_glued_hosts
from nsyskit.nccllog.scan.parallel import scan_files
from nsyskit.nccllog.scan.scan import Scan, Window
from nsyskit.nccllog.scan.steps import StepStats
from nsyskit.nccllog.tables import aggregate


@dataclass
class NcclLogAnalysis:
    """The results of one analysis, every table a list of rows with named columns (JSON-ready)."""

    files: list[str]
    window: str
    bytes_read: int
    seconds: float
    lines: dict
    totals: dict
    per_op: list[dict]
    histogram_per_op: list[dict]
    histogram_per_gpu: list[dict]
    aggregate: list[dict]
    unknown_datatypes: list[dict]
    steps: dict
    init: dict
    tuning: list[dict]
    warnings: list[str] = field(default_factory=list)
    examples: dict[str, list[str]] = field(default_factory=dict)
    files_without_nccl: dict[str, str] = field(default_factory=dict)
    communicators: list[dict] = field(default_factory=list)  # op, bytes, nranks, calls (for the trace's analysis)

    def to_dict(self) -> dict:
        """Plain dict for --json (without `communicators`, which only the trace's analysis reads)."""
        data = asdict(self)
        data.pop("communicators")
        return data


def step_summary(scan: Scan, jobs: dict[str, str]) -> dict:
    """Step timing per job (a file, or the files of one run folder; jobs maps file -> job): the top-level figures
    are the one job's, or None when several jobs have step lines (their steps are never averaged together)."""
    per_job: dict[str, tuple[StepStats, list[str]]] = {}
    for file, stats in scan.steps.items():
        job = jobs.get(file, file)
        merged, files = per_job.setdefault(job, (StepStats(), []))
        merged.merge(stats)
        files.append(file)
    rows = [
        {"job": job, "files": len(files), **stats.summary()} for job, (stats, files) in per_job.items() if stats.lines
    ]
    if len(rows) == 1:
        summary = {key: value for key, value in rows[0].items() if key not in ("job", "files")}
    else:
        summary = StepStats().summary()
        summary["step_lines"] = sum(row["step_lines"] for row in rows)
        for row in rows:
            summary["formats"] = {**summary["formats"], **row["formats"]}
    return {**summary, "jobs": rows}


class GpuNames:
    """Names each collective's GPU 'host[cudaDev]': the device of its communicator (from the comm-init lines of
    that process) rather than the logging thread's [dev] (one process may drive several GPUs); host names with a
    table row's number glued in front are read as the process's real host."""

    def __init__(self, scan: Scan) -> None:
        self.comms = scan.facts.comms
        hosts_by_pid: dict[str, set[str]] = {}
        for host, pid in {key[:2] for key in scan.coll_gpus}:
            hosts_by_pid.setdefault(pid, set()).add(host)
        for host, pid in {key[:2] for key in self.comms}:
            hosts_by_pid.setdefault(pid, set()).add(host)
        self.fixed = fix_glued_hosts(hosts_by_pid)
        self.cache: dict[tuple[str, str, int, bytes | None], str] = {}

    def host(self, host: str, pid: str) -> str:
        """The real host of a (host, pid) seen in the log."""
        return self.fixed.get((host, pid), host)

    def __call__(self, host: str, pid: str, dev: int, comm: bytes | None) -> str:
        key = (host, pid, dev, comm)
        name = self.cache.get(key)
        if name is None:
            host = self.host(host, pid)
            known = self.comms.get((host, pid, comm.decode())) if comm else None
            name = self.cache[key] = aggregate.gpu_label(host, known[1] if known else dev)
        return name


def init_facts(scan: Scan, groups: list[aggregate.CallGroup], gpus: set[str]) -> dict:
    """Init facts; nranks falls back on the collective lines' [nranks=N], nnodes on the distinct hostnames."""
    facts = scan.facts.summary()
    hosts = set(scan.facts.hosts) | {gpu.rsplit("[", 1)[0] for gpu in gpus}
    facts["nnodes_from_hostnames"] = len(hosts) or None
    sizes = {g.nranks for g in groups if g.nranks is not None}
    if facts["nranks"] is None and sizes:
        facts["nranks"] = max(sizes)
        facts["communicator_sizes"] = sorted(sizes)
    logging = {aggregate.gpu_label(host, dev) for host, dev in scan.facts.gpus}
    facts["gpus_seen"] = len(logging | gpus)
    return facts


def analyze(
    paths: list[Path],
    window: Window | None = None,
    block_size: int = BLOCK_SIZE,
    jobs: dict[str, str] | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> NcclLogAnalysis:
    """Scan the logs (streaming, constant memory: block_size bytes at a time; several files on several cores) and
    return every result table. jobs: file -> the job it belongs to (default: each file is its own job)."""
    started = time.perf_counter()
    scan = scan_files(paths, window, block_size, workers, progress)
    names = GpuNames(scan)
    scan.facts.hosts = {names.host(host, pid) for host, pid in scan.facts.hosts}
    scan.facts.gpus = {(names.host(host, pid), dev) for host, pid, dev in scan.facts.gpus}
    groups = aggregate.call_groups(scan.coll)
    per_gpu: Counter = Counter()
    for (host, pid, dev, comm, bucket), calls in scan.coll_gpus.items():
        per_gpu[(names(host, pid, dev, comm), bucket)] += calls
    gpus = {gpu for gpu, _ in per_gpu}
    warnings = list(scan.warnings)
    if scan.files_without_steps:
        listed = ", ".join(scan.files_without_steps[:3]) + (" ..." if len(scan.files_without_steps) > 3 else "")
        warnings.append(
            f"--steps: {len(scan.files_without_steps)} file(s) have no step lines, so none of their lines is in the window: "
            f"{listed} (use --lines for NCCL_DEBUG_FILE logs)"
        )
    if scan.files_without_nccl and len(scan.files_without_nccl) < len(scan.files):
        listed = "; ".join(f"{file} {held}" for file, held in list(scan.files_without_nccl.items())[:3])
        more = " ..." if len(scan.files_without_nccl) > 3 else ""
        warnings.append(f"{len(scan.files_without_nccl)} file(s) hold no NCCL line: {listed}{more}")
    if scan.unrecognized_nccl_lines:
        warnings.append(f"{scan.unrecognized_nccl_lines} 'NCCL INFO' line(s) in an unrecognized layout were skipped")
    if scan.garbled_coll_lines:
        warnings.append(
            f"{scan.garbled_coll_lines} garbled collective line(s) (opCount without the full field list) were skipped"
        )
    if scan.overlong_lines:
        warnings.append(f"{scan.overlong_lines} line(s) longer than 16 MiB were skipped")
    totals = aggregate.totals(groups, len(gpus))
    if totals["unknown_datatype_calls"]:
        warnings.append(
            f"{totals['unknown_datatype_calls']} collective call(s) with a datatype NCCL 2.28 does not define were left out of the byte statistics"
        )
    lines = {
        "total": scan.lines_total,
        "in_window": scan.lines_in_window,
        "nccl_info": scan.nccl_info_lines,
        "nccl_warn": scan.nccl_warn_lines,
        "collective": totals["calls"],
        "other_info": scan.other_info_lines,
        "unrecognized_nccl": scan.unrecognized_nccl_lines,
        "garbled_collective": scan.garbled_coll_lines,
        "overlong": scan.overlong_lines,
    }
    return NcclLogAnalysis(
        files=scan.files,
        window=scan.window.describe(),
        bytes_read=scan.bytes_read,
        seconds=time.perf_counter() - started,
        lines=lines,
        totals=totals,
        per_op=aggregate.per_op_stats(groups),
        histogram_per_op=aggregate.histogram_per_op(groups),
        histogram_per_gpu=aggregate.histogram_per_gpu(per_gpu),
        aggregate=aggregate.aggregate_table(groups),
        unknown_datatypes=aggregate.unknown_datatypes(groups),
        steps=step_summary(scan, jobs or {}),
        init=init_facts(scan, groups, gpus),
        tuning=scan.facts.tuning_rows(),
        warnings=warnings,
        examples=scan.examples,
        files_without_nccl=scan.files_without_nccl,
        communicators=aggregate.communicators(groups),
    )
