"""NCCL debug-log analysis ('invoke nccl-log'): per-op sizes, histograms, aggregates, step timing, init facts."""

from nsyskit.nccllog.analysis import NcclLogAnalysis, analyze
from nsyskit.nccllog.inputs import parse_range, resolve_jobs, resolve_logs
from nsyskit.nccllog.scan import Window

__all__ = ["NcclLogAnalysis", "Window", "analyze", "parse_range", "resolve_jobs", "resolve_logs"]
