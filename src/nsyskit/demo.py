"""The quick-start flow in one call: setup -> build -> run --local -> analyze, for 'invoke demo' and 'make demo'."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nsyskit import console, image
from nsyskit.config import Config
from nsyskit.local import RunResult, run_local
from nsyskit.setup import run_setup


@dataclass
class DemoResult:
    """What the demo produced: the run and, when the analysis library is installed, its analysis and report.html."""

    run: RunResult
    analysis: object | None
    report: Path | None


def run_demo(cfg: Config, root: Path, show_progress: bool = True) -> DemoResult:
    """Prepare the machine, build the image, run the profiled example, analyze its reports."""
    for line in run_setup(cfg).done:
        console.done(line)
    built = image.build_image(cfg, root, show_progress=show_progress)
    console.done(f"image {' '.join(built.plan.tags)} ready ({built.seconds:.0f} s)")
    result = run_local(cfg, root, show_progress=show_progress)
    console.done(f"run {result.run_id}: {len(result.files.get('reports', []))} reports in {result.run_dir}")
    from nsyskit.analysis import run_analysis  # the analysis library (matplotlib) only once there are reports

    analysis, report = run_analysis([result.run_dir])
    return DemoResult(result, analysis, report)
