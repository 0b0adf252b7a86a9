"""Where 'invoke nccl-log' writes: the --html page, a run folder's nccl-log.html and nccl-log.json; each problem is
one NcclLogError naming the file, the value and the fix, raised after every other output was written.

The run's report.html is 'invoke analyze''s: it composes its own NCCL log section, so nothing here edits it."""

from __future__ import annotations

import json
from pathlib import Path

from nsyskit.errors import NcclLogError
from nsyskit.nccllog.render.render import render_page
from nsyskit.nccllog.tables.analysis import NcclLogAnalysis


def check_html_target(html: str | None) -> Path | None:
    """The --html file, checked before any log is read: not a folder, its folder exists."""
    if not html:
        return None
    path = Path(html)
    if path.is_dir():
        raise NcclLogError("--html", html, "is a folder", f"name a file in it, e.g. --html {path / 'nccl-log.html'}")
    if not path.parent.is_dir():
        raise NcclLogError(
            "--html",
            html,
            f"its folder {str(path.parent)!r} does not exist",
            f"create it first: mkdir -p {path.parent}",
        )
    return path


def no_nccl_line(analysis: NcclLogAnalysis) -> NcclLogError | None:
    """The error to give when no file holds an NCCL line nor a step line (empty, binary, UTF-16 input); else None."""
    held = analysis.files_without_nccl
    if analysis.steps["step_lines"] or len(held) < len(analysis.files) or not analysis.files:
        return None
    first, what = next(iter(held.items()))
    more = f" (and {len(held) - 1} more file(s) without one)" if len(held) > 1 else ""
    return NcclLogError(
        "LOG",
        first,
        f"no NCCL line was found: the file {what}{more}",
        "give a log written with NCCL_DEBUG=INFO (the job's output or its NCCL_DEBUG_FILE files)",
    )


def run_folders(arguments: list[str]) -> list[Path]:
    """The arguments that are run folders (a reports/<run-id>/ with its run.json)."""
    return [Path(a) for a in arguments if Path(a).is_dir() and (Path(a) / "run.json").is_file()]


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise NcclLogError(
            "output", str(path), f"could not be written ({exc.strerror or exc}); the analysis above is complete",
            "make the folder writable, or save the results with --json > FILE",
        ) from None  # fmt: skip


def write_outputs(analysis: NcclLogAnalysis, arguments: list[str], html: Path | None, top: int) -> list[str]:
    """Write every output the arguments ask for; what was written, in words. Raises the first problem (one line)
    once every other output was attempted, so nothing writable is lost to an unwritable one."""
    page = render_page(analysis, top=top)
    written, problems = [], []
    for folder in run_folders(arguments):
        try:
            _write(folder / "nccl-log.json", json.dumps(analysis.to_dict(), indent=1))
            _write(folder / "nccl-log.html", page)
            written.append(f"wrote {folder / 'nccl-log.html'} and nccl-log.json")
        except NcclLogError as exc:
            problems.append(exc)
    if html is not None:
        try:
            _write(html, page)
            written.append(f"wrote {html}")
        except NcclLogError as exc:
            problems.append(exc)
    if problems:
        raise problems[0]
    return written
