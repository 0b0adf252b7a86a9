"""Benchmark where 'invoke analyze' spends its time on a torch profiler trace: HTA's load, phase by phase.

Side by side, with ratios: HTA's TraceAnalysis with its defaults (microsecond rounding, default event args: what
nsyskit did before) against nsyskit's load (torchprof.load_hta: ns timestamps kept, only the stream and correlation
args), and the floor of any loader of this JSON: gunzip + json.loads alone. Then the phases of nsyskit's load (HTA's
own functions, timed by wrapping them) and the analyses after it. Each side runs --repeat times, alternating; the
fastest run of each is kept (the one least disturbed by other work on a shared machine).

Usage: .venv/bin/python bench/torch_load_bench.py [TRACE.pt.trace.json.gz] [--repeat 3]
       (default: the real H100 trace's two steps in tests/data/torch, decompressed into a temporary folder)
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import logging
import lzma
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "torch" / "h100_node0_rank0_vm.pt.trace.json.xz"
PHASES = {  # HTA's functions, by module, in the order its load runs them
    "hta.common.trace_parser": ("parse_trace_dict", "round_down_time_stamps", "normalize_gpu_stream_numbers",
                                "_compress_df"),
    "hta.common.trace": ("add_fwd_bwd_links", "transform_correlation_to_index", "add_iteration"),
}  # fmt: skip


def timed(function, repeat: int) -> float:
    """The fastest of `repeat` runs, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def hta_defaults(path: Path):
    from hta.trace_analysis import TraceAnalysis

    return TraceAnalysis(trace_files={0: str(path)}, trace_dir=str(path.parent), include_last_profiler_step=True)


def json_floor(path: Path) -> dict:
    with gzip.open(path, "rb") as handle:
        return json.loads(handle.read())


def phases(path: Path) -> dict[str, float]:
    """Seconds in each of HTA's load phases during one nsyskit load (wrapping HTA's functions, then restoring them)."""
    import importlib

    from nsyskit.analysis.profilers import torchprof

    spent: dict[str, float] = {}
    saved = []
    for module_name, names in PHASES.items():
        module = importlib.import_module(module_name)
        for name in names:
            original = getattr(module, name)

            def wrapper(*args, _original=original, _name=name, **kwargs):
                start = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    spent[_name] = spent.get(_name, 0.0) + time.perf_counter() - start

            saved.append((module, name, original))
            setattr(module, name, functools.wraps(original)(wrapper))
    try:
        start = time.perf_counter()
        torchprof.load_hta({0: path})
        spent["whole load"] = time.perf_counter() - start
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    logging.getLogger("hta").setLevel(logging.ERROR)
    sys.path.insert(0, str(ROOT / "src"))
    from nsyskit.analysis.profilers import torchprof

    with tempfile.TemporaryDirectory() as folder:
        path = args.trace
        if path is None:
            path = Path(folder) / FIXTURE.name.replace(".json.xz", ".json.gz")
            path.write_bytes(gzip.compress(lzma.decompress(FIXTURE.read_bytes()), compresslevel=1))
        events = len(json_floor(path)["traceEvents"])
        print(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB gzipped, {events:,} events; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (shared machine: figures vary with the load)")  # fmt: skip
        baseline = nsyskit = float("inf")
        for _ in range(args.repeat):  # alternating, so the machine's load weighs on both
            baseline = min(baseline, timed(lambda: hta_defaults(path), 1))
            nsyskit = min(nsyskit, timed(lambda: torchprof.load_hta({0: path}), 1))
        floor = timed(lambda: json_floor(path), args.repeat)
        print(f"HTA defaults (before)      {baseline:7.2f} s")
        print(f"nsyskit's load_hta (after) {nsyskit:7.2f} s   ratio {nsyskit / baseline:.2f}")
        print(f"gunzip + json.loads alone  {floor:7.2f} s   ({floor / nsyskit:.0%} of nsyskit's load)")
        print("phases of one nsyskit load (HTA's functions):")
        for name, seconds in phases(path).items():
            print(f"  {name:32s} {seconds:7.2f} s")
        start = time.perf_counter()
        torchprof.analyze_traces([path])
        print(f"analyze_traces end to end  {time.perf_counter() - start:7.2f} s")


if __name__ == "__main__":
    main()
