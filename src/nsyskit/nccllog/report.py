"""analyze(): scan the logs once and assemble every result table into one NcclLogReport."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nsyskit.nccllog import aggregate
from nsyskit.nccllog.scan import BLOCK_SIZE, Scan, Window, scan_files


@dataclass
class NcclLogReport:
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

    def to_dict(self) -> dict:
        """Plain dict for --json."""
        return asdict(self)


def step_summary(scan: Scan) -> dict:
    """Average step time and TFLOP/s per GPU over the step lines in the window (None where not logged)."""
    s = scan.steps
    return {
        "step_lines": s.lines,
        "formats": dict(s.formats),
        "first_iteration": s.first_iteration,
        "last_iteration": s.last_iteration,
        "timed_steps": s.timed,
        "avg_step_time_s": s.time_sum / s.timed if s.timed else None,
        "min_step_time_s": s.time_min,
        "max_step_time_s": s.time_max,
        "tflops_steps": s.with_tflops,
        "avg_tflops_per_gpu": s.tflops_sum / s.with_tflops if s.with_tflops else None,
    }


def init_facts(scan: Scan, groups: list[aggregate.CallGroup]) -> dict:
    """Init facts; nranks falls back on the collective lines' [nranks=N], nnodes on the distinct hostnames."""
    facts = scan.facts.summary()
    hosts = {host.decode("utf-8", "replace") for host in scan.facts.hosts} | {g.gpu.rsplit("[", 1)[0] for g in groups}
    facts["nnodes_from_hostnames"] = len(hosts) or None
    sizes = {g.nranks for g in groups if g.nranks is not None}
    if facts["nranks"] is None and sizes:
        facts["nranks"] = max(sizes)
        facts["communicator_sizes"] = sorted(sizes)
    gpus = {aggregate.gpu_label(host.decode("utf-8", "replace"), int(dev)) for host, dev in scan.facts.gpus}
    facts["gpus_seen"] = len(gpus | {g.gpu for g in groups})
    return facts


def analyze(paths: list[Path], window: Window | None = None, block_size: int = BLOCK_SIZE) -> NcclLogReport:
    """Scan the logs (streaming, constant memory: block_size bytes at a time) and return every result table."""
    started = time.perf_counter()
    scan = scan_files(paths, window, block_size)
    groups = aggregate.call_groups(scan.coll)
    warnings = list(scan.warnings)
    if scan.files_without_steps:
        names = ", ".join(scan.files_without_steps[:3]) + (" ..." if len(scan.files_without_steps) > 3 else "")
        warnings.append(
            f"--steps: {len(scan.files_without_steps)} file(s) have no step lines, so none of their lines is in the window: "
            f"{names} (use --lines for NCCL_DEBUG_FILE logs)"
        )
    if scan.unrecognized_nccl_lines:
        warnings.append(f"{scan.unrecognized_nccl_lines} 'NCCL INFO' line(s) in an unrecognized layout were skipped")
    if scan.garbled_coll_lines:
        warnings.append(
            f"{scan.garbled_coll_lines} garbled collective line(s) (opCount without the full field list) were skipped"
        )
    if scan.overlong_lines:
        warnings.append(f"{scan.overlong_lines} line(s) longer than 16 MiB were skipped")
    totals = aggregate.totals(groups)
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
    return NcclLogReport(
        files=scan.files,
        window=scan.window.describe(),
        bytes_read=scan.bytes_read,
        seconds=time.perf_counter() - started,
        lines=lines,
        totals=totals,
        per_op=aggregate.per_op_stats(groups),
        histogram_per_op=aggregate.histogram_per_op(groups),
        histogram_per_gpu=aggregate.histogram_per_gpu(groups),
        aggregate=aggregate.aggregate_table(groups),
        unknown_datatypes=aggregate.unknown_datatypes(groups),
        steps=step_summary(scan),
        init=init_facts(scan, groups),
        tuning=scan.facts.tuning_rows(),
        warnings=warnings,
        examples=scan.examples,
    )
