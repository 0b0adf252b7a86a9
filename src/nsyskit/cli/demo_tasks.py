"""The task that shows the whole kit on this machine: setup, build, a profiled run, its analysis."""

from __future__ import annotations

from nsyskit import console
from nsyskit.cli import load, project_root, task

DEMO_PROFILE = "local-cpu"


@task(
    help={
        "profile": f"Profile overlay (default: {DEMO_PROFILE}, the CPU-only offline profile).",
        "progress": "Live progress (default: yes; --no-progress prints only the results).",
    }
)
def demo(c, profile=DEMO_PROFILE, progress=True):
    """Setup, build the image, run the example under nsys on 2 CPU ranks, analyze; prints the summary and report path."""
    from nsyskit.analysis import compose, print_report, summarize
    from nsyskit.demo import run_demo

    result = run_demo(load(c, profile), project_root(c), show_progress=progress)
    folder = result.report.parent
    print_report(compose(result.analysis, summarize(result.analysis, folder), folder), console.out)
    for line in result.run.summary_lines():
        console.out.print(line)
    console.out.print(f"report: {result.report}")
