"""The merge of many parts on this machine's cores: blocks of parts merged side by side in worker processes into
partial merges (what a cluster's tree does with an array), then the final merge of those; one process below
SIDE_BY_SIDE_FILES parts or with one worker."""

from __future__ import annotations

import math
import multiprocessing
import os
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nsyskit.analysis.compute.result import Analysis
from nsyskit.analysis.mapreduce.partial import merge_block
from nsyskit.analysis.mapreduce.parts import SUFFIX, merge_parts
from nsyskit.errors import MergeWorkerError, NsyskitError

SIDE_BY_SIDE_FILES = 512  # fewer part files merge in one process: a worker's start (~0.5 s) is not paid back
BLOCK_FILES = 1024  # at most this many part files a block: a worker holds one block (~300 MB at 1,024 realistic ranks)
MAX_WORKERS = 8  # a login node's share: 8 blocks at once hold ~2.4 GB at most


def default_workers() -> int:
    """The worker processes a merge takes by default: the CPUs this process may run on (a Slurm job's, a pod's
    cgroup), at most MAX_WORKERS."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS: no affinity
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WORKERS))


def blocks_for(files: int, workers: int) -> int:
    """Blocks the part files are cut into (1: one process merges them): a block per worker, more where blocks would
    pass BLOCK_FILES."""
    if workers <= 1 or files < SIDE_BY_SIDE_FILES:
        return 1
    return max(workers, math.ceil(files / BLOCK_FILES))


@contextmanager
def merged_parts(
    folder: Path, straggler_pct: float = 5.0, strict: bool = False, workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[tuple[Analysis, dict[str, Any]]]:  # fmt: skip
    """(analysis, facts) of parts.merge_parts over `folder`, its blocks merged by `workers` processes side by side
    when there are SIDE_BY_SIDE_FILES part files or more; the partial merges (in a temporary folder, which the
    facts' part_files name for the timelines) are removed when the block ends. `progress(done, blocks)`."""
    files = sum(1 for _ in folder.glob("*" + SUFFIX)) if folder.is_dir() else 0
    blocks = blocks_for(files, workers)
    if blocks == 1:
        yield merge_parts(folder, straggler_pct, strict)
        return
    with tempfile.TemporaryDirectory(prefix="nsyskit-merge-") as scratch:
        merge_blocks(folder, Path(scratch), blocks, min(workers, blocks), strict, progress)
        yield merge_parts(Path(scratch), straggler_pct, strict)


def merge_blocks(
    folder: Path, out: Path, blocks: int, workers: int, strict: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[Path]:  # fmt: skip
    """The partial merges of `folder`'s part files cut into `blocks` blocks, written into `out` by `workers` processes
    side by side; their paths. A block's error stops the others and is raised with its block named."""
    # fork where there is one, as analyze_run's workers: no re-import of the command in each worker
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    written: list[Path] = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        pending = {pool.submit(_merge_block, str(folder), str(out), index, blocks, strict): index
                   for index in range(blocks)}  # fmt: skip
        try:
            while pending:
                done, _running = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    index = pending.pop(future)
                    result = future.result()
                    if isinstance(result, tuple):
                        raise MergeWorkerError(index, blocks, *result)
                    written.append(Path(result))
                    if progress:
                        progress(len(written), blocks)
        except BrokenProcessPool as exc:
            raise NsyskitError(
                f"a worker process of the merge of {folder} stopped ({exc or 'killed'}): out of memory?",
                fix="merge in one process with --workers 1, or on a machine with more memory",
            ) from None  # fmt: skip
        finally:
            for future in pending:
                future.cancel()
    return sorted(written)


def _merge_block(folder: str, out: str, index: int, blocks: int, strict: bool) -> str | tuple[str, int]:
    """In a worker: the partial merge of one block; its path, or (its error's line, exit code): nsyskit's errors
    carry fields that do not travel between processes, their line does."""
    try:
        return str(merge_block(Path(folder), Path(out), index, blocks, strict))
    except NsyskitError as exc:
        return exc.one_line(), exc.exit_code
