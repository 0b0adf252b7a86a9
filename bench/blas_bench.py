"""Benchmark what OpenBLAS's worker threads cost `nsyskit analyze`, which calls no BLAS routine: the analysis loads
numpy with one thread (src/nsyskit/analysis/process.py); OPENBLAS_NUM_THREADS set to the machine's cores gives numpy's
default back, as a user's own setting is left alone.

Default export: ../shared/real-data's aiprofiler_a100_secondOptimization (as bench/counters_bench.py). Each row is the
median of --repeat runs of `nsyskit analyze EXPORT --json --no-html` in a fresh process (wall seconds, and CPU seconds
of every thread), the two settings alternating so machine load weighs on both.

Usage: .venv/bin/python bench/blas_bench.py [--repeat 9] [EXPORT.sqlite]
"""

from __future__ import annotations

import argparse
import lzma
import os
import statistics
import tempfile
from pathlib import Path

from counters_bench import DEFAULT, timed_analyze  # bench/ is the script's folder: on sys.path


def main() -> None:
    """Time analyze with one BLAS thread and with one per core, alternating; print both and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", nargs="?", type=Path)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    cores = str(os.cpu_count() or 1)
    with tempfile.TemporaryDirectory() as work:
        export = args.export
        if export is None:
            export = Path(work) / "a100.sqlite"
            export.write_bytes(lzma.decompress(DEFAULT.read_bytes()))
        timed_analyze(export, {})  # the file in the page cache, the helpers built
        single, per_core = [], []
        for _ in range(args.repeat):
            single.append(timed_analyze(export, {}))
            per_core.append(timed_analyze(export, {"OPENBLAS_NUM_THREADS": cores}))
        a, b = (statistics.median(w for w, _ in runs) for runs in (single, per_core))
        c, d = (statistics.median(cpu for _, cpu in runs) for runs in (single, per_core))
        print(
            f"load average {os.getloadavg()[0]:.2f}; median of {args.repeat} runs, seconds; {export.name}; {cores} cores"
        )
        print(f"{'':<52} {'wall':>9} {'CPU':>9}")
        print(f"{'analyze, one BLAS thread (the default)':<52} {a:7.3f} s {c:7.3f} s")
        print(f"{f'analyze, OPENBLAS_NUM_THREADS={cores} (numpy alone)':<52} {b:7.3f} s {d:7.3f} s")
        print(f"{'one thread against one per core':<52} {a / b:8.3f}x {c / d:8.3f}x")


if __name__ == "__main__":
    main()
