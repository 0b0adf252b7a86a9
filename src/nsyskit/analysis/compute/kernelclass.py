"""Which kernels are matrix math (GEMM, convolution) and whether they run on tensor cores, told by their names.

cuBLAS, cuDNN, CUTLASS and their JIT successors name their kernels after the instruction they use: tensor-core
kernels carry the MMA shape or family (`s16816`, `h884`, `hmma`, `wgmma`, `xmma`, `tensorop`, `nvjet`, dtype tags
such as `f16`, `bf16`, `tf32`, `e4m3`; FlashAttention's kernels are MMA kernels too), while fp32 kernels on the SIMT cores say `sgemm`, `scudnn`, `simt` or name
no MMA at all. GEMV kernels are left out: memory-bound, tensor cores would not speed them up.
"""

from __future__ import annotations

import functools
import re

import numpy as np

MATRIX = re.compile(r"gemm|conv|winograd|xmma|cutlass|wgrad|dgrad|fprop|nvjet|matmul|scudnn", re.I)
NOT_MATRIX = re.compile(r"gemv|gemvx|dot_kernel|reduce|elementwise|transpose|nchwtonhwc|nhwctonchw", re.I)
TENSOR_CORE = re.compile(
    r"xmma|hmma|wgmma|hgmma|imma|dmma|wmma|tensorop|tensor\d|_tensor|nvjet|s16816|s1688|h16816|h1688|h884|s884|i8816"
    r"|i16832|16x8x16|16x8x8|bf16|bfloat16|f16|fp16|half|tf32|e4m3|e5m2|fp8|sm90_|sm100_|sm120_|flash|fmha",
    re.I,
)
SIMT = re.compile(r"simt|sgemm|scudnn|dgemm|implicit_convolve_sgemm|convolve_sgemm", re.I)


def classify(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(is matrix math, runs on tensor cores) for each kernel name; an 'sgemm'/'simt' name is never tensor-core,
    even inside a CUTLASS template (cutlass_80_simt_sgemm)."""
    kinds = np.array([kind(n) for n in names], dtype=bool).reshape(len(names), 2)
    return kinds[:, 0].copy(), kinds[:, 0] & kinds[:, 1]


@functools.lru_cache(maxsize=1 << 14)  # two rules ask of the same run's kernels, and long templated names cost
def kind(name: str) -> tuple[bool, bool]:
    """(is matrix math, names a tensor-core instruction) of one kernel name (classify's)."""
    return bool(MATRIX.search(name)) and not NOT_MATRIX.search(name), bool(
        TENSOR_CORE.search(name)
    ) and not SIMT.search(name)
