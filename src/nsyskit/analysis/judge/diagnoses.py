"""The host-side diagnoses: why the GPUs idle (a sync that drains the queue, launch overhead, the allocator, module
loads, long gaps, data loading), one finding per rule naming every rank it holds on, from each rank's evidence rows
(compute/diagnoses.py measures them in the map). Thresholds are module constants, quoted by docs/analysis.md.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nsyskit.analysis.compute import diagnoses as measure
from nsyskit.analysis.compute import evidence, units
from nsyskit.analysis.compute.metrics import RunView
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.judge.finding import Finding, document, ranks_text

SYNC_STALL_PCT = 5.0  # GPU idle after host syncs (host working, not waiting), % of step time
LAUNCH_IDLE_PCT = measure.LAUNCH_IDLE_PCT  # GPU idle in short gaps that wait on a launch call, % of step time
LAUNCH_MEDIAN_NS = 10_000  # ... when the median kernel is shorter than this
LAUNCH_MIN_KERNELS = 200  # ... and the window holds at least this many kernels (a loop, not a few calls)
ALLOC_STEP_SHARE_PCT = 50.0  # allocator calls in at least this % of the steps
ALLOC_MIN_STEPS = 3  # ... of a window with at least this many steps (steady state can be told apart)
MODULE_MIN_NS = 100_000  # module loads / JIT inside the window: at least this much host time
GPU_GAP_NS = measure.GPU_GAP_NS  # one GPU idle gap at least this long
DATA_IDLE_PCT = 10.0  # GPU idle while the loop waits for its next batch, % of step time
# The evidence key findings.explain_idle reads: the GPU idle time per step a cause explains (findings imports this
# module, so the key is spelled here too; a test holds them equal).
IDLE_EXPLAINED = "gpu_idle_explained_ns_per_step"

SYNC_DOC = document(
    "sync_stall", "host syncs inside the steps (cuda{Stream,Device,Event}Synchronize, cu{Stream,Ctx,Event}Synchronize, "
    "synchronous cudaMemcpy/cudaMemset/cuMemcpy*): time blocked, and GPU idle after they return while the host "
    "works (the queue drained; not while it waits for data or in an OS wait)",
    f"that GPU idle >= {SYNC_STALL_PCT:g}% of step time",
    "drop the syncs inside the step: no .item()/.cpu()/print of GPU values per step (log every N steps), "
    "non_blocking copies from pinned memory, cudaStreamSynchronize only where the host needs the result",
)  # fmt: skip
LAUNCH_DOC = document(
    "launch_bound", "GPU idle in gaps under 1 ms between kernels that a launch call overlaps (the GPU waits for the "
    "host's next launch), kernels per step, their median, launch rate and GPU busy share",
    f"that idle >= {LAUNCH_IDLE_PCT:g}% of step time, median kernel < {LAUNCH_MEDIAN_NS / 1e3:g} us and >= "
    f"{LAUNCH_MIN_KERNELS} kernels in the window",
    "fewer, larger kernels: CUDA graphs (torch.cuda.graphs, torch.compile mode='reduce-overhead'), fused "
    "kernels (torch.compile, fused optimizers), a larger batch per launch",
)  # fmt: skip
ALLOC_DOC = document(
    "allocator", "cudaMalloc/cudaFree and their Async, Host, Managed and virtual-memory (cuMemMap, cuMemCreate ...) "
    "forms inside the steps: calls and host time per step, GPU idle beside them",
    f"calls in >= {ALLOC_STEP_SHARE_PCT:g}% of the steps of a window of >= {ALLOC_MIN_STEPS} steps",
    "keep allocations out of the step: let PyTorch's caching allocator reuse blocks (same shapes each step, "
    "no torch.cuda.empty_cache() in the loop, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), preallocate buffers",
)  # fmt: skip
MODULE_DOC = document(
    "module_loading", "CUDA module loads and JIT compilation inside the profiled window (cuModuleLoad*, "
    "cuLibraryLoad*, cuLink*, nvrtcCompileProgram, nvJitLink*): calls, host time, steps",
    f"they take >= {MODULE_MIN_NS / 1e3:g} us inside the window",
    "load and compile before the window: warm-up steps that run every shape, CUDA_MODULE_LOADING=EAGER, "
    "cached compilations (torch.compile / Triton / nvFuser caches), then profile from a later step",
)  # fmt: skip
GAPS_DOC = document(
    "gpu_gaps", "single GPU idle gaps inside the window (as nsys analyze's GPU gaps rule) and what the host did "
    "meanwhile: waiting for data or in OS waits, syncing, allocating, loading modules, or no traced call",
    f"one gap >= {GPU_GAP_NS / 1e6:g} ms",
    "open the gap in the timeline (nsys-ui, the steps named here): checkpointing, evaluation, data loading "
    "or host-side work the GPU waits for; move it off the training loop or overlap it",
)  # fmt: skip
LOADER_DOC = document(
    "data_loading", "GPU idle while the training loop waits for its next batch: data-loader NVTX ranges (PyTorch's "
    "enumerate(DataLoader)#...__next__, ranges naming data/batch loading) and the launching thread's OS waits "
    "(poll, futex, pthread_cond_wait, sem_wait, read ...) between steps",
    f"that idle >= {DATA_IDLE_PCT:g}% of step time",
    "feed the GPU ahead: more DataLoader workers (num_workers), pin_memory=True, prefetch_factor, "
    "persistent_workers=True, lighter per-sample transforms or preprocessed data",
)  # fmt: skip


def _each(rows: Table, worst: int) -> str:
    """'step', 'iteration' or 'window': what the per-step numbers of a rank are per (compute.diagnoses' basis)."""
    basis = rows["basis"][worst] if "basis" in rows else measure.WHOLE_WINDOW
    return {measure.STEP_RANGES: "step", measure.LOADER_ITERATIONS: "iteration"}.get(int(basis), "window")


def _of_each(rows: Table, worst: int) -> str:
    """'of each step', 'of each iteration' or 'of the window'."""
    each = _each(rows, worst)
    return "of the window" if each == "window" else f"of each {each}"


def _count(value: float) -> str:
    """A count per step: '1.5' under ten, '8,008' from ten on."""
    return f"{value:.1f}" if value < 10 else f"{value:,.0f}"


def _rows(view: RunView, rule: str) -> Table:
    return evidence.pivot(view.evidence, rule)


def _total(view: RunView) -> int:
    """The run's ranks: those of its tables and of its evidence."""
    found = set(view.ranks.tolist())
    if view.evidence is not None and len(view.evidence):
        found.update(np.unique(view.evidence["rank"]).tolist())
    return len(found)


def _finding(
    view: RunView, rule: str, rows: Table, fires: np.ndarray, value: np.ndarray, threshold: float,
    stake: np.ndarray, title: Callable[[Table, int, str, float], str], advice: str, sums: tuple[str, ...],
    maxima: tuple[str, ...] = (), severity: str = "warning", explained: np.ndarray | None = None,
    threshold_text: str = "",
) -> Finding | None:  # fmt: skip
    """One finding for the ranks where `fires`: the worst rank in the title, evidence summed (`sums`) or maxed."""
    fires = fires & ~np.isnan(value)
    if not fires.any():
        return None
    mine = rows.take(fires)
    worst = int(np.nanargmax(value[fires]))
    ranks = tuple(int(r) for r in mine["rank"])
    found = {key: float(np.nansum(mine[key])) for key in sums if key in mine}
    found.update({f"max_{key}": float(np.nanmax(mine[key])) for key in maxima if key in mine})
    found["ranks"] = float(len(ranks))
    if explained is not None:  # the GPU idle per step this cause explains, on its worst rank
        found[IDLE_EXPLAINED] = float(np.nanmax(explained[fires]))
    steps = sorted({int(key.split("=", 1)[1]) for key in mine.columns if key.startswith("step=")
                    if not np.isnan(mine[key]).all()})  # fmt: skip
    where = ranks_text(ranks, _total(view))
    worst_value = float(value[fires][worst])
    return Finding(
        rule, severity, title(mine, worst, where, worst_value), worst_value, threshold, advice,
        evidence=found, ranks=ranks, steps=tuple(steps), at_stake_ns=float(np.nanmax(stake[fires])),
        threshold_text=threshold_text,
    )  # fmt: skip


def sync_stall(view: RunView) -> Finding | None:
    """Host syncs (stream/device/event syncs, synchronous copies and memsets) after which the GPU idles while the
    host works: the queue drained, the host's next work is exposed."""
    rows = _rows(view, measure.SYNC_STALL)
    if not len(rows):
        return None
    per_step = rows["idle_after_ns"] / rows["steps"]
    pct = 100.0 * per_step / rows["step_ns"]

    def title(mine: Table, worst: int, where: str, value: float) -> str:
        return (
            f"GPU idle {units.percent(value)} {_of_each(mine, worst)} after host syncs ({_count(mine['calls'][worst] / mine['steps'][worst])} sync calls blocking "
            f"{units.duration(mine['blocked_ns'][worst] / mine['steps'][worst])} per {_each(mine, worst)}) on {where}"
        )

    return _finding(
        view, measure.SYNC_STALL, rows, pct >= SYNC_STALL_PCT, pct, SYNC_STALL_PCT, per_step, title,
        SYNC_DOC.advice,
        ("calls", "blocked_ns", "idle_after_ns", "steps"), ("step_ns",), explained=per_step,
    )  # fmt: skip


def launch_bound(view: RunView) -> Finding | None:
    """Many short kernels, and the GPU idles between them waiting for the next launch."""
    rows = _rows(view, measure.LAUNCH_BOUND)
    if not len(rows):
        return None
    per_step = rows["starved_ns"] / rows["steps"]
    pct = 100.0 * per_step / rows["step_ns"]
    fires = (
        (pct >= LAUNCH_IDLE_PCT)
        & (rows["median_kernel_ns"] < LAUNCH_MEDIAN_NS)
        & (rows["kernels"] >= LAUNCH_MIN_KERNELS)
    )

    def title(mine: Table, worst: int, where: str, value: float) -> str:
        window_s = mine["step_ns"][worst] * mine["steps"][worst] / 1e9
        return (f"launch-bound: GPU waits on kernel launches {units.percent(value)} {_of_each(mine, worst)}; "
                f"{mine['kernels'][worst] / mine['steps'][worst]:,.0f} kernels per {_each(mine, worst)}, median "
                f"{units.duration(mine['median_kernel_ns'][worst])}, {mine['launches'][worst] / window_s:,.0f} "
                f"launches/s, GPU busy {units.percent(float(100 * mine['busy_ns'][worst] / (mine['step_ns'][worst] * mine['steps'][worst])))} "
                f"on {where}")  # fmt: skip

    return _finding(
        view, measure.LAUNCH_BOUND, rows, fires, pct, LAUNCH_IDLE_PCT, per_step, title,
        LAUNCH_DOC.advice,
        ("kernels", "launches", "starved_ns", "steps"), ("median_kernel_ns",), explained=per_step,
    )  # fmt: skip


def allocator(view: RunView) -> Finding | None:
    """cudaMalloc/cudaFree (and their async and virtual-memory forms) in most steady-state steps."""
    rows = _rows(view, measure.ALLOCATOR)
    if not len(rows):
        return None
    share = 100.0 * rows["steps_with_calls"] / rows["steps"]
    fires = (rows["steps"] >= ALLOC_MIN_STEPS) & (share >= ALLOC_STEP_SHARE_PCT) & (rows["calls"] > 0)
    per_step = np.maximum(rows["cpu_ns"], rows["idle_beside_ns"]) / rows["steps"]

    def title(mine: Table, worst: int, where: str, value: float) -> str:
        steps = mine["steps"][worst]
        return (f"allocator calls in {units.percent(value)} of the steps: "
                f"{mine['calls'][worst] / steps:.1f} calls, {units.duration(mine['cpu_ns'][worst] / steps)} of host "
                f"time and {units.duration(mine['idle_beside_ns'][worst] / steps)} of GPU idle beside them per {_each(mine, worst)} "
                f"on {where}")  # fmt: skip

    return _finding(
        view, measure.ALLOCATOR, rows, fires, share, ALLOC_STEP_SHARE_PCT, per_step, title,
        ALLOC_DOC.advice,
        ("calls", "cpu_ns", "idle_beside_ns", "steps_with_calls", "steps"),
        explained=rows["idle_beside_ns"] / rows["steps"],
    )  # fmt: skip


def module_loading(view: RunView) -> Finding | None:
    """CUDA modules loaded or kernels JIT-compiled inside the profiled window (lazy loading, NVRTC, nvFuser, Triton)."""
    rows = _rows(view, measure.MODULE_LOADING)
    if not len(rows):
        return None
    fires = rows["load_ns"] >= MODULE_MIN_NS

    def title(mine: Table, worst: int, where: str, value: float) -> str:
        return (
            f"{int(mine['calls'][worst]):,} module loads/JIT compilations inside the window take "
            f"{units.duration(mine['load_ns'][worst])} ({units.percent(100 * value / (mine['step_ns'][worst] * mine['steps'][worst]))} of it) on {where}"
        )

    return _finding(
        view, measure.MODULE_LOADING, rows, fires, rows["load_ns"], MODULE_MIN_NS, rows["load_ns"] / rows["steps"], title,
        MODULE_DOC.advice,
        ("calls", "load_ns"), threshold_text=f"{MODULE_MIN_NS / 1e3:g} us",
    )  # fmt: skip


def gpu_gaps(view: RunView) -> Finding | None:
    """Single GPU idle gaps of GPU_GAP_NS or more inside the window, with what the host did meanwhile."""
    rows = _rows(view, measure.GPU_GAPS)
    if not len(rows):
        return None
    fires = rows["gaps"] > 0
    doing = ("host_waiting_ns", "host_sync_ns", "host_alloc_ns", "host_module_ns")

    def title(mine: Table, worst: int, where: str, value: float) -> str:
        spent = {key: float(mine[key][worst]) for key in doing if key in mine}
        main = max(spent, key=spent.get)
        share = 100.0 * spent[main] / mine["total_ns"][worst] if mine["total_ns"][worst] else 0.0
        host = {"host_waiting_ns": "waiting for data (data loader, OS waits)", "host_sync_ns": "in sync calls",
                "host_alloc_ns": "in the allocator", "host_module_ns": "loading modules"}[main] if share >= 10 else "in no traced call (Python, I/O, collectives)"  # fmt: skip
        return (
            f"{int(mine['gaps'][worst])} GPU idle gaps of {units.duration(GPU_GAP_NS)} or more "
            f"({units.duration(mine['total_ns'][worst])} in all, longest {units.duration(mine['longest_ns'][worst])}) "
            f"on {where}; the host was {host}" + (f" {units.percent(share)} of it" if share >= 10 else "")
        )

    return _finding(
        view, measure.GPU_GAPS, rows, fires, rows["longest_ns"], float(GPU_GAP_NS), rows["total_ns"] / rows["steps"],
        title, GAPS_DOC.advice,
        ("gaps", "total_ns", *doing), ("longest_ns",), threshold_text=f"{GPU_GAP_NS / 1e6:g} ms",
    )  # fmt: skip


def data_loading(view: RunView) -> Finding | None:
    """The GPU idles while the loop waits for its next batch (data loader ranges, OS waits between steps)."""
    rows = _rows(view, measure.DATA_LOADING)
    if not len(rows):
        return None
    per_step = rows["idle_ns"] / rows["steps"]
    pct = 100.0 * per_step / rows["step_ns"]

    def title(mine: Table, worst: int, where: str, value: float) -> str:
        steps = mine["steps"][worst]
        how = "data loader ranges" if mine["loader_ranges_ns"][worst] > 0 else "OS waits of the training thread"
        return (
            f"GPU idle {units.percent(value)} {_of_each(mine, worst)} while the loop waits "
            f"for its next batch ({units.duration(mine['loading_ns'][worst] / steps)} per {_each(mine, worst)} in {how}) "
            f"on {where}"
        )

    return _finding(
        view, measure.DATA_LOADING, rows, pct >= DATA_IDLE_PCT, pct, DATA_IDLE_PCT, per_step, title,
        LOADER_DOC.advice,
        ("loading_ns", "loader_ranges_ns", "idle_ns", "steps"), explained=per_step,
    )  # fmt: skip


HOST_RULES = (sync_stall, launch_bound, allocator, module_loading, gpu_gaps, data_loading)
