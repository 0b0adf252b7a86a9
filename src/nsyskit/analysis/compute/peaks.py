"""Dense peak throughput per GPU model and data type (TFLOP/s), matched against the GPU name an export gives.

The low_mfu rule divides a run's achieved FLOP/s by these. Each row names the vendor's datasheet it comes from.
Figures are DENSE: NVIDIA's datasheets print tensor-core figures 'with sparsity' (2:4 structured sparsity, twice
the dense rate) for Ampere and later; those are halved here. fp32 is the non-tensor (CUDA-core) rate on NVIDIA
GPUs (an fp32 GEMM that uses tensor cores runs as tf32) and the matrix-core rate on AMD GPUs. A dtype a GPU has no
hardware path for (bf16 on a V100) has no entry: MFU is then not computed, and the rule says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp8")
DEFAULT_DTYPE = "bf16"


@dataclass(frozen=True)
class GpuPeak:
    """One GPU model: the name pattern that finds it in an export's GPU name, its dense peaks by dtype, the source."""

    model: str
    pattern: str  # a regular expression searched in the lowercased GPU name
    tflops: dict[str, float]
    source: str

    def peak(self, dtype: str) -> float | None:
        """The dense peak for `dtype` in TFLOP/s, None when the GPU has none for it."""
        return self.tflops.get(dtype)


def _row(model: str, pattern: str, source: str, **tflops: float) -> GpuPeak:
    return GpuPeak(model, pattern, tflops, source)


# More specific patterns first (an 'H100 PCIe' must not match the SXM row, 'L40S' not 'L4').
# fmt: off
PEAKS: tuple[GpuPeak, ...] = (
    # NVIDIA Tesla V100 datasheet: SXM2 125 TFLOPS tensor (fp16), 15.7 fp32; PCIe 112 and 14 (Volta has no sparsity)
    _row("V100 SXM2", r"v100.*sxm", "NVIDIA Tesla V100 datasheet (SXM2)", fp16=125.0, fp32=15.7),
    _row("V100 PCIe", r"v100.*pcie", "NVIDIA Tesla V100 datasheet (PCIe)", fp16=112.0, fp32=14.0),
    # NVIDIA T4 datasheet: 65 TFLOPS mixed precision (fp16 tensor), 8.1 fp32 (Turing has no sparsity)
    _row("T4", r"\bt4\b", "NVIDIA T4 datasheet", fp16=65.0, fp32=8.1),
    # A10G: an AWS-only part (EC2 G5) without an NVIDIA datasheet; AWS's figures: 70 TFLOPS bf16/fp16 tensor and
    # 35 tf32 dense (140 / 70 with sparsity), fp32 as the A10 datasheet's 31.2
    _row("A10G", r"\ba10g\b", "AWS EC2 G5 (A10G) figures, fp32 from the NVIDIA A10 datasheet",
         bf16=70.0, fp16=70.0, tf32=35.0, fp32=31.2),
    # NVIDIA A100 datasheet: 312 bf16/fp16, 156 tf32 (624 / 312 with sparsity), 19.5 fp32; 40 and 80 GB alike
    _row("A100 PCIe", r"a100.*pcie", "NVIDIA A100 datasheet (PCIe, 40/80 GB)", bf16=312.0, fp16=312.0, tf32=156.0,
         fp32=19.5),
    _row("A100 SXM", r"a100.*sxm", "NVIDIA A100 datasheet (SXM4, 40/80 GB)", bf16=312.0, fp16=312.0, tf32=156.0,
         fp32=19.5),
    # NVIDIA L40S datasheet: 733 bf16/fp16, 1,466 fp8, 366 tf32 with sparsity; 91.6 fp32
    _row("L40S", r"\bl40s\b", "NVIDIA L40S datasheet", bf16=362.05, fp16=362.05, fp8=733.0, tf32=183.0, fp32=91.6),
    # NVIDIA L4 datasheet: 242 bf16/fp16, 485 fp8, 120 tf32 with sparsity; 30.3 fp32
    _row("L4", r"\bl4\b", "NVIDIA L4 datasheet", bf16=121.0, fp16=121.0, fp8=242.5, tf32=60.0, fp32=30.3),
    # NVIDIA H100 datasheet, PCIe: 1,513 bf16/fp16, 3,026 fp8, 756 tf32 with sparsity; 51 fp32
    _row("H100 PCIe", r"h100.*pcie", "NVIDIA H100 datasheet (PCIe)", bf16=756.5, fp16=756.5, fp8=1513.0, tf32=378.0,
         fp32=51.0),
    # NVIDIA H100 datasheet, SXM (the export names it 'H100 80GB HBM3'): 1,979 bf16/fp16, 3,958 fp8, 989 tf32 with
    # sparsity; 67 fp32
    _row("H100 SXM", r"h100.*(sxm|hbm3)", "NVIDIA H100 datasheet (SXM)", bf16=989.4, fp16=989.4, fp8=1978.9,
         tf32=494.7, fp32=67.0),
    # NVIDIA H200 datasheet, SXM: the H100 SXM's compute (1,979 / 3,958 / 989 with sparsity; 67 fp32); not H200 NVL
    _row("H200 SXM", r"\bh200\b(?!.*nvl)", "NVIDIA H200 datasheet (SXM)", bf16=989.4, fp16=989.4, fp8=1978.9,
         tf32=494.7, fp32=67.0),
    # NVIDIA GB200 NVL72 datasheet, per GPU (the rack's figures / 72): 5 PF bf16/fp16, 10 PF fp8, 2.5 PF tf32 with
    # sparsity; 80 TF fp32
    _row("GB200", r"\bgb200\b", "NVIDIA GB200 NVL72 datasheet (per GPU)", bf16=2500.0, fp16=2500.0, fp8=5000.0,
         tf32=1250.0, fp32=80.0),
    # NVIDIA HGX B200 datasheet, per GPU (the 8-GPU board's figures / 8): 4.5 PF bf16/fp16, 9 PF fp8, 2.25 PF tf32
    # with sparsity; 75 TF fp32
    _row("B200", r"\bb200\b", "NVIDIA HGX B200 datasheet (per GPU)", bf16=2250.0, fp16=2250.0, fp8=4500.0,
         tf32=1125.0, fp32=75.0),
    # AMD Instinct MI250X datasheet: 383 bf16/fp16, 95.7 fp32 matrix (CDNA 2: no sparsity, no tf32, no fp8)
    _row("MI250X", r"mi250x", "AMD Instinct MI250X datasheet", bf16=383.0, fp16=383.0, fp32=95.7),
    # AMD Instinct MI300X datasheet: 1,307.4 bf16/fp16, 2,614.9 fp8, 653.7 tf32 dense; 163.4 fp32 matrix
    _row("MI300X", r"mi300x", "AMD Instinct MI300X datasheet", bf16=1307.4, fp16=1307.4, fp8=2614.9, tf32=653.7,
         fp32=163.4),
)
# fmt: on


def find_gpu(name: str) -> GpuPeak | None:
    """The table's row for a GPU name as exports give it ('NVIDIA H100 80GB HBM3', 'Tesla V100-SXM2-16GB'), or None."""
    text = name.lower()
    return next((row for row in PEAKS if re.search(row.pattern, text)), None)
