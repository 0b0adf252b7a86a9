"""NCCL debug-log analysis ('invoke nccl-log'): per-op sizes, histograms, aggregates, step timing, init facts."""

from importlib import import_module

__all__ = ["NcclLogAnalysis", "Window", "analyze", "parse_range", "resolve_jobs", "resolve_logs"]
# The public names by module, imported when first used: 'invoke analyze' needs only .inputs (finding a run's logs)
# and should not pay for the scanner's start-up when a run has no NCCL log.
_WHERE = {
    "NcclLogAnalysis": "analysis", "analyze": "analysis", "parse_range": "inputs", "resolve_jobs": "inputs",
    "resolve_logs": "inputs", "Window": "scan",
}  # fmt: skip


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"nsyskit.nccllog.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'nsyskit.nccllog' has no attribute {name!r}")
