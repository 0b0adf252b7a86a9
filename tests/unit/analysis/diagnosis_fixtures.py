"""Test helper: 2-rank training runs written as nsys exports, healthy or with one cause of GPU idle planted on a rank.

Each rank runs STEPS steps ('step N' NVTX ranges): the host launches COMPUTE_KERNELS compute kernels ahead of the
GPU (a cudaLaunchKernel row per kernel, same correlationId), then an NCCL all-reduce (an `ncclAllReduce` range with
its size and an NCCL kernel on its own stream, half of it beside the last compute kernels); the GPU stays busy but
for a few microseconds between steps. A cause
(CAUSES) changes the planted rank's steps the way that cause does in a real trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nsys_fixtures import ApiCall, Export, Kernel, Launch, Range, write_export

US, MS = 1_000, 1_000_000
STEPS = 10
COMPUTE_KERNELS = 40
KERNEL_NS = 400 * US
NCCL_NS = 1 * MS
NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
LOADER = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
CAUSES = ("sync", "launch", "alloc", "module", "gap", "loader")


@dataclass
class _Rank:
    """A rank's records as its steps are written, with the host's clock and the GPU's."""

    kernels: list[Kernel] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    ranges: list[Range] = field(default_factory=list)
    calls: list[ApiCall] = field(default_factory=list)
    os_calls: list[ApiCall] = field(default_factory=list)
    host: int = 1 * MS
    gpu: int = 1 * MS

    def call(self, name: str, spent: int) -> None:
        """A host call of `spent` ns now."""
        self.calls.append(ApiCall(self.host, self.host + spent, name))
        self.host += spent

    def launch(self, name: str, spent: int, call_ns: int = 4 * US, stream: int = 7) -> None:
        """Launch a kernel (a cudaLaunchKernel row) that runs `spent` ns once the GPU and the launch allow it."""
        correlation = len(self.launches) + 1
        self.launches.append(Launch(self.host, self.host + call_ns, correlation))
        self.host += call_ns
        start = max(self.gpu, self.host + 2 * US)
        self.kernels.append(Kernel(start, start + spent, name, stream=stream, correlation=correlation))
        self.gpu = start + spent

    def launch_beside(self, name: str, spent: int, overlap: int, stream: int) -> None:
        """Launch a kernel on another stream that starts `overlap` ns before the GPU's queue ends (DDP's all-reduce
        of the first gradient buckets runs beside the last backward kernels)."""
        correlation = len(self.launches) + 1
        self.launches.append(Launch(self.host, self.host + 4 * US, correlation))
        self.host += 4 * US
        start = max(self.gpu - overlap, self.host + 2 * US)
        self.kernels.append(Kernel(start, start + spent, name, stream=stream, correlation=correlation))
        self.gpu = max(self.gpu, start + spent)

    def drain(self, name: str) -> None:
        """A host call that blocks until the GPU is done (a sync)."""
        self.call(name, max(self.gpu - self.host, 0) + 5 * US)


def _step(rank: _Rank, step: int, cause: str | None, variant: int) -> None:
    """One training step of the rank, the cause planted when given."""
    if cause == "loader":  # the loop waits for its batch before the step: the GPU has nothing queued
        start = rank.host = max(rank.host, rank.gpu)
        rank.host += 6 * MS
        if variant < 2:  # PyTorch's range, a user's; none (variant 2): the OS waits alone tell
            rank.ranges.append(Range(start, rank.host, (LOADER, "load_batch")[variant]))
        if variant:  # the training thread blocks in the OS meanwhile, as a worker-fed loop does
            rank.os_calls.append(ApiCall(start, rank.host, "pthread_cond_wait"))
    if cause == "alloc" and variant:  # between the steps (before the step's range opens), an async allocator
        rank.call("cudaMallocAsync_v11020", 1 * MS)
        rank.call("cudaFreeAsync_v11020", 300 * US)
    begin = rank.host
    if cause == "alloc" and not variant:
        rank.call("cudaMalloc_v3020", 1 * MS)
        rank.call("cudaFree_v3020", 300 * US)
    if cause == "module" and step in (3, 5, 7):
        rank.call(("cuModuleLoadData", "cuLibraryLoadData")[variant % 2], 5 * MS)
    if cause == "gap" and step == 5:
        rank.host += 600 * MS  # host work no API call shows (a checkpoint written by Python)
    if cause == "launch":  # microsecond kernels, each waiting for its slow launch
        for index in range(600):
            rank.launch(f"elementwise_kernel<{index % 7}>", 4 * US, call_ns=15 * US)
        for _ in range(2):  # the last gradients' GEMMs, which the all-reduce overlaps as in a healthy step
            rank.launch("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", KERNEL_NS)
    else:
        for index in range(COMPUTE_KERNELS):
            rank.launch("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", KERNEL_NS)
            if cause == "sync" and index == COMPUTE_KERNELS // 2:  # .item() mid-step, then host work
                rank.drain(("cudaStreamSynchronize_v3020", "cudaMemcpy_v3020")[variant % 2])
                rank.host += 3 * MS
    rank.ranges.append(Range(rank.host, rank.host + 20 * US, "ncclAllReduce", payload=(64 << 20) + step))
    rank.launch_beside(NCCL_KERNEL, NCCL_NS, overlap=NCCL_NS // 2, stream=20)
    end = max(rank.gpu, rank.host) + 5 * US
    rank.ranges.append(Range(begin, end, f"step {step}"))
    rank.host = end


def training_run(folder: Path, cause: str | None = None, planted: tuple[int, ...] = (1,), variant: int = 0,
                 ranks: int = 2) -> Path:  # fmt: skip
    """A run folder of `ranks` exports (rank_N.sqlite); `cause` (one of CAUSES) planted on the `planted` ranks.
    `variant` picks another form of the same cause (0, 1: another API call, a user's range; 2: OS waits alone)."""
    assert cause is None or cause in CAUSES, cause
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(ranks):
        rank = _Rank()
        for step in range(STEPS):
            _step(rank, step, cause if number in planted else None, variant)
        write_export(
            folder / f"rank_{number}.sqlite",
            Export(kernels=rank.kernels, launches=rank.launches, ranges=rank.ranges, api_calls=rank.calls,
                   os_calls=rank.os_calls, hostname=f"node-{number}"),
        )  # fmt: skip
    return folder
