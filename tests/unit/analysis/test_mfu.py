"""low_mfu: achieved model TFLOP/s per GPU and MFU against the GPU's dense peak for the dtype, on synthetic views, on
the kit's own H100 export and through the cluster merge; the peak table's lookup of real GPU names."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from real_exports import NAMES, PACKED, decompress
from test_findings import MS, breakdown_table, steps_table, view

from nsyskit.analysis import outputs
from nsyskit.analysis.compute import peaks
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.judge import findings, mfu
from nsyskit.analysis.read.reader import ExportReader
from nsyskit.analysis.request import AnalyzeRequest
from nsyskit.clusteranalysis import AnalysisPlan, make_plan
from nsyskit.config import load_config
from nsyskit.k8s import analysis as k8s_analysis
from nsyskit.slurm import analysis as slurm_analysis

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "Container-Root" / "nsyskit" / "workload"))
import flops as workload_flops  # noqa: E402  (the example's own FLOPs count, standard library)

H100 = "NVIDIA H100 80GB HBM3"
KIT_EXPORT = "h100_gpt2_ddp_nsys2025.3.1.sqlite"  # tests/data/real: gpt2, --batch-size 8 --seq-len 512, one H100


def facts(rows: list[tuple[int, str, float]]) -> Table:
    """Evidence rows of the low_mfu rule as the map writes them (rank, key, value)."""
    return Table({
        "rank": np.asarray([r[0] for r in rows], dtype=np.int64),
        "rule": np.asarray(["low_mfu"] * len(rows), dtype=object),
        "key": np.asarray([r[1] for r in rows], dtype=object),
        "value": np.asarray([float(r[2]) for r in rows], dtype=np.float64),
    })  # fmt: skip


def mfu_view(step_ns: dict[int, float], gpus: dict[int, str], inputs: dict | None = None, marked=None):
    """Two-or-more-rank view: steady steps per rank, one GPU each (named in the evidence), optional FLOPs marks."""
    rows = [(rank, "gpu:" + name, 1) for rank, name in gpus.items()]
    for rank, (count, dtype) in (marked or {}).items():
        rows += [(rank, "flops_per_step", count), (rank, "dtype", peaks.DTYPES.index(dtype))]
    made = view(steps_table({r: [ns] * 6 for r, ns in step_ns.items()}),
                breakdown=breakdown_table([{"rank": r, "window_ns": 6 * ns, "busy_ns": 5 * ns} for r, ns in step_ns.items()]),
                evidence=facts(rows))  # fmt: skip
    return dataclasses.replace(made, inputs=inputs or {})


def test_mfu_is_flops_over_the_median_step_over_the_dense_peak_and_fires_on_the_ranks_below_the_threshold():
    flops = 2.0e14  # per step per GPU
    steps = {0: 1000 * MS, 1: 1000 * MS, 2: 500 * MS}  # 200 TFLOP/s on ranks 0 and 1, 400 on rank 2
    found = mfu.low_mfu(mfu_view(steps, {r: H100 for r in steps}, {"flops_per_step": flops}))
    assert found.rule == "low_mfu" and found.severity == "warning"
    assert found.ranks == (0, 1)  # rank 2: 400 / 989.4 = 40.4%, over 30%
    assert found.evidence["achieved_tflops"] == pytest.approx(200.0)
    assert found.evidence["peak_tflops"] == 989.4  # H100 SXM, dense bf16 (the default dtype)
    assert found.value == pytest.approx(100 * 200.0 / 989.4)
    assert found.at_stake_ns == pytest.approx(1000 * MS * (1 - (100 * 200.0 / 989.4) / mfu.LOW_MFU_PCT))
    assert "200.0 TFLOP/s per GPU of 989.4 TFLOP/s dense bf16" in found.title and H100 in found.title
    assert found.threshold_text == "30% MFU"


def test_the_dtype_chooses_the_peak_and_the_example_s_mark_serves_when_no_flag_is_given():
    steps = {0: 1000 * MS, 1: 1000 * MS}
    fp8 = mfu.low_mfu(mfu_view(steps, {0: H100, 1: H100}, {"flops_per_step": 2.0e14, "dtype": "fp8"}))
    assert fp8.evidence["peak_tflops"] == 1978.9 and fp8.value == pytest.approx(100 * 200.0 / 1978.9)
    marked = mfu.low_mfu(mfu_view(steps, {0: H100, 1: H100}, marked={0: (1e14, "fp16"), 1: (1e14, "fp16")}))
    assert marked.evidence["flops_per_step"] == 1e14 and "dense fp16" in marked.title
    flag_wins = mfu.low_mfu(
        mfu_view(steps, {0: H100, 1: H100}, {"flops_per_step": 2e14}, {0: (1e14, "fp16"), 1: (1e14, "fp16")})
    )
    assert flag_wins.evidence["flops_per_step"] == 2e14 and "dense fp16" in flag_wins.title  # the mark's dtype stays


def test_each_rank_is_judged_against_its_own_gpu():
    steps = {0: 1000 * MS, 1: 1000 * MS}  # 100 TFLOP/s each: 10.1% of an H100, 32.1% of an A100
    found = mfu.low_mfu(mfu_view(steps, {0: H100, 1: "NVIDIA A100-SXM4-80GB"}, {"flops_per_step": 1e14}))
    assert found.ranks == (0,) and found.evidence["peak_tflops"] == 989.4


def test_silent_without_flops_and_on_a_run_at_its_target():
    steps = {0: 100 * MS, 1: 100 * MS}
    assert mfu.low_mfu(mfu_view(steps, {0: H100, 1: H100})) is None  # no FLOPs known: no MFU
    assert mfu.low_mfu(mfu_view(steps, {0: H100, 1: H100}, {"flops_per_step": 4e13})) is None  # 400 TFLOP/s: 40%
    assert mfu.low_mfu(mfu_view(steps, {}, marked={0: (1e12, "bf16"), 1: (1e12, "bf16")})) is None  # no GPU, no flag


@pytest.mark.parametrize(
    ("gpus", "inputs", "says"),
    [
        ({}, {"flops_per_step": 1e12}, "the GPU model is unknown"),
        ({0: "NVIDIA GeForce RTX 2070 SUPER", 1: "NVIDIA GeForce RTX 2070 SUPER"}, {"flops_per_step": 1e12},
         "no peak is known for the GPU 'NVIDIA GeForce RTX 2070 SUPER'"),
        ({0: "Tesla V100-SXM2-16GB", 1: "Tesla V100-SXM2-16GB"}, {"flops_per_step": 1e12}, "the V100 SXM2 has no dense bf16 peak"),
    ],
)  # fmt: skip
def test_one_note_says_what_is_missing_when_the_user_gave_the_flops(gpus, inputs, says):
    found = mfu.low_mfu(mfu_view({0: 100 * MS, 1: 100 * MS}, gpus, inputs))
    assert found.severity == "info" and says in found.title and found.title.startswith("MFU not computed on ranks 0, 1")
    assert math.isnan(found.at_stake_ns)


def test_a_gpu_model_flag_stands_in_for_an_export_that_names_none():
    found = mfu.low_mfu(mfu_view({0: 1000 * MS, 1: 1000 * MS}, {}, {"flops_per_step": 1e14, "gpu_model": "H100-PCIe"}))
    assert found.evidence["peak_tflops"] == 756.5


def test_low_mfu_is_a_rule_and_explains_itself():
    assert mfu.low_mfu in findings.RULES
    text = findings.explain("low_mfu")
    assert "dense peak" in text and "below 30%" in text and "estimate" in text


# ---- the peak table ----------------------------------------------------------------------------------------

REAL_NAMES = {  # the GPU names real exports give (TARGET_INFO_GPU), and the table's row for each
    "NVIDIA A100-SXM4-80GB": "A100 SXM", "NVIDIA A100-SXM4-40GB": "A100 SXM", "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H200": "H200 SXM", "Tesla V100-SXM2-16GB": "V100 SXM2", "NVIDIA GeForce RTX 2070 SUPER": None,
    "NVIDIA GeForce RTX 3060": None, "NVIDIA GeForce RTX 3080": None,
}  # fmt: skip


@pytest.mark.parametrize("name", [n for n in NAMES if n in PACKED])
def test_the_gpu_names_of_the_real_exports_find_their_row(name, real_exports_dir):
    listed = ExportReader(decompress(name, real_exports_dir)).gpus()
    for gpu in listed.values():
        assert gpu in REAL_NAMES, f"{name}: a GPU name this test does not know: {gpu!r}"
        row = peaks.find_gpu(gpu)
        assert (row.model if row else None) == REAL_NAMES[gpu]


@pytest.mark.parametrize(
    ("name", "model"),
    [("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA A100 80GB PCIe", "A100 PCIe"),
     ("NVIDIA A100-PCIE-40GB", "A100 PCIe"), ("NVIDIA L40S", "L40S"), ("NVIDIA L4", "L4"), ("NVIDIA A10G", "A10G"),
     ("Tesla T4", "T4"), ("Tesla V100-PCIE-32GB", "V100 PCIe"), ("NVIDIA B200", "B200"), ("NVIDIA GB200", "GB200"),
     ("AMD Instinct MI250X", "MI250X"), ("AMD Instinct MI300X", "MI300X"), ("NVIDIA H200 NVL", None),
     ("NVIDIA A10", None), ("NVIDIA H100 NVL", None)],
)  # fmt: skip
def test_names_as_drivers_give_them_find_their_model_and_no_other(name, model):
    row = peaks.find_gpu(name)
    assert (row.model if row else None) == model


def test_every_row_names_its_source_and_has_fp32():
    for row in peaks.PEAKS:
        assert "datasheet" in row.source and row.peak("fp32") > 0
        assert set(row.tflops) <= set(peaks.DTYPES)


# ---- real exports --------------------------------------------------------------------------------------------


def window_step_median_ns(export: Path) -> float:
    """The median 'step N' NVTX range inside the 'profile_window' range, read with SQL (not through the analysis)."""
    with sqlite3.connect(export) as db:
        text = "coalesce(n.text, s.value)"
        query = f"SELECT n.start, n.end, {text} FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE n.end IS NOT NULL"
        rows = db.execute(query).fetchall()
    window = next((start, end) for start, end, name in rows if name == "profile_window")
    inside = [
        end - start
        for start, end, name in rows
        if name and name.startswith("step ") and window[0] <= start <= window[1]
    ]
    return float(np.median(inside))


def kit_flops() -> int:
    """The example's count for the recorded run: gpt2 (12 layers, 768 wide, 50257 tokens), 8 x 512 tokens."""
    return workload_flops.training_flops(12, 768, 50257, 8, 512)


