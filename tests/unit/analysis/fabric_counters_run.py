"""Test helper: the 8-rank run a new user profiles with --fabric and counters (NCCL collectives in four size
buckets, two of them slow against the fabric; long templated GEMM names; new-form GPU metrics with an all-zero
NVLink series and a constant clock; EFA rates of GB/s), and the nccl-tests output measured on its fabric."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from counter_fixtures import EFA_FIELDS, Counters, add_counters
from nsys_fixtures import Kernel, Range, write_export
from test_fabric import nccl_tests_output
from test_ncclbandwidth import export_of

STEPS = 4
GEMM = ("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nn_align8>"
        "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nn_align8::Params)")  # fmt: skip
SM, TENSOR = "SMs Active [Throughput %]", "Tensor Active [Throughput %]"
NVLINK, PCIE, CLOCK = "NVLink RX Responses User Data [Throughput %]", "PCIe RX Throughput [Throughput %]", "GPC Clock Frequency [MHz]"  # fmt: skip


def step_ops(rank: int) -> list[tuple[str, int, int]]:
    """One step's collectives: small AllReduces far under the fabric, big ones near it, AllGathers in between."""
    slow = 1.0 + 0.05 * rank  # rank 7 a little slower than rank 0
    return ([("AllReduce", 512 << 10, int(240_000 * slow))] * 2 + [("AllReduce", 4 << 20, int(520_000 * slow))]
            + [("AllReduce", 64 << 20, int(2_300_000 * slow))] * 3 + [("AllGather", 1 << 20, int(90_000 * slow))] * 2)  # fmt: skip


def write_run(folder: Path, ranks: int = 8) -> tuple[Path, Path]:
    """(the run folder, the nccl-tests output measured on its fabric)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(40)
    for rank in range(ranks):
        export = export_of(step_ops(rank) * STEPS)
        end = max(kernel.end for kernel in export.kernels) + 1
        width = end // STEPS
        export.ranges += [Range(step * width, (step + 1) * width, f"step {step}") for step in range(STEPS)]
        export.kernels += [Kernel(t, t + width // 3, GEMM, stream=13) for t in range(0, end - width // 3, width // 2)]
        path = write_export(folder / f"run_rank_{rank}.sqlite", export)
        times = list(range(0, end + 1, end // 40))
        gpu = {
            SM: {0: [(t, int(rng.integers(40, 95))) for t in times]},
            TENSOR: {0: [(t, int(rng.integers(5, 60))) for t in times]},
            NVLINK: {0: [(t, 0) for t in times]},  # no NVLink traffic: an all-zero series
            PCIE: {0: [(t, 3) for t in times]},  # constant over the window
            CLOCK: {0: [(t, 1410) for t in times]},
        }
        efa = {0: [(t, {name: float(rng.uniform(2.5e9, 12.1e9)) for name in EFA_FIELDS}) for t in times]}
        add_counters(path, Counters(gpu=gpu, efa=efa))
    return folder, nccl_tests_output(folder.parent / "all_reduce_perf.out")
