"""The counters' findings on fixtures in the documented schema (see counter_fixtures.py): each fires past its
threshold, and stays quiet under it."""

from __future__ import annotations

import sqlite3

import pytest
from counter_fixtures import EFA_FIELDS, Counters
from test_counters import MS, TENSOR, export_with

from nsyskit.analysis.compute.metrics import view_of
from nsyskit.analysis.judge import counterfindings
from nsyskit.analysis.judge.findings import find
from nsyskit.analysis.trace import analyze_run

GB = 1e9


def findings(path) -> dict:
    return {f.rule: f for f in find(view_of(analyze_run([path])))}


@pytest.mark.parametrize(("busy_pct", "fires"), [(4, True), (40, False)])
def test_tensor_cores_idle_while_the_gpu_is_busy(tmp_path, busy_pct, fires):
    # GPU 0 runs kernels 10-90 ms: tensor cores at busy_pct then; 95% before the kernels (not counted)
    tensor = {0: [(0, 95), (10 * MS, busy_pct), (90 * MS, 95), (100 * MS, 0)]}
    found = findings(export_with(tmp_path / "t.sqlite", Counters(gpu={TENSOR: tensor})))
    assert ("tensor_cores_idle" in found) is fires
    if fires:
        finding = found["tensor_cores_idle"]
        assert finding.value == pytest.approx(100 - busy_pct) and finding.ranks == (0,)  # idle share while busy
        assert finding.evidence["tensor_active_while_busy_pct"] == pytest.approx(busy_pct)
        assert "rank 0 GPU 0" in finding.title and finding.threshold == 100 - counterfindings.TENSOR_ACTIVE_PCT


def test_tensor_cores_idle_stays_silent_where_the_gpu_does_little_matrix_math(tmp_path):
    # The same 4% of tensor activity, but the GPU's compute kernels are elementwise: not a tensor-core problem (as
    # the AI-Profiler A100 profiles after AMP: their GEMMs and convolutions are a quarter of the kernel time)
    tensor = {0: [(0, 95), (10 * MS, 4), (90 * MS, 95), (100 * MS, 0)]}
    path = export_with(tmp_path / "t.sqlite", Counters(gpu={TENSOR: tensor}))
    with sqlite3.connect(path) as con:  # every compute kernel renamed an elementwise one
        con.execute("UPDATE StringIds SET value = 'vectorized_elementwise_kernel' WHERE value = 'ampere_sgemm'")
    assert "tensor_cores_idle" not in findings(path)


@pytest.mark.parametrize("name", ["aiprofiler_a100_secondOptimization.sqlite", "aiprofiler_a100_thirdOptimization.sqlite"])
def test_the_ai_profiler_runs_with_gpu_metrics_raise_no_tensor_core_cause(name, real_exports_dir):
    # Their authors: the A100 run 'already uses the Tensor Cores' (TF32), and AMP (the third) uses them more;
    # tensor activity is low there because most kernel time is elementwise and pooling work, not matrix math.
    from real_exports import decompress

    found = findings(decompress(name, real_exports_dir))
    assert not {"tensor_cores_idle", "tensor_cores_unused"} & set(found)


@pytest.mark.parametrize(("rate", "fires"), [(1 * GB, True), (10 * GB, False)])
def test_nic_far_under_line_rate_while_nccl_runs(tmp_path, rate, fires):
    # EFA 0 moves `rate` bytes/s while the NCCL kernel runs (40-60 ms); line rate 100 Gb/s = 12.5 GB/s
    efa = {0: [(0, {}), (40 * MS, {EFA_FIELDS[2]: rate}), (60 * MS, {}), (100 * MS, {})]}
    found = findings(export_with(tmp_path / "n.sqlite", Counters(efa=efa)))
    assert ("nic_under_line_rate" in found) is fires
    if fires:
        finding = found["nic_under_line_rate"]
        assert finding.value == pytest.approx(100 - rate * 100 / 12.5e9)  # the unused share of the line rate
        assert finding.evidence["line_rate_pct"] == pytest.approx(rate * 100 / 12.5e9)
        assert finding.evidence["busiest_bytes_per_s"] == pytest.approx(rate)
        assert "(busiest: 1.00 GB/s; rank 0 EFA 0)" in finding.title  # the rate in 10^3 steps, as the counters table


def test_the_line_rate_can_be_set(tmp_path, monkeypatch):
    efa = {0: [(0, {}), (40 * MS, {EFA_FIELDS[2]: 1 * GB}), (60 * MS, {}), (100 * MS, {})]}
    path = export_with(tmp_path / "n.sqlite", Counters(efa=efa))
    monkeypatch.setenv(counterfindings.LINE_RATE_VARIABLE, "25")  # 25 Gb/s: 1 GB/s is 32% of it
    assert "nic_under_line_rate" not in findings(path)


@pytest.mark.parametrize(("shares", "fires"), [((85, 5, 5, 5), True), ((30, 25, 25, 20), False)])
def test_one_efa_device_carrying_most_of_a_node(tmp_path, shares, fires):
    efa = {device: [(0, {EFA_FIELDS[0]: share * 1e7}), (100 * MS, {})] for device, share in enumerate(shares)}
    found = findings(export_with(tmp_path / "e.sqlite", Counters(efa=efa)))
    assert ("efa_imbalance" in found) is fires
    if fires:
        finding = found["efa_imbalance"]
        assert finding.value == pytest.approx(85) and "EFA 0" in finding.title and finding.ranks == (0,)
