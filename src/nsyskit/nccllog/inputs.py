"""Which files an 'invoke nccl-log' argument names: files, globs, run folders; and the A-B range flags."""

from __future__ import annotations

import glob
from pathlib import Path

from nsyskit.errors import NcclLogError

# In a folder, these are the files that can hold NCCL output or step lines (rank logs, NCCL_DEBUG_FILE files).
LOG_PATTERNS = ("*.log", "*.log.gz", "*.txt", "*.txt.gz", "*.out", "*.out.gz", "*nccl*")
SKIP_SUFFIXES = {".nsys-rep", ".qdstrm", ".sqlite", ".json", ".html", ".png", ".csv"}


def logs_in_folder(folder: Path) -> list[Path]:
    """Log files anywhere under a folder (a run's report folder), sorted by path."""
    found = {
        path
        for pattern in LOG_PATTERNS
        for path in folder.rglob(pattern)
        if path.is_file() and path.suffix not in SKIP_SUFFIXES and not path.name.startswith("nccl-log.")
    }
    return sorted(found)


def resolve_logs(arguments: list[str]) -> list[Path]:
    """Expand each argument (a file, a folder, a glob; several may be comma-separated) into log files, in order."""
    paths: list[Path] = []
    for argument in arguments:
        for item in (part.strip() for part in argument.split(",")):
            if not item:
                continue
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
                paths += found
            elif path.is_file():
                paths.append(path)
            elif glob.has_magic(item):
                matched = sorted(Path(p) for p in glob.glob(item, recursive=True) if Path(p).is_file())
                if not matched:
                    raise NcclLogError(
                        "LOG", item, "the pattern matches no file", "check the path and quote the pattern"
                    )
                paths += matched
            else:
                raise NcclLogError(
                    "LOG", item, "no such file or folder", "give an NCCL_DEBUG=INFO log, a glob, or a run folder"
                )
    if not paths:
        raise NcclLogError("LOG", "", "no log given", "name one or more logs: invoke nccl-log rank0.log rank1.log.gz")
    unique: dict[Path, None] = dict.fromkeys(paths)
    return list(unique)


def parse_range(flag: str, text: str | None) -> tuple[int, int] | None:
    """'A-B' (or a single 'N') as an inclusive (A, B) with 0 <= A <= B; None when not given."""
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
    if a < 0 or b < a:
        raise NcclLogError(flag, text, "the range is empty or negative", f"write {flag} A-B with 0 <= A <= B")
    return a, b
