"""The step hook: counts a PyTorch program's optimizer steps with no change to it, marks them and PROFILE_STEPS' window.

Python imports `sitecustomize` at start-up from its path; the wrapper (nsys-profile, `nsyskit wrap`) puts this folder
first on PYTHONPATH when NSYSKIT_STEP_HOOK=1, so every Python process of the rank loads it. It imports nothing heavy:
it only waits for torch.optim.optimizer to be imported (a program without torch pays one finder on sys.meta_path),
then registers torch's global optimizer-step hooks. The first process of the rank owns the count; its children
(spawned data loaders, helper scripts) only chain. The host imports this file as nsyskit.ranks.stephook.

Steps: each optimizer counts its own step() calls and the program's step is the highest count, so gradient
accumulation (one step() per N micro-batches) counts optimizer steps, and several optimizers stepping once an
iteration count one step. Marks, named as the kit's example does (workload/markers.py), as NVTX start/end ranges
(not push/pop: those would close the program's own push/pop ranges they cross): a range 'step N' from
the end of step N-1 to the end of step N (step 1 opens at the first step() call; the step after the last runs to the
program's end, outside any window), and 'profile_window' around steps
A-B of NSYSKIT_PROFILE_STEPS=A-B, with cudaProfilerStart/Stop there when NSYSKIT_CAPTURE=cudaProfilerApi (GPU runs).
At exit it writes what it saw to NSYSKIT_STEP_HOOK_STATUS (JSON: steps, window, opened, closed) for the wrapper.
Any existing sitecustomize further on the path runs after this one. Standard library only, Python 3.8+.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import weakref

HOOK_DIR = os.path.dirname(os.path.realpath(__file__))  # the host imports it through a link
MARKERS = os.path.join(HOOK_DIR, "..", "workload", "markers.py")  # the example's NVTX names and backend
WATCHED = "torch.optim.optimizer"  # the module whose import installs the hooks
OWNER = "NSYSKIT_STEP_HOOK_PID"  # set by the first process of the rank; its children see it and only chain


def window_of(text: str) -> tuple[int, int] | None:
    """(A, B) of 'A-B' (NSYSKIT_PROFILE_STEPS), None when empty or not a range."""
    first, dash, last = (text or "").strip().partition("-")
    if not dash or not first.strip().isdigit() or not last.strip().isdigit():
        return None
    window = int(first), int(last)
    return window if 1 <= window[0] <= window[1] else None


class StepCounter:
    """The program's optimizer steps, their NVTX marks and the profiling window (pure but for the callables given)."""

    def __init__(self, window, open_range, close_range, start=None, stop=None) -> None:
        self.window = window  # (A, B) or None
        # Open (name -> handle) / close (handle) an NVTX start/end range: never push/pop, whose thread stack the
        # program's own ranges share (a 'step N' pushed inside the program's range would be closed by its pop).
        self.open_range, self.close_range = open_range, close_range
        self.start, self.stop = start, stop  # cudaProfilerStart / Stop (None on CPU)
        self.counts = weakref.WeakKeyDictionary()  # optimizer -> its step() calls
        self.step = 0  # steps completed
        self.opened = self.closed = False  # the window
        self.step_range = self.window_range = None  # the handles of the open 'step N' and 'profile_window'

    def before_step(self, optimizer, _args=None, _kwargs=None) -> None:
        """Torch's global pre-hook: the first step() of the program opens 'step 1' (and a window starting at 1)."""
        if self.step == 0 and not self.counts:
            self._begin(1)
        self.counts.setdefault(optimizer, 0)

    def after_step(self, optimizer, _args=None, _kwargs=None) -> None:
        """Torch's global post-hook: a new highest count ends step N and begins step N+1."""
        count = self.counts.get(optimizer, 0) + 1
        self.counts[optimizer] = count
        if count <= self.step:  # another optimizer of the same iteration
            return
        self.step = count
        self.close_range(self.step_range)  # 'step N'
        if self.window and self.opened and not self.closed and count == self.window[1]:
            if self.stop:
                self.stop()
            self.close_range(self.window_range)  # 'profile_window'
            self.closed = True
        self._begin(count + 1)

    def _begin(self, step: int) -> None:
        """Open the window when STEP is its first, then 'step STEP'."""
        if self.window and not self.opened and step == self.window[0]:
            self.window_range = self.open_range("profile_window")
            if self.start:
                self.start()
            self.opened = True
        self.step_range = self.open_range(f"step {step}")

    def status(self) -> dict:
        """What the wrapper records: steps seen, the window asked for, and whether it opened and closed."""
        return {"steps": self.step, "window": list(self.window) if self.window else None,
                "opened": self.opened, "closed": self.closed}  # fmt: skip


