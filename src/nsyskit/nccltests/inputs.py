"""Which files an 'invoke nccl-tests' argument names (files, globs, run folders), and reading them."""

from __future__ import annotations

import glob
import gzip
from pathlib import Path

from nsyskit.errors import NcclTestsError

# Files of a run folder that cannot hold a nccl-tests table (reports, exports, the kit's own outputs).
SKIP_SUFFIXES = {".nsys-rep", ".qdrep", ".qdstrm", ".sqlite", ".json", ".html", ".png", ".csv", ".xz", ".sqsh"}
MAX_TEXT_PROBE = 4096  # bytes looked at to tell a text file from a binary one


def read_bytes(path: Path) -> bytes:
    """A file's bytes (gunzipped for .gz), or an NcclTestsError naming it."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as stream:
                return stream.read()
        return path.read_bytes()
    except (OSError, EOFError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise NcclTestsError(str(path), f"cannot be read ({reason})", "check the path and its permissions") from None


def _is_text(path: Path) -> bool:
    """Whether a folder's file looks like text (no NUL in its first bytes) and may hold output."""
    if path.suffix in SKIP_SUFFIXES or path.name.startswith("nccl-tests."):
        return False
    try:
        with open(path, "rb") as stream:
            return b"\0" not in stream.read(MAX_TEXT_PROBE)
    except OSError:
        return False


def resolve(arguments: list[str]) -> tuple[list[Path], list[Path]]:
    """(files named one by one, files found in folders) for FILE|RUN|GLOB arguments, comma-separated or not."""
    named: list[Path] = []
    in_folders: list[Path] = []
    for argument in arguments:
        for item in (part.strip() for part in str(argument).split(",")):
            if not item:
                continue
            path = Path(item).expanduser()
            matches = [Path(p) for p in sorted(glob.glob(item))] if glob.has_magic(item) else [path]
            if not matches or not matches[0].exists():
                raise NcclTestsError(item, "no such file or folder", "give a nccl-tests output file or a run folder")
            for match in matches:
                if match.is_dir():
                    in_folders += sorted(p for p in match.rglob("*") if p.is_file() and _is_text(p))
                else:
                    named.append(match)
    return named, in_folders
