"""The NCCL log section of 'invoke analyze''s report.html (the hook nsyskit.analysis.report.register_section).

Registered by the analysis side (report.html's owner) with `register_section(nccl_log_section)`; this module
imports nothing of nsyskit.analysis at import time, so that registration cannot form an import cycle.
"""

from __future__ import annotations

from pathlib import Path

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
