"""NCCL debug-log analysis ('invoke nccl-log'): per-op sizes, histograms, aggregates, step timing, init facts.

Stages, in the order data flows: scan (files, blocks, line layouts, the scanner in Python and C) -> tables
(aggregates) -> render (terminal, HTML).
"""

from importlib import import_module

# The public names by module, imported when first used: 'invoke analyze' needs only .inputs (finding a run's logs)
# and should not pay for the scanner's start-up when a run has no NCCL log.
_WHERE = {
    "NcclLogAnalysis": "tables.analysis", "analyze": "tables.analysis", "parse_range": "scan.inputs",
    "resolve_jobs": "scan.inputs", "resolve_logs": "scan.inputs", "Window": "scan.scan",
    "check_html_target": "render.outputs", "no_nccl_line": "render.outputs", "write_outputs": "render.outputs",
    "print_analysis": "render.render",
}  # fmt: skip

__all__ = list(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"nsyskit.nccllog.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'nsyskit.nccllog' has no attribute {name!r}")
