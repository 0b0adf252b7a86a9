"""tensor_cores_unused: matrix math told apart by kernel name, judged on the run's kernel table; on the real
exports it stays silent where tensor cores do the math (the A100 series runs TF32 and then fp16 tensor-core
kernels, as its authors found) and fires where fp32 convolutions run on the SIMT cores (the RTX 2070 profile)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from real_exports import decompress
from test_findings import MS, steps_table, view

from nsyskit.analysis.compute.kernelclass import classify
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.judge import gpuwork
from nsyskit.analysis.judge.summary import summarize
from nsyskit.analysis.trace import analyze_run

# Names as real exports write them (A100, H100, RTX 2070 profiles in ../shared/real-data and cuBLAS/cuDNN/CUTLASS's).
TENSOR_CORE = [
    "void cutlass_cudnn::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_256x64_16x4_nhwc_unity_stride>(T1::Params)",
    "void xmma_cudnn::gemm::kernel<xmma_cudnn::implicit_gemm::wgrad_indexed::Kernel_traits<xmma_cudnn::Ampere_hmma_tf32_traits<unsigned int, float>>>",
    "sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x16x32_stage1",
    "ampere_fp16_s16816gemm_fp16_128x64_ldg8_relu_f2f_stages_64x4_tn",
    "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN",
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, (bool)0, (bool)0, cutlass::bfloat16_t>>",
    "volta_h884gemm_64x64_ldg8_nn",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel",
]
SIMT = [
    "ampere_sgemm_64x32_sliced1x4_nt",
    "ampere_scudnn_128x32_relu_small_nn_v1",
    "void cudnn::detail::implicit_convolve_sgemm<float, float, (int)128, (int)5, (int)5>(int, int, int, float const *)",
    "volta_sgemm_128x64_nn",
    "void cutlass::Kernel<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(T1::Params)",
]
OTHER = [
    "void at::native::vectorized_elementwise_kernel<(int)4, at::native::BinaryFunctor<float, float, float>>",
    "void gemv2T_kernel_val<int, int, float, float, float, (int)128, (int)16>(cublasGemvParams<float>)",
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, (bool)0>(cudnn::ops::nchw2nhwc_params_t<float>)",
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, (int)512, (bool)1, (int)1>(cudnnTensorStruct)",
]


def test_kernels_are_told_apart_by_name():
    matrix, tensor = classify(TENSOR_CORE + SIMT + OTHER)
    n, s = len(TENSOR_CORE), len(SIMT)
    assert matrix[: n + s].all() and not matrix[n + s :].any()
    assert tensor[:n].all() and not tensor[n:].any()


def kernel_table(rows: list[tuple[str, int]]) -> Table:
    return Table({"name": np.asarray([r[0] for r in rows], dtype=object),
                  "total_ns": np.asarray([r[1] for r in rows], dtype=np.int64)})  # fmt: skip


def test_the_rule_fires_on_the_simt_share_and_estimates_what_tensor_cores_give_back():
    steps = steps_table({0: [100 * MS] * 5, 1: [100 * MS] * 5})
    made = dataclasses.replace(view(steps), top_kernels=kernel_table(
        [(SIMT[0], 30 * MS), (SIMT[2], 10 * MS), (TENSOR_CORE[0], 20 * MS), (OTHER[0], 40 * MS)]))  # fmt: skip
    finding = gpuwork.tensor_cores_unused(made)
    assert finding is not None and finding.value == pytest.approx(40.0)
    assert "ampere_sgemm_64x32_sliced1x4_nt (30.0 ms)" in finding.title  # the worst kernels, named
    steps_in_window = len(made.steps)
    assert finding.at_stake_ns == pytest.approx(40 * MS / steps_in_window * 0.75)
    assert finding.evidence["tensor_core_matrix_pct"] == pytest.approx(100 * 20 / 60)
    healthy = dataclasses.replace(made, top_kernels=kernel_table([(SIMT[0], 9 * MS), (TENSOR_CORE[0], 91 * MS)]))
    assert gpuwork.tensor_cores_unused(healthy) is None  # 9%: under the threshold


@pytest.mark.parametrize(("name", "fires"), [
    ("aiprofiler_a100_baseline.sqlite", False),  # TF32 tensor cores already (the authors: "already use the Tensor Cores")
    ("aiprofiler_a100_secondOptimization.sqlite", False),
    ("aiprofiler_a100_thirdOptimization.sqlite", False),  # AMP: fp16 tensor cores
    ("nsysai_mfu_2gpu_before.sqlite", False),  # bf16 nvjet and FlashAttention on H100
    ("dlprof_rtx2070_nsys_profile.sqlite", True),  # fp32 convolutions on Turing's SIMT cores
])  # fmt: skip
def test_on_real_exports(name, fires, real_exports_dir, tmp_path):
    path = decompress(name, real_exports_dir)
    found = [f for f in summarize(analyze_run([path]), tmp_path).findings if f.rule == "tensor_cores_unused"]
    assert bool(found) == fires
