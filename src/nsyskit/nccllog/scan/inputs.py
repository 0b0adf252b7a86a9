"""Which files an 'invoke nccl-log' argument names: files, globs, run folders; and the A-B range flags."""

from __future__ import annotations

import atexit
import errno
import glob
import shutil
import sys
import tempfile
from pathlib import Path

from nsyskit import runrecord
from nsyskit.errors import NcclLogError

# In a folder, these are the files that can hold NCCL output or step lines (rank logs, NCCL_DEBUG_FILE files).
LOG_PATTERNS = ("*.log", "*.log.gz", "*.txt", "*.txt.gz", "*.out", "*.out.gz", "*nccl*")
SKIP_SUFFIXES = {".nsys-rep", ".qdstrm", ".sqlite", ".json", ".html", ".png", ".csv"}


def logs_in_folder(folder: Path, recursive: bool = True) -> list[Path]:
    """Log files anywhere under a folder (a run's report folder), or only in it, sorted by path."""
    found = {
        path
        for pattern in LOG_PATTERNS
        for path in (folder.rglob(pattern) if recursive else folder.glob(pattern))
        if path.is_file() and path.suffix not in SKIP_SUFFIXES and not path.name.startswith("nccl-log.")
    }
    return sorted(found)


def _readable(path: Path) -> Path:
    """The path, once it opened for reading (a permission problem named here, not as a traceback mid-scan)."""
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise NcclLogError(
            "LOG",
            str(path),
            f"cannot be read ({exc.strerror or exc})",
            "make it readable (chmod a+r) or run as its owner",
        ) from None
    return path


def _not_found(item: str, argument: str) -> NcclLogError:
    if "," in argument:
        return NcclLogError(
            "LOG",
            item,
            f"no such file or folder (commas separate paths: {argument!r} was split at its comma)",
            "name a path holding a comma with a glob in place of the comma (e.g. 'run?1.log'), or rename it",
        )
    return NcclLogError("LOG", item, "no such file or folder", "give an NCCL_DEBUG=INFO log, a glob, or a run folder")


def is_run_folder(path: Path) -> bool:
    """Whether PATH is a run folder: one with the run.json every target's collect writes (local, Slurm, k8s)."""
    try:
        return runrecord.read_run(str(path)) is not None
    except runrecord.RunRecordError as exc:  # written by a newer nsyskit, or not JSON: say so rather than guess
        raise NcclLogError("LOG", exc.path, exc.problem, exc.fix) from None


STDIN = "-"  # the argument '-': standard input (a pipe: 'zcat run.log.gz | nsyskit nccl-log -')


def stdin_copy() -> Path:
    """Standard input copied to a temporary file named 'stdin', removed at exit: the scanner reads a file in parallel
    parts and may read it twice (the step window), which a pipe cannot give."""
    if sys.stdin is None or sys.stdin.isatty():
        raise NcclLogError("LOG", STDIN, "standard input is a terminal, not a pipe",
                           "pipe the log in (zcat run.log.gz | nsyskit nccl-log -) or name the file")  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="nsyskit-nccl-log-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "stdin"
    with open(path, "wb") as copy:
        shutil.copyfileobj(sys.stdin.buffer, copy, 1 << 20)
    return path


def _expand(item: str, argument: str) -> tuple[list[Path], str | None]:
    """The files one path, folder or glob names, and the job they form (a run folder, one with run.json: one job;
    None: each file is its own job)."""
    if item == STDIN:
        return [stdin_copy()], STDIN
    path = Path(item)
    if path.is_dir():
        found = logs_in_folder(path)
        if not found:
            raise NcclLogError(
                "LOG",
                item,
                "the folder holds no log files (*.log, *.txt, *.out, *nccl*, .gz)",
                "name the log files themselves",
            )
        return found, str(path) if is_run_folder(path) else None  # a run's rank logs: one job
    if path.is_file():
        return [path], None
    if glob.has_magic(item):
        matched = sorted(Path(p) for p in glob.glob(item, recursive=True) if Path(p).is_file())
        if not matched:
            raise NcclLogError("LOG", item, "the pattern matches no file", "check the path and quote the pattern")
        return matched, None
    raise _not_found(item, argument)


def resolve_jobs(arguments: list[str]) -> dict[Path, str]:
    """Each log file the arguments name (files, folders, globs; several may be comma-separated), in order, with the
    job it belongs to: the run folder for the files of a run folder argument (one with run.json), else the file. A file reached twice
    (named twice, through symlinks, or by a glob over a symlink loop) is read once."""
    jobs: dict[Path, str] = {}
    seen: set[tuple[int, int]] = set()
    for argument in arguments:
        whole = argument.strip()
        items = [whole] if "," in whole and Path(whole).exists() else [part.strip() for part in whole.split(",")]
        for item in items:
            if not item:
                continue
            found, job = _expand(item, argument)
            for path in found:
                try:
                    stat = path.stat()
                except OSError as exc:
                    if exc.errno == errno.ELOOP:  # a glob through a symlink loop, past the kernel's depth: seen
                        continue
                    raise
                _readable(path)
                if (stat.st_dev, stat.st_ino) not in seen:
                    seen.add((stat.st_dev, stat.st_ino))
                    jobs[path] = job or str(path)
    if not jobs:
        raise NcclLogError("LOG", "", "no log given", "name one or more logs: invoke nccl-log rank0.log rank1.log.gz")
    return jobs


def resolve_logs(arguments: list[str]) -> list[Path]:
    """Expand each argument (a file, a folder, a glob; several may be comma-separated) into log files, in order,
    each file once."""
    return list(resolve_jobs(arguments))


def parse_range(flag: str, text: str | None, lowest: int = 0) -> tuple[int, int] | None:
    """'A-B' (or a single 'N') as an inclusive (A, B) with lowest <= A <= B; None when not given."""
    if text is None or str(text).strip() == "":
        return None
    first, sep, last = str(text).strip().partition("-")
    try:
        a = int(first)
        b = int(last) if sep else a
    except ValueError:
        raise NcclLogError(
            flag, text, "not a range", f"write {flag} A-B with whole numbers, e.g. {flag} 45-50"
        ) from None
    if a < lowest or b < a:
        problem = f"{flag} counts from {lowest}" if a < lowest else "the range is empty or negative"
        raise NcclLogError(flag, text, problem, f"write {flag} A-B with {lowest} <= A <= B")
    return a, b
