"""Nsight Compute reports (.ncu-rep, one per profiled rank): imported with the installed ncu, tabled per kernel.

`ncu --import X.ncu-rep --csv --page raw --print-units base` prints one row of metric names, one row of their
units and one row per profiled kernel launch. The columns read here are the ones NVIDIA's own sections show:
Speed of Light (duration, SM and memory throughput), Occupancy (achieved occupancy, detailed/full sets only)
and the roofline chart (achieved FLOP/s from the fadd/fmul/ffma instruction rates, DRAM bytes/s, peaks).
"""

from __future__ import annotations

import csv
import io
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np

from nsyskit.analysis.compute.table import Table
from nsyskit.errors import AnalysisError

NCU_SUFFIX = ".ncu-rep"
RANK_IN_NAME = re.compile(r"_rank(\d+)_")  # the wrapper's JOB_nodeN_rankR_HOST naming
IMPORT_TIMEOUT_S = 600
DURATION = "gpu__time_duration.sum"
SM_THROUGHPUT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_THROUGHPUT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
DRAM_RATE = "dram__bytes.sum.per_second"
INST_RATE = "smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"  # per cycle, summed over SMSPs
PEAK_FMA = "sm__sass_thread_inst_executed_op_{op}_pred_on.sum.peak_sustained"  # FMA per cycle at peak
SMSP_CLOCK, SM_CLOCK = "smsp__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second"
PRECISIONS = {"fp32": ("fadd", "fmul", "ffma"), "fp64": ("dadd", "dmul", "dfma")}
# Units as ncu prints them: a prefix (SI: 1 Kbyte = 1000 bytes) and a base, 'a/b' for rates. Bases by spelling:
# ncu 2022 wrote 'nsecond', 'usecond', 'Gbyte/second', 'cycle/nsecond'; 2025 writes 'ns', 'us', 'Gbyte/s', 'Ghz'.
PREFIX = {"": 1.0, "p": 1e-12, "n": 1e-9, "u": 1e-6, "µ": 1e-6, "m": 1e-3, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9,
          "T": 1e12, "P": 1e15}  # fmt: skip
TIME_BASES = ("second", "s")  # in seconds
RATE_BASES = ("hz", "Hz")  # per second (a clock: cycles per second)
COUNT_BASES = ("byte", "cycle", "inst", "warp", "thread", "sector", "request", "block", "register", "FLOP", "flop")
NS_PER_SECOND = 1e9
NO_KERNEL_NOTE = "ncu recorded no kernel launch in {path} (no GPU, or no launch matched NCU_KERNEL)"


def find_reports(paths: list[str | Path]) -> dict[int, Path]:
    """rank -> .ncu-rep, from run folders and/or report files (rank from the wrapper's file name, else the order)."""
    files: list[Path] = []
    for item in map(Path, paths):
        if item.is_dir():
            files += sorted(item.glob("*" + NCU_SUFFIX))
        elif item.is_file() and item.name.endswith(NCU_SUFFIX):
            files.append(item)
        else:
            raise AnalysisError(item, "is not an .ncu-rep report or a folder", "pass Nsight Compute reports (*.ncu-rep)")
    found: dict[int, Path] = {}
    for index, path in enumerate(files):
        match = RANK_IN_NAME.search(path.name)
        rank = int(match.group(1)) if match else index
        found[index if rank in found else rank] = path
    if not found:
        raise AnalysisError(", ".join(map(str, paths)), "no Nsight Compute reports (*.ncu-rep)",
                            "run with PROFILER=ncu on a GPU machine (on CPU ncu records no kernel)")  # fmt: skip
    return dict(sorted(found.items()))


def require_ncu() -> str:
    """The ncu binary on PATH, else an AnalysisError saying how to install it."""
    found = shutil.which("ncu")
    if not found:
        raise AnalysisError("ncu", "Nsight Compute's CLI is needed to read .ncu-rep reports and is not on PATH",
                            "install Nsight Compute (Debian: enable contrib and non-free, then apt-get install "
                            "nsight-compute nsight-compute-target; or NVIDIA's package)")  # fmt: skip
    return found


