"""Reading logs on several cores: one process per file, and a big plain file split into parts at line starts
(when no window is asked for: a window needs the lines in order); the parts' counts add up to the file's."""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from nsyskit.nccllog.scan import fastscan
from nsyskit.nccllog.scan.blocks import BLOCK_SIZE, is_gzip, read_blocks
from nsyskit.nccllog.scan.scan import FileScanner, Scan, Window, first_step

PARALLEL_MIN_BYTES = 16 << 20  # below this the files are read in this process (starting workers costs more)
PART_MIN_BYTES = 32 << 20  # a plain file is split in parts of at least this much, one per core at most


def cores() -> int:
    """The cores this process may run on (taskset / cgroup affinity), at least 1."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def part_spans(path: Path, parts: int) -> list[tuple[int, int]]:
    """[start, stop) byte ranges splitting the file into `parts`, each starting at a line start."""
    size = path.stat().st_size
    starts = [0]
    with open(path, "rb") as f:
        for k in range(1, parts):
            f.seek(max(size * k // parts - 1, starts[-1]))
            f.readline()  # to the start of the next line (the byte before the cut may end one)
            if f.tell() < size and f.tell() > starts[-1]:
                starts.append(f.tell())
    return list(zip(starts, [*starts[1:], size], strict=True))


Task = tuple[Path, "tuple[int, int] | None", "str | None"]  # file, part (None: all of it), step format


def plan(paths: list[Path], window: Window, workers: int) -> list[Task]:
    """What each process reads: whole files, and parts of big plain files when no window is asked for (with the
    step-line format of the file's first part, for the others)."""
    splittable = window.steps is None and window.lines is None and workers > 1
    tasks: list[Task] = []
    for path in paths:
        size = path.stat().st_size
        parts = min(workers, size // PART_MIN_BYTES) if splittable else 1
        if parts > 1 and not is_gzip(path):
            spans = part_spans(path, parts)
            fmt = first_step_format(path, spans[0][1])
            tasks += [(path, span, fmt) for span in spans]
        else:
            tasks.append((path, None, None))
    return tasks


def first_step_format(path: Path, stop: int, block_size: int = BLOCK_SIZE) -> str | None:
    """The step-line format of the file's first step line before byte `stop`, or None: the parts after the first
    read that format, as one pass over the file would (it keeps the first format it sees)."""
    for block, end in read_blocks(path, Scan(), block_size, (0, stop)):
        found = first_step(block, 0, end)
        if found is not None:
            return found[2].fmt
    return None


def scan_part(
    path: Path, window: Window, block_size: int, span: tuple[int, int] | None, fmt: str | None = None
) -> Scan:
    """One file's (or one part's) counts; its line numbers count from the part's start."""
    first = span is None or span[0] == 0
    scan = Scan(window=window, files=[str(path)] if first else [])
    with cyclic_gc_paused():
        FileScanner(path, scan, block_size, span, None if first else fmt).run()
    return scan


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cycle collector while scanning: each block's findall makes ~20k short-lived tuples, which trigger
    dozens of collections per block (~5% of the scan's CPU); the scan makes no reference cycles to collect."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def scan_file(path: Path, window: Window, block_size: int = BLOCK_SIZE) -> Scan:
    """One file's counts, in this process."""
    return scan_part(path, window, block_size, None)


def _shift_examples(part: Scan, path: Path, lines_before: int) -> None:
    """Make a part's example line numbers the file's (the part counted from its own first line)."""
    where = re.compile(rf"^({re.escape(str(path))}):(\d+): ")
    for kind, examples in part.examples.items():
        part.examples[kind] = [
            where.sub(lambda m: f"{m.group(1)}:{int(m.group(2)) + lines_before}: ", e, count=1) for e in examples
        ]


def _reporting(parts: Iterable[Scan], sizes: list[int], progress: Callable[[int, int], None] | None) -> list[Scan]:
    """The parts in order, calling progress(bytes read, bytes in all) after each."""
    collected, read, total = [], 0, sum(sizes)
    for part, size in zip(parts, sizes, strict=True):
        collected.append(part)
        read += size
        if progress:
            progress(read, total)
    return collected


def scan_files(
    paths: list[Path],
    window: Window | None = None,
    block_size: int = BLOCK_SIZE,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Scan:
    """Scan the logs (each file has its own line numbers and step state) and return the counts, in file order;
    with several cores, files and parts of big files are read by several processes, each in constant memory.
    progress(bytes read, bytes in all) is called as each file or part is done."""
    window = window or Window()
    if workers is None:
        total = sum(path.stat().st_size for path in paths)
        workers = 1 if total < PARALLEL_MIN_BYTES else cores()
    tasks = plan(paths, window, workers)
    sizes = [span[1] - span[0] if span else path.stat().st_size for path, span, _ in tasks]
    if workers <= 1 or len(tasks) <= 1:
        done = (scan_part(path, window, block_size, span, fmt) for path, span, fmt in tasks)
        parts = _reporting(done, sizes, progress)
    else:
        fastscan.function()  # compiled (or found in the cache) once here: the forked workers inherit it, no cc race
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
            done = pool.map(
                scan_part, *zip(*[(p, window, block_size, span, fmt) for p, span, fmt in tasks], strict=True)
            )
            parts = _reporting(done, sizes, progress)
    scan = Scan(window=window)
    lines_before, nccl_seen = 0, set()
    for (path, span, _), part in zip(tasks, parts, strict=True):
        lines_before = 0 if span is None or span[0] == 0 else lines_before
        _shift_examples(part, path, lines_before)
        lines_before += part.lines_total
        if str(path) not in part.files_without_nccl:
            nccl_seen.add(str(path))
        scan.merge(part)
    for file in nccl_seen:  # a file holds NCCL lines when any of its parts does
        scan.files_without_nccl.pop(file, None)
    return scan