def test_on_the_kit_s_h100_export_mfu_is_the_flops_over_the_window_s_median_step_over_the_h100_peak(
    real_exports_dir, tmp_path
):
    export = decompress(KIT_EXPORT, real_exports_dir)
    step = window_step_median_ns(export)
    result = outputs.analyze([export], tmp_path, inputs={"flops_per_step": float(kit_flops())})
    found = next(f for f in result.summary.findings if f.rule == "low_mfu")
    achieved = kit_flops() / (step / 1e9) / 1e12
    assert found.evidence["step_median_ns"] == step
    assert found.evidence["achieved_tflops"] == pytest.approx(achieved)
    assert found.value == pytest.approx(100 * achieved / 989.4) and H100 in found.title
    silent = outputs.analyze([export], tmp_path)  # recorded before the example marked its FLOPs: no MFU
    assert not [f for f in silent.summary.findings if f.rule == "low_mfu"]


def test_the_nsys_ai_h100_pair_has_no_gpu_name_nor_steps_and_says_which_when_asked(real_exports_dir, tmp_path):
    export = decompress("nsysai_mfu_2gpu_before.sqlite", real_exports_dir)
    assert not [f for f in outputs.analyze([export], tmp_path).summary.findings if f.rule == "low_mfu"]
    asked = outputs.analyze([export], tmp_path, inputs={"flops_per_step": 1e13, "gpu_model": "H100-SXM"})
    (note,) = [f for f in asked.summary.findings if f.rule == "low_mfu"]
    assert note.severity == "info" and "no step time" in note.title