def _load_markers():
    """The example's markers module (its NVTX backend: torch's, else libnvToolsExt, else none), by path."""
    spec = importlib.util.spec_from_file_location("_nsyskit_markers", os.path.normpath(MARKERS))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cuda_capture(env: dict):
    """(start, stop) of nsys' cudaProfilerApi capture range on GPU runs, else (None, None)."""
    if env.get("NSYSKIT_CAPTURE") != "cudaProfilerApi":
        return None, None
    import torch

    if not torch.cuda.is_available():
        return None, None

    def start():
        torch.cuda.synchronize()
        torch.cuda.profiler.start()

    def stop():
        torch.cuda.synchronize()  # the window's kernels must finish inside the capture range
        torch.cuda.profiler.stop()

    return start, stop


class LazyCounter:
    """Resolves the NVTX backend and the CUDA capture at the first step() (torch is fully imported by then)."""

    def __init__(self, env: dict) -> None:
        self.env, self.counter = env, None

    def _get(self) -> StepCounter:
        if self.counter is None:
            markers = _load_markers()
            start, stop = _cuda_capture(self.env)
            self.counter = StepCounter(window_of(self.env.get("NSYSKIT_PROFILE_STEPS", "")), markers.start,
                                       markers.end, start, stop)  # fmt: skip
        return self.counter

    def before_step(self, optimizer, args, kwargs) -> None:
        self._get().before_step(optimizer, args, kwargs)

    def after_step(self, optimizer, args, kwargs) -> None:
        self._get().after_step(optimizer, args, kwargs)

    def status(self) -> dict:
        window = window_of(self.env.get("NSYSKIT_PROFILE_STEPS", ""))
        empty = {"steps": 0, "window": list(window) if window else None, "opened": False, "closed": False}
        return self.counter.status() if self.counter else empty


class _Watch(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when torch.optim.optimizer is imported, wraps its loader to register the hooks after it."""

    def __init__(self, on_loaded) -> None:
        self.on_loaded = on_loaded

    def find_spec(self, fullname, path, target=None):
        if fullname != WATCHED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        sys.meta_path.remove(self)  # once: nothing more to watch
        loader, on_loaded = spec.loader, self.on_loaded

        class Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                on_loaded(module)

            def __getattr__(self, name):  # get_source, get_filename ... as the real loader answers them
                return getattr(loader, name)

        spec.loader = Loader()
        return spec


def install(env: dict) -> LazyCounter:
    """Register the step hooks when torch.optim.optimizer loads (at once when it already has); the status at exit."""
    counter = LazyCounter(env)

    def register(module) -> None:
        if hasattr(module, "register_optimizer_step_post_hook"):  # torch >= 2.0
            module.register_optimizer_step_pre_hook(counter.before_step)
            module.register_optimizer_step_post_hook(counter.after_step)

    if WATCHED in sys.modules:
        register(sys.modules[WATCHED])
    else:
        sys.meta_path.insert(0, _Watch(register))
    status_path = env.get("NSYSKIT_STEP_HOOK_STATUS", "")
    if status_path:
        atexit.register(_write_status, status_path, counter)
    return counter


def _write_status(path: str, counter: LazyCounter) -> None:
    """Write the counter's status as JSON (at exit; a folder that went away is not the program's problem)."""
    try:
        with open(path, "w") as handle:
            json.dump(counter.status(), handle)
    except OSError:
        pass


def chain() -> None:
    """Run the sitecustomize this one shadows (the next on sys.path), as Python would have without the hook."""
    here = os.path.realpath(HOOK_DIR)
    path = [entry for entry in sys.path if os.path.realpath(entry or os.getcwd()) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None or os.path.realpath(spec.origin or "") == os.path.realpath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def main(env) -> None:
    """At start-up: the first process of the rank installs the counter; every process chains."""
    if env.get("NSYSKIT_STEP_HOOK", "0") == "1" and not env.get(OWNER):
        env[OWNER] = str(os.getpid())  # os.environ: inherited by the children, which then only chain
        install(env)
    chain()


if __name__ == "sitecustomize":
    main(os.environ)
