"""Local runs in Docker: the profiled example in 1..N containers (run), and the long-running container (dev)."""

from nsyskit.local.run import RunResult, run_local

__all__ = ["RunResult", "run_local"]