def nsyskit(*args: str) -> subprocess.CompletedProcess:
    """The CLI as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "nsyskit", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_the_cluster_merge_gives_the_same_finding_from_the_flags_the_plan_passes_it(real_exports_dir, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "x_rank_0.sqlite").write_bytes(decompress(KIT_EXPORT, real_exports_dir).read_bytes())
    request = AnalyzeRequest([str(run)], flops_per_step=float(kit_flops()), dtype="bf16")
    plan = dataclasses.replace(make_plan(run), merge_options=request.judge_words())
    here = nsyskit("analyze", str(run), "--json", "--no-html", *request.judge_words())
    assert here.returncode == 0, here.stderr
    mapped = nsyskit(*plan.map_arguments(), "--array-index", "0")
    assert mapped.returncode == 0, mapped.stderr
    merged = nsyskit(*plan.merge_arguments(), "--json", "--no-html")
    assert merged.returncode == 0, merged.stderr
    local, cluster = ([f for f in json.loads(p.stdout)["findings"] if f["rule"] == "low_mfu"] for p in (here, merged))
    assert local == cluster and len(local) == 1 and local[0]["evidence"]["peak_tflops"] == 989.4


def test_bad_flags_are_one_line():
    bad_dtype = nsyskit("analyze", "x.sqlite", "--dtype", "int4")
    assert bad_dtype.returncode != 0 and "--dtype 'int4': no such dtype" in bad_dtype.stderr
    assert "bf16, fp16, tf32, fp32, fp8" in bad_dtype.stderr and "Traceback" not in bad_dtype.stderr
    bad_flops = nsyskit("analyze", "x.sqlite", "--flops-per-step", "-3")
    assert (
        bad_flops.returncode != 0 and "--flops-per-step" in bad_flops.stderr and len(bad_flops.stderr.splitlines()) == 1
    )


def test_the_slurm_and_kubernetes_merge_jobs_carry_the_flags():
    run = Path("/fsx/reports/run-1")
    request = AnalyzeRequest([str(run)], flops_per_step=3.0e12, dtype="fp16", gpu_model="A100-SXM")
    plan = AnalysisPlan(run, [run / "x_rank_0.nsys-rep"], 1, merge_options=request.judge_words())
    words = "--flops-per-step 3000000000000.0 --dtype fp16 --gpu-model A100-SXM"
    slurm = slurm_analysis.scripts(load_config(ROOT, overrides={"SLURM_MODE": "host"}, environ={}), ROOT, plan)
    assert words in slurm["merge.sbatch"]
    k8s = {"REGISTRY": "r.example", "K8S_REPORT_PVC": "fsx", "K8S_SHARED_DIR": "/fsx", "K8S_NAMESPACE": "ml"}
    _map, merge = yaml.safe_load_all(k8s_analysis.manifests(load_config(ROOT, overrides=k8s, environ={}), ROOT, plan))
    command = merge["spec"]["template"]["spec"]["containers"][0]["command"]
    assert words in " ".join(command)


def test_at_512_ranks_the_finding_is_one_line_naming_how_many():
    steps = {r: (1000 if r % 2 else 400) * MS for r in range(512)}  # odd ranks 20.2% MFU, even ones 50.5%
    found = mfu.low_mfu(mfu_view(steps, {r: H100 for r in steps}, {"flops_per_step": 2.0e14}))
    assert found.ranks == tuple(range(1, 512, 2)) and "\n" not in found.title
    assert "on 256 of 512 ranks (1, 3, 5, 7, ...)" in found.title
