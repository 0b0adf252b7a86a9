"""The host's nsys CLI: find it (or install Debian's), turn .qdstrm/.nsys-rep into a cached .sqlite, stats, recipes."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from nsyskit import console
from nsyskit.errors import NsysUnavailable, ReportFileError
from nsyskit.ranks import nsysargs

NSYS_CANDIDATES = (
    "/usr/bin/nsys",
    "/usr/local/bin/nsys",
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
)
# nsys stats report names changed in 2023.1; the first name is 2023.1+, the second 2022.x.
STATS_REPORTS = {"kernel": ("cuda_gpu_kern_sum", "gpukernsum"), "nvtx": ("nvtx_sum", "nvtxsum")}
EXPORT_TIMEOUT_S = 1800
# nsys ends a report with a trailer naming its own build, e.g. "2023.2.3.1004-33186433v0".
RECORDED_VERSION = re.compile(rb"(20\d\d\.\d+\.\d+(?:\.\d+)?)-[0-9a-f]{6,}")
TRAILER_BYTES = 4096


def find_nsys() -> str | None:
    """Path of the nsys CLI on this machine, or None."""
    found = shutil.which("nsys")
    if found:
        return found
    for pattern in NSYS_CANDIDATES:
        for candidate in sorted(Path("/").glob(pattern.lstrip("/")), reverse=True):
            if os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def require_nsys(for_what: str, path: object = "nsys") -> str:
    """The nsys CLI, or NsysUnavailable saying what needed it and how to get it."""
    nsys = find_nsys()
    if not nsys:
        raise NsysUnavailable(
            path, f"the nsys CLI is needed to {for_what} but is not installed",
            "install Nsight Systems (Debian: enable contrib and non-free, then apt-get install nsight-systems nsight-systems-target) or pass the exported .sqlite",
        )  # fmt: skip
    return nsys


def version(nsys: str | None = None) -> str:
    """The nsys version, e.g. '2022.4.2.1' ('' when unknown)."""
    nsys = nsys or find_nsys()
    if not nsys:
        return ""
    result = subprocess.run([nsys, "--version"], capture_output=True, text=True, timeout=60)
    match = re.search(r"(\d{4}\.\d+(?:\.\d+)*)", result.stdout + result.stderr)
    return match.group(1) if match else ""


def ensure_installed() -> str:
    """nsys, installing Debian's nsight-systems (+ -target) from contrib + non-free when missing (root on Debian only)."""
    nsys = find_nsys()
    if nsys:
        return nsys
    from nsyskit import hostpkgs  # only needed on this path

    if not hostpkgs.can_install():
        raise NsysUnavailable(
            "nsys",
            "nsys is not installed",
            "install Nsight Systems from NVIDIA (or as root on Debian: enable contrib and non-free, then apt-get install nsight-systems nsight-systems-target)",
        )
    hostpkgs.install("nsys")
    return require_nsys("run")


