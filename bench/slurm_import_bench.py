"""Benchmark `invoke analyze RUN --slurm` through Pyxis (issue 35): the time each map element waits before it writes
its first part, when every element imports the run's image itself (Pyxis given a URI) vs once before the array (the
import job writes a .sqsh that every element runs).

What runs here (no enroot or Pyxis on this machine), each measured on its own:
- an element's own start: `nsyskit analyze-part RUN --array-size E --array-index i` on this host, from the process'
  start to its first part file on disk (interpreter, imports, reading the report, writing the part), per element;
- the image import's first stage: `docker save IMAGE`, the Docker daemon's export of the image that `enroot import
  dockerd://IMAGE` (and Pyxis given dockerd://IMAGE) reads, streamed and counted (nothing kept).
Not measured here: enroot's unpacking of the layers and its mksquashfs (the rest of an import), and Pyxis' start of a
container from the .sqsh, which each element pays in both cases. So the per-element figures below are lower bounds
of both columns, and the ratio is the ratio of what was measured.

Usage: .venv/bin/python bench/slurm_import_bench.py [--image nsyskit:latest] [--elements 2] [--repeat 3]
       [--import-repeat 1] [REPORT.sqlite[.xz] ...]
Without reports it uses the two-GPU real export nsysai_mfu_2gpu_after (../shared/real-data) as E ranks.
"""

from __future__ import annotations

import argparse
import lzma
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REPORT = ROOT.parent / "shared" / "real-data" / "nsys-exports" / "nsysai_mfu_2gpu_after.sqlite.xz"
NSYSKIT = [str(Path(sys.executable).parent / "nsyskit")]
PART_SUFFIX = ".part.npz"
POLL_S = 0.005


def make_run(reports: list[Path], elements: int, folder: Path) -> Path:
    """A run folder of `elements` reports (the given ones, decompressed, repeated under rank names as needed)."""
    run = folder / "run"
    run.mkdir(parents=True)
    plain = []
    for index, report in enumerate(reports):
        target = folder / f"source_{index}.sqlite"
        target.write_bytes(lzma.decompress(report.read_bytes()) if report.suffix == ".xz" else report.read_bytes())
        plain.append(target)
    for rank in range(elements):
        os.link(plain[rank % len(plain)], run / f"bench_rank_{rank}.sqlite")
    return run


def first_part_s(run: Path, elements: int, index: int, parts: Path) -> float:
    """Seconds from the start of one element's process to its first part file on disk (the element then ends)."""
    shutil.rmtree(parts, ignore_errors=True)
    command = [*NSYSKIT, "analyze-part", str(run), "--out", str(parts), "--array-size", str(elements),
               "--array-index", str(index)]  # fmt: skip
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = None
    while seen is None:
        if parts.is_dir() and any(p.name.endswith(PART_SUFFIX) for p in parts.iterdir()):
            seen = time.perf_counter() - start
        elif process.poll() is not None:
            raise SystemExit(f"analyze-part ended {process.returncode} without a part: {process.stderr.read()[-500:]}")
        else:
            time.sleep(POLL_S)
    if process.wait() != 0:
        raise SystemExit(f"analyze-part failed: {process.stderr.read()[-500:]}")
    return seen


def docker_save_s(image: str) -> tuple[float, int]:
    """(seconds, bytes) of the Docker daemon's export of `image`, streamed and counted."""
    start = time.perf_counter()
    process = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    size = 0
    while chunk := process.stdout.read(1 << 20):
        size += len(chunk)
    if process.wait() != 0:
        raise SystemExit(f"docker save {image} failed: {process.stderr.read().decode(errors='replace')[-500:]}")
    return time.perf_counter() - start, size


def main() -> None:
    """Measure both stages and print the two routes side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="*", type=Path)
    parser.add_argument("--image", default="nsyskit:latest", help="the kit image in this host's Docker daemon")
    parser.add_argument("--elements", type=int, default=2, help="map elements (one report each), as in the field run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each element's start (the median is shown)")
    parser.add_argument("--import-repeat", type=int, default=1, help="runs of docker save (3 GB each; the fastest)")
    args = parser.parse_args()
    reports = args.reports or [DEFAULT_REPORT]
    for report in reports:
        if not report.is_file():
            raise SystemExit(f"{report} is missing (pass reports, or keep ../shared/real-data beside the checkout)")
    with tempfile.TemporaryDirectory(prefix="nsyskit-import-bench-") as tmp:
        run = make_run(reports, args.elements, Path(tmp))
        starts = [statistics.median(first_part_s(run, args.elements, index, Path(tmp) / f"parts-{index}")
                                    for _ in range(args.repeat)) for index in range(args.elements)]  # fmt: skip
    saves = [docker_save_s(args.image) for _ in range(args.import_repeat)]
    save_s, size = min(saves)
    element_s = statistics.median(starts)
    before, after = element_s + save_s, element_s
    e = args.elements
    print(
        f"analyze --slurm through Pyxis, {e} map element(s) of one report each ({reports[0].name}); image "
        f"{args.image} ({size / 1e9:.2f} GB as docker save streams it); load {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores"
    )
    print(
        f"element start to first part, per element (median of {args.repeat}): "
        + ", ".join(f"#{i} {s:.2f} s" for i, s in enumerate(starts))
    )
    print(f"docker save of the image (the import's first stage; fastest of {args.import_repeat}): {save_s:.1f} s")
    rows = [
        ("", "before: each element imports", "after: imported once first", "ratio"),
        ("per element, before its first part", f"{before:.1f} s", f"{after:.2f} s", f"{before / after:.1f}x"),
        ("  of which the import (measured part)", f"{save_s:.1f} s", "0 s (the import job's)", ""),
        (f"the array's imports ({e} elements)", f"{e} x {save_s:.1f} s = {e * save_s:.1f} s", f"1 x {save_s:.1f} s",
         f"{e:.0f}x"),
        ("first part of the array, from submit", f"{before:.1f} s", f"{save_s + after:.1f} s", "1.0x (one import)"),
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    print(
        "not measured here (no enroot/Pyxis): enroot's layer unpacking and mksquashfs, which lengthen each import, and "
        "Pyxis' container start from the .sqsh, which each element pays in both columns"
    )


if __name__ == "__main__":
    main()