def import_raw(path: Path, ncu: str | None = None) -> str:
    """The report's raw page as CSV text, from the installed ncu (metric names, units, one row per launch)."""
    command = [ncu or require_ncu(), "--import", str(path), "--csv", "--page", "raw", "--print-units", "base"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise AnalysisError(path, f"ncu took over {IMPORT_TIMEOUT_S} s to import it", "import it by hand") from None
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        raise AnalysisError(path, f"ncu --import failed ({message[-1] if message else done.returncode})",
                            "check that it is an Nsight Compute report no newer than the installed ncu")  # fmt: skip
    return done.stdout


def parse_raw_csv(text: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """(units by metric, one dict per kernel launch) from `--csv --page raw` output; ==PROF== lines are skipped."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 2:
        return {}, []
    header, units = rows[0], rows[1]
    return dict(zip(header, units, strict=False)), [dict(zip(header, row, strict=False)) for row in rows[2:]]


def number(text: str | None) -> float:
    """A metric value as a float ('1,234.5' -> 1234.5); NaN when missing or 'n/a'."""
    try:
        return float((text or "").replace(",", "").strip())
    except ValueError:
        return math.nan


def unit_factor(part: str) -> float:
    """What one of `part` (one side of a unit: 'us', 'nsecond', 'Ghz', 'Kbyte', '%') is in base units (seconds for
    time, per second for hz, the plain count otherwise); 1 for units without a prefix or unknown ('%', 'SM')."""
    for base in (*TIME_BASES, *RATE_BASES, *COUNT_BASES):
        if part.endswith(base) and part[: -len(base)] in PREFIX:
            return PREFIX[part[: -len(base)]]
    return 1.0


def in_base_units(value: float, unit: str) -> float:
    """A value in its unit (e.g. 'Gbyte/second', 'Tbyte/s', 'us', 'nsecond', 'Ghz', 'cycle/nsecond') converted to base
    units: durations in seconds, rates per second, counts unscaled."""
    numerator, _, denominator = unit.partition("/")
    return value * unit_factor(numerator) / (unit_factor(denominator) if denominator else 1.0)


def metric(launch: dict[str, str], units: dict[str, str], name: str) -> float:
    """One metric of a launch in base units (durations in seconds, rates per second); NaN when not collected."""
    return in_base_units(number(launch.get(name)), units.get(name, ""))


def duration_ns(launch: dict[str, str], units: dict[str, str]) -> float:
    """The launch's duration in ns, to the ps (ncu prints ns or us to 6 decimals: the rest is the conversion's float
    residue, 31232.000000000004 for '31,232' ns)."""
    return round(metric(launch, units, DURATION) * NS_PER_SECOND, 3)


def roofline(launch: dict[str, str], units: dict[str, str]) -> dict[str, float | str]:
    """The launch's roofline position for its dominant precision: achieved and peak GFLOP/s, FLOP per DRAM byte."""
    best = {"precision": "", "flops": math.nan, "peak": math.nan}
    for precision, (add, mul, fma) in PRECISIONS.items():
        per_cycle = [metric(launch, units, INST_RATE.format(op=op)) for op in (add, mul, fma)]
        achieved = (per_cycle[0] + per_cycle[1] + 2 * per_cycle[2]) * metric(launch, units, SMSP_CLOCK)
        peak = 2 * metric(launch, units, PEAK_FMA.format(op=fma)) * metric(launch, units, SM_CLOCK)
        if not math.isnan(achieved) and (math.isnan(best["flops"]) or achieved > best["flops"]):
            best = {"precision": precision, "flops": achieved, "peak": peak}
    dram, achieved, peak = metric(launch, units, DRAM_RATE), best["flops"], best["peak"]
    return {"precision": best["precision"], "achieved_gflops": achieved / 1e9, "peak_gflops": peak / 1e9,
            "of_peak_flops_pct": achieved * 100 / peak if peak else math.nan,
            "intensity_flop_per_byte": achieved / dram if dram and not math.isnan(achieved) else math.nan,
            "dram_gbps": dram / 1e9}  # fmt: skip


LAUNCH_COLUMNS = (
    "rank", "id", "name", "duration_ns", "sm_throughput_pct", "memory_throughput_pct", "achieved_occupancy_pct",
    "precision", "achieved_gflops", "peak_gflops", "of_peak_flops_pct", "intensity_flop_per_byte", "dram_gbps",
)  # fmt: skip


def launch_table(rank: int, units: dict[str, str], launches: list[dict[str, str]]) -> Table:
    """One row per profiled kernel launch of a rank: Speed of Light, occupancy and roofline columns."""
    rows = {name: [] for name in LAUNCH_COLUMNS}
    for launch in launches:
        values = {
            "rank": rank, "id": int(number(launch.get("ID")) or 0), "name": launch.get("Kernel Name", ""),
            "duration_ns": duration_ns(launch, units),
            "sm_throughput_pct": number(launch.get(SM_THROUGHPUT)),
            "memory_throughput_pct": number(launch.get(MEMORY_THROUGHPUT)),
            "achieved_occupancy_pct": number(launch.get(ACHIEVED_OCCUPANCY)),
            **roofline(launch, units),
        }  # fmt: skip
        for name in LAUNCH_COLUMNS:
            rows[name].append(values[name])
    return Table({name: np.asarray(values, dtype=object if name in ("name", "precision") else None)
                  for name, values in rows.items()}) if launches else Table.empty(LAUNCH_COLUMNS)  # fmt: skip


def kernel_summary(launches: Table) -> Table:
    """Per kernel name over all ranks' launches: count, total and mean duration, mean of every other measure."""
    if not len(launches):
        return Table.empty(("name", "launches", "total_ns", *(c for c in LAUNCH_COLUMNS[3:] if c != "precision")))
    names = list(dict.fromkeys(launches["name"]))
    columns: dict[str, list] = {"name": names, "launches": [], "total_ns": []}
    measures = [c for c in LAUNCH_COLUMNS[3:] if c != "precision"]
    for name in names:
        rows = launches["name"] == name
        columns["launches"].append(int(rows.sum()))
        columns["total_ns"].append(float(np.nansum(launches["duration_ns"][rows].astype(float))))
        for measure in measures:
            values = launches[measure][rows].astype(float)
            columns.setdefault(measure, []).append(float(np.nanmean(values)) if not np.isnan(values).all() else math.nan)
    table = Table({k: np.asarray(v, dtype=object) if k == "name" else np.asarray(v) for k, v in columns.items()})
    return table.sorted_by("total_ns")


def analyze_reports(paths: list[str | Path]) -> tuple[Table, Table, dict[int, str], list[str]]:
    """(launches, kernels, sources by rank, notes) for the run's .ncu-rep reports, imported with the installed ncu."""
    reports = find_reports(paths)
    ncu = require_ncu()
    tables, notes = [], []
    for rank, path in reports.items():
        units, launches = parse_raw_csv(import_raw(path, ncu))
        if not launches:
            notes.append(NO_KERNEL_NOTE.format(path=path.name))
        tables.append(launch_table(rank, units, launches))
    launches = Table({n: np.concatenate([t[n] for t in tables]) for n in LAUNCH_COLUMNS})
    return launches, kernel_summary(launches), {rank: str(p) for rank, p in reports.items()}, notes
