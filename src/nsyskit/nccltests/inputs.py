"""Which files an 'invoke nccl-tests' argument names (files, globs, run folders), and reading them."""

from __future__ import annotations

import glob
import gzip
import sys
from pathlib import Path

from nsyskit.errors import NcclTestsError

# Files of a run folder that cannot hold a nccl-tests table (reports, exports, the kit's own outputs).
SKIP_SUFFIXES = {".nsys-rep", ".qdrep", ".qdstrm", ".sqlite", ".json", ".html", ".png", ".csv", ".xz", ".sqsh"}
MAX_TEXT_PROBE = 4096  # bytes looked at to tell a text file from a binary one
STDIN = Path("-")  # the argument '-': standard input (a pipe: 'zcat out.log.gz | nsyskit nccl-tests -')
GZIP_MAGIC = b"\x1f\x8b"


def read_stdin() -> bytes:
    """Standard input's bytes (gunzipped when it is gzip), or an NcclTestsError when it is a terminal."""
    if sys.stdin is None or sys.stdin.isatty():
        raise NcclTestsError("-", "standard input is a terminal, not a pipe",
                             "pipe the output in (zcat out.log.gz | nsyskit nccl-tests -) or name the file")  # fmt: skip
    data = sys.stdin.buffer.read()
    try:
        return gzip.decompress(data) if data.startswith(GZIP_MAGIC) else data
    except (OSError, EOFError) as exc:
        raise NcclTestsError("-", f"cannot be read ({exc})", "pipe the whole gzip stream, or unpack it first") from None


def read_bytes(path: Path) -> bytes:
    """A file's bytes (gunzipped for .gz; '-' is standard input), or an NcclTestsError naming it."""
    if path == STDIN:
        return read_stdin()
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
            if item == str(STDIN):
                named.append(STDIN)
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
