"""The raw build context: Dockerfile + Container-Root/ as a tar, and the digest of everything a build depends on."""

from __future__ import annotations

import hashlib
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

from nsyskit.assets import kit_root

CONTEXT_PATHS = ("Dockerfile", "Container-Root")
# The image's own nsyskit (analyze-part/-merge run where the reports are, in the run's image): this library's
# sources under /opt/nsyskit/python, started by Container-Root/usr/local/bin/nsyskit with the image's python3.
LIBRARY_DIR = "Container-Root/opt/nsyskit/python/nsyskit"
LIBRARY_SUFFIXES = (".py", ".j2", ".html", ".css", ".c")  # no compiled helpers: built for this host, not the image
# Never part of an image: editor and interpreter droppings.
IGNORED_NAMES = {"__pycache__", ".pytest_cache", ".DS_Store"}
IGNORED_SUFFIXES = (".pyc", ".pyo", ".swp", "~")


@dataclass(frozen=True)
class ContextFile:
    """One file of the build context: its path in the context, mode bits and content."""

    name: str
    mode: int
    data: bytes


def _ignored(path: Path) -> bool:
    return any(part in IGNORED_NAMES for part in path.parts) or path.name.endswith(IGNORED_SUFFIXES)


def context_files(root: Path) -> list[ContextFile]:
    """The files `docker build` gets, sorted by name (symlinks are kept as the file they point to); from the project
    folder when it is a checkout, else the package's copy."""
    root = kit_root(root)
    files = []
    for top in CONTEXT_PATHS:
        base = root / top
        paths = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for path in paths:
            rel = path.relative_to(root)
            if not _ignored(rel):
                files.append(ContextFile(rel.as_posix(), path.stat().st_mode & 0o7777, path.read_bytes()))
    return sorted(files + library_files(), key=lambda f: f.name)


def library_files() -> list[ContextFile]:
    """This nsyskit's sources as the image gets them (the kit files of _kit/ are in the context already)."""
    import nsyskit

    package = Path(nsyskit.__file__).resolve().parent
    files = []
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package)
        if rel.parts[0] != "_kit" and path.suffix in LIBRARY_SUFFIXES and path.is_file() and not _ignored(rel):
            files.append(ContextFile(f"{LIBRARY_DIR}/{rel.as_posix()}", 0o644, path.read_bytes()))
    return files


def context_tar(files: list[ContextFile]) -> bytes:
    """An uncompressed tar of the files, owned by root with a fixed mtime (Docker's COPY cache ignores mtimes)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for f in files:
            info = tarfile.TarInfo(f.name)
            info.size, info.mode, info.mtime = len(f.data), f.mode, 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(f.data))
    return buffer.getvalue()


def inputs_digest(files: list[ContextFile], build_args: dict[str, str], extra: dict[str, str]) -> str:
    """sha256 over the context (names, modes, contents), the build args and extra inputs (base image ID, assets)."""
    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f.name}\0{f.mode:o}\0".encode())
        digest.update(hashlib.sha256(f.data).digest())
    for key in sorted(build_args):
        digest.update(f"arg\0{key}\0{build_args[key]}\0".encode())
    for key in sorted(extra):
        digest.update(f"extra\0{key}\0{extra[key]}\0".encode())
    return digest.hexdigest()
