"""The NCCL log section of 'invoke analyze''s report.html (the hook nsyskit.analysis.report.register_section).

Registered by the analysis side (report.html's owner) with `register_section(nccl_log_section)`; this module
imports nothing of nsyskit.analysis at import time, so that registration cannot form an import cycle.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from nsyskit.errors import NcclLogError
from nsyskit.nccllog.inputs import logs_in_folder
from nsyskit.nccllog.render import render_html
from nsyskit.nccllog.report import analyze

TITLE = "NCCL log analysis (NCCL_DEBUG=INFO)"


def run_logs(analysis, run_folder: Path) -> list[Path]:
    """The log files of the run: those in the report's folder and in the folders of the analyzed reports."""
    folders = {Path(run_folder)} | {Path(source).parent for source in getattr(analysis, "sources", {}).values()}
    found: dict[Path, None] = {}
    for folder in sorted(folders):
        if folder.is_dir():
            found.update(dict.fromkeys(logs_in_folder(folder)))
    return list(found)


def nccl_log_section(analysis, run_folder: Path):
    """report.html's NCCL log section, or None when the run's logs hold no NCCL INFO line (CPU runs, NCCL_DEBUG off)."""
    from nsyskit.analysis.report import Section  # here, not at import: report.py registers this provider

    logs = run_logs(analysis, run_folder)
    if not logs:
        return None
    report = analyze(logs)
    if report.lines["nccl_info"] == 0:
        return None
    return Section(TITLE, render_html(report, heading=False))


def with_section(page: str, fragment: str) -> str:
    """report.html's text with the NCCL log section put in (replacing an earlier one, so reruns do not pile up),
    placed where report.html's section hook puts it: a titled block before </body>."""
    block = f"<h2>{TITLE}</h2>{fragment}"
    start = page.find(f"<h2>{TITLE}</h2>")
    if start >= 0:
        end = page.find("</section>", start)
        if end >= 0:
            return page[:start] + block + page[end + len("</section>") :]
    body_end = page.rfind("</body>")
    if body_end < 0:
        return page + "\n" + block
    return page[:body_end] + block + "\n" + page[body_end:]


def update_report_html(run_folder: Path, fragment: str) -> Path | None:
    """Put the section into the run folder's report.html when 'invoke analyze' wrote one; its path, or None.
    The page is replaced whole (written beside it, then renamed), so a failed write leaves it as it was."""
    path = Path(run_folder) / "report.html"
    if not path.is_file():
        return None
    try:
        page = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise NcclLogError(
            "report.html", str(path), "is not UTF-8 text, so the NCCL section was not added (the file is unchanged)",
            f"write it again with 'invoke analyze {run_folder}', then rerun nccl-log",
        ) from None  # fmt: skip
    except OSError as exc:
        raise NcclLogError(
            "report.html", str(path), f"cannot be read ({exc.strerror or exc})", "make it readable"
        ) from None
    staged = path.with_name(f".{path.name}.nccl-log.tmp")
    try:
        staged.write_text(with_section(page, fragment), encoding="utf-8")
        staged.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            staged.unlink(missing_ok=True)
        raise NcclLogError(
            "report.html", str(path), f"could not be updated ({exc.strerror or exc}); it is unchanged",
            "make the run folder writable, then rerun nccl-log",
        ) from None  # fmt: skip
    return path
