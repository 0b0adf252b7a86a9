"""Benchmark the start-up of the installed `nsyskit` command, side by side with `nsys stats` on the same file.

Rows (each the fastest of --repeat runs, wall seconds, alternating the commands so machine load weighs on all):
- `nsyskit --help` (goal: at most 0.15 s on the 2-core dev machine);
- `nsyskit analyze EXPORT --json --no-html` on small real exports (under ~1 MB; goal: at most 0.25 s), against
  `nsys stats -r <kernel summary>` on the same file, with the ratio;
- `invoke --list` in the checkout, for reference.

Usage: .venv/bin/python bench/startup_bench.py [--repeat 5] [EXPORT.sqlite ...]
Without files it decompresses the real exports of tests/data/real and ../shared/real-data (.sqlite.xz) into a
temporary folder, one folder per export (so the analysis finds no other reports beside it).
"""

from __future__ import annotations

import argparse
import compileall
import lzma
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKED = [*(ROOT / "tests" / "data" / "real" / "nsys-exports").glob("*.sqlite.xz"),
          *(ROOT.parent / "shared" / "real-data" / "nsys-exports").glob("*.sqlite.xz")]  # fmt: skip
NSYSKIT = [str(Path(sys.executable).parent / "nsyskit")]
SMALL = 3 << 20  # the start-up question is about small files; bigger ones measure the analysis itself


def best(command: list[str], repeat: int, cwd: Path) -> float:
    """The fastest wall time of `repeat` runs (the output is discarded; a failure stops the bench)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return min(times)


def kernel_report(nsys: str) -> str:
    """The kernel summary's report name in this nsys (renamed in 2023.1)."""
    listing = subprocess.run([nsys, "stats", "--help-reports"], capture_output=True, text=True).stdout
    return "cuda_gpu_kern_sum" if "cuda_gpu_kern_sum" in listing else "gpukernsum"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("exports", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "src" / "nsyskit"), quiet=1)  # as an install has them
    print(f"load average {os.getloadavg()[0]:.2f}; fastest of {args.repeat} runs, wall seconds")
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        exports = list(args.exports)
        for packed in [] if exports else sorted(PACKED):
            folder = work / packed.name.removesuffix(".sqlite.xz")
            folder.mkdir()
            (folder / "export.sqlite").write_bytes(lzma.decompress(packed.read_bytes()))
            exports.append(folder / "export.sqlite")
        exports = [e for e in exports if e.stat().st_size <= SMALL]
        print(f"{'nsyskit --help':<58} {best([*NSYSKIT, '--help'], args.repeat, work):6.3f} s   (goal <= 0.15)")
        print(f"{'invoke --list (in the checkout)':<58} "
              f"{best([sys.executable, '-m', 'invoke', '--list'], args.repeat, ROOT):6.3f} s")  # fmt: skip
        nsys = subprocess.run(["sh", "-c", "command -v nsys"], capture_output=True, text=True).stdout.strip()
        report = kernel_report(nsys) if nsys else None
        print(f"\n{'export':<40} {'MB':>5} {'nsyskit analyze':>16} {'nsys stats':>11} {'ratio':>7}")
        for export in exports:
            ours = best([*NSYSKIT, "analyze", str(export), "--json", "--no-html"], args.repeat, export.parent)
            theirs = best([nsys, "stats", "-q", "-r", report, "--format", "csv", str(export)], args.repeat,
                          export.parent) if nsys else float("nan")  # fmt: skip
            name = export.parent.name if export.name == "export.sqlite" else export.name
            mb = export.stat().st_size / 1e6
            print(f"{name[:40]:<40} {mb:5.1f} {ours:14.3f} s {theirs:9.3f} s {theirs / ours:6.2f}x")
        print("goal: nsyskit analyze of a file under 1 MB in at most 0.25 s")


if __name__ == "__main__":
    main()
