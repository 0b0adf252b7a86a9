"""NVTX ranges of the example (step, phase, profiling window) and the cudaProfilerStart/Stop capture window."""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator


def _backend():
    """(push, pop, start, end) of the first NVTX implementation that every nsys records, else the 'nvtx' package, else
    no-ops.

    PyTorch's own (CUDA builds, with or without a GPU); else the NVTX v2 shared library libnvToolsExt.so.1
    (Debian: libnvtoolsext1). The 'nvtx' package (NVTX v3, registered strings) comes last: nsys 2022.4
    drops its ranges. push/pop ranges sit on the calling thread's stack; start/end ranges (a handle each) on none,
    so they may cross the program's own push/pop ranges without closing one of them (the step hook's marks).
    """
    try:
        import torch

        if torch.version.cuda and hasattr(torch._C, "_nvtx"):
            nvtx = torch.cuda.nvtx
            return nvtx.range_push, nvtx.range_pop, nvtx.range_start, nvtx.range_end
    except ImportError:
        pass
    try:
        library = ctypes.CDLL(os.environ.get("NSYSKIT_NVTX_LIBRARY") or "libnvToolsExt.so.1")
        library.nvtxRangePushA.argtypes = [ctypes.c_char_p]
        library.nvtxRangeStartA.argtypes, library.nvtxRangeStartA.restype = [ctypes.c_char_p], ctypes.c_uint64
        library.nvtxRangeEnd.argtypes = [ctypes.c_uint64]
        return (
            lambda name: library.nvtxRangePushA(name.encode()), library.nvtxRangePop,
            lambda name: library.nvtxRangeStartA(name.encode()), library.nvtxRangeEnd,
        )  # fmt: skip
    except OSError:
        pass
    try:
        import nvtx

        return nvtx.push_range, nvtx.pop_range, nvtx.start_range, nvtx.end_range
    except ImportError:
        return (lambda name: None), (lambda: None), (lambda name: None), (lambda handle: None)


_push, _pop, _start, _end = _backend()

# The names the analysis looks for (keep in sync with nsyskit.analysis).
STEP_FORMAT = "step {}"
PHASES = ("data", "forward", "backward", "optimizer")
WINDOW = "profile_window"


def push(name: str) -> None:
    """Open an NVTX range on this thread."""
    _push(name)


def pop() -> None:
    """Close the innermost NVTX range on this thread."""
    _pop()


def start(name: str):
    """Open a process-wide NVTX range (not on this thread's push/pop stack); its handle closes it with end()."""
    return _start(name)


def end(handle) -> None:
    """Close the range start() opened."""
    _end(handle)


def mark(text: str) -> None:
    """An instant fact in the report: an empty NVTX range named `text` (ranges are what every nsys version keeps)."""
    _push(text)
    _pop()


@contextlib.contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    """An NVTX range around a block."""
    push(name)
    try:
        yield
    finally:
        pop()


class ProfileWindow:
    """Steps FIRST..LAST: an NVTX 'profile_window' range, and on GPU cudaProfilerStart/Stop (nsys capture range)."""

    def __init__(self, first: int | None, last: int | None, use_cuda: bool) -> None:
        self.first, self.last, self.use_cuda = first, last, use_cuda
        self.open = False

    def before_step(self, step: int) -> None:
        """Open the window when `step` is its first step."""
        if self.first is None or step != self.first:
            return
        if self.use_cuda:
            import torch

            torch.cuda.synchronize()
            torch.cuda.profiler.start()
        push(WINDOW)
        self.open = True

    def after_step(self, step: int) -> None:
        """Close the window after its last step."""
        if not self.open or step != self.last:
            return
        if self.use_cuda:
            import torch

            torch.cuda.synchronize()  # the window's kernels must finish inside the capture range
        pop()
        if self.use_cuda:
            torch.cuda.profiler.stop()
        self.open = False