def import_qdstrm(qdstrm: Path) -> Path:
    """X.qdstrm -> X.nsys-rep beside it (cached); NsysUnavailable without the importer."""
    rep = qdstrm.with_suffix(".nsys-rep")
    if rep.exists() and rep.stat().st_mtime >= qdstrm.stat().st_mtime:
        return rep
    importer = nsysargs.find_importer(find_nsys())
    if not importer:
        raise NsysUnavailable(
            qdstrm,
            "QdstrmImporter (part of nsys) is needed to import a .qdstrm but is not installed",
            "install Nsight Systems",
        )
    result = subprocess.run([importer, "-i", str(qdstrm)], capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
    if result.returncode != 0 or not rep.exists():
        tail = _tail(result.stdout + result.stderr)
        raise ReportFileError(
            qdstrm,
            f"QdstrmImporter could not import it (exit {result.returncode}): {tail}",
            "the capture may be incomplete; record it again",
        )
    return rep


BIG_REPORT_BYTES = 200 << 20  # reports from this size on get a line before and after their export


def export_sqlite(rep: Path) -> Path:
    """X.nsys-rep (or X.qdrep) -> X.sqlite beside it (reused while newer than the report), with 'nsys export'.

    Beside a report in a read-only folder, the export goes to ~/.cache/nsyskit/exports under a key that stays the
    same across runs (a digest of the report's path), so a second analyze reuses it.
    """
    target = rep.with_suffix(".sqlite")
    if not os.access(rep.parent, os.W_OK) and not (target.exists() and os.access(target, os.W_OK)):
        target = _cached(rep, ".sqlite")
    return _export(rep, target)


def export_payloads(rep: Path) -> Path:
    """X.nsys-rep -> a fresh export with the NVTX payload values (NCCL's sizes), for a .sqlite beside it that was
    exported without them: in ~/.cache/nsyskit/exports (the user's .sqlite stays as it is), reused while newer."""
    return _export(rep, _cached(rep, ".payloads.sqlite"))


def _cached(rep: Path, suffix: str) -> Path:
    """The export cache's file for this report (a digest of its path: the same across runs)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nsyskit" / "exports"
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportFileError(
            rep, f"its folder is read-only and the export cache {cache} cannot be made ({exc.strerror})",
            "export it yourself ('nsys export --type sqlite') into a writable folder and pass the .sqlite",
        ) from None  # fmt: skip
    digest = hashlib.sha256(str(rep.resolve()).encode()).hexdigest()[:16]
    return cache / f"{digest}-{rep.stem}{suffix}"


def _export(rep: Path, target: Path) -> Path:
    """'nsys export' of `rep` into `target`, unless `target` is already there and newer than the report."""
    if target.exists() and target.stat().st_size > 0 and target.stat().st_mtime >= rep.stat().st_mtime:
        return target
    nsys = require_nsys("export a .nsys-rep to SQLite", rep)
    if rep.stat().st_size == 0:
        raise ReportFileError(rep, "is empty (0 bytes)", "the profile did not finish: record it again")
    cmd = nsysargs.export_args(nsys, str(target), str(rep))  # with the NVTX payload values where this nsys can
    size, started = rep.stat().st_size, time.monotonic()
    if size >= BIG_REPORT_BYTES:  # big exports take minutes: say what runs, once, and how long it took
        console.info(f"exporting {rep.name} ({size / 1e9:.1f} GB) to SQLite with nsys export (once; cached)…")
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
    if size >= BIG_REPORT_BYTES and result.returncode == 0:
        console.info(f"exported {rep.name} in {time.monotonic() - started:.0f} s")
    if result.returncode != 0 or not target.exists():
        target.unlink(missing_ok=True)
        _raise_newer_report(rep, nsys)
        tail = _tail(result.stderr or result.stdout)
        raise ReportFileError(
            rep,
            f"nsys export failed (exit {result.returncode}): {tail}",
            "the report is corrupt or truncated; record it again",
        )
    return target


def recorded_version(rep: Path) -> str:
    """The nsys version that recorded a report, from the trailer nsys writes at its end ('' when it says nothing)."""
    try:
        with rep.open("rb") as handle:
            handle.seek(max(0, rep.stat().st_size - TRAILER_BYTES))
            tail = handle.read()
    except OSError:
        return ""
    match = RECORDED_VERSION.search(tail)
    return match.group(1).decode() if match else ""


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:4])


def _raise_newer_report(rep: Path, nsys: str) -> None:
    """Raise the one-line 'recorded by a newer nsys' error when the report says it was (export failures only)."""
    recorded, installed = recorded_version(rep), version(nsys)
    if recorded and installed and _version_key(recorded) > _version_key(installed):
        raise ReportFileError(
            rep,
            f"recorded by nsys {recorded}, newer than the installed nsys {installed}, which cannot read it",
            f"export it with nsys >= {recorded.rsplit('.', 1)[0] if recorded.count('.') > 2 else recorded} "
            f"('nsys export --type sqlite {rep.name}') and pass the .sqlite",
        )


def stats(path: Path, kind: str = "kernel") -> list[dict[str, str]]:
    """Rows of nsys stats' summary report of `kind` ('kernel' or 'nvtx') as CSV dicts, with the name this nsys uses."""
    nsys = require_nsys("run nsys stats", path)
    new, old = STATS_REPORTS[kind]
    name = new if version(nsys) >= "2023.1" else old
    cmd = [nsys, "stats", "--report", name, "--format", "csv", "--output", "-", "--force-export", "false", str(path)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
    if result.returncode != 0:
        raise NsysUnavailable(path, f"nsys stats -r {name} failed (exit {result.returncode}): {_tail(result.stderr)}")
    text = result.stdout
    header = next((i for i, line in enumerate(text.splitlines()) if line.startswith(('"Time', "Time"))), None)
    if header is None:
        return []
    return list(csv.DictReader(io.StringIO("\n".join(text.splitlines()[header:]))))


def has_recipes(nsys: str) -> bool:
    """Whether this nsys has the 'recipe' command (2023.3 and later)."""
    result = subprocess.run([nsys, "recipe", "--help"], capture_output=True, text=True, timeout=120)
    return (
        result.returncode == 0
        and "recipe" in (result.stdout + result.stderr).lower()
        and "unknown" not in result.stderr.lower()
    )


def _tail(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-2:])[:300] if lines else "no output"
