"""The host-side diagnoses: a cause planted in an otherwise healthy 2-rank run fires its rule and no other of them,
a healthy run fires none, real profiles get the causes their authors found, and a wide run stays one line per rule."""

from __future__ import annotations

import numpy as np
import pytest
from diagnosis_fixtures import CAUSES, training_run
from real_exports import PACKED, decompress

from nsyskit.analysis.compute import diagnoses as measure
from nsyskit.analysis.compute.metrics import view_of
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.judge import diagnoses as judge
from nsyskit.analysis.judge import findings
from nsyskit.analysis.judge.findings import find
from nsyskit.analysis.mapreduce.parts import map_reports, merge_parts
from nsyskit.analysis.read.apicalls import ALLOC, LAUNCH, MODULE, SYNC, api_kind, wait_kind
from nsyskit.analysis.trace import analyze_run

RULE_OF = {"sync": "sync_stall", "launch": "launch_bound", "alloc": "allocator", "module": "module_loading",
           "gap": "gpu_gaps", "loader": "data_loading"}  # fmt: skip
MINE = set(measure.RULES)


SYMPTOMS = {"straggler", "gpu_idle", "step_variance", "exposed_comm", "comm_share"}  # what a cause makes visible


def diagnoses_of(run) -> dict[str, object]:
    """The host-side findings of a run folder, by rule."""
    return {f.rule: f for f in find(view_of(analyze_run([run], workers=1))) if f.rule in MINE}


@pytest.mark.parametrize("cause", CAUSES)
@pytest.mark.parametrize("variant", [0, 1])
def test_a_planted_cause_fires_its_rule_and_no_other(tmp_path, cause, variant):
    run = training_run(tmp_path / "run", cause, variant=variant)
    found = diagnoses_of(run)
    assert set(found) == {RULE_OF[cause]}
    # Of every rule, only its symptoms join it (the planted rank straggles, the GPU idles, a step runs long)
    every = {f.rule for f in find(view_of(analyze_run([run], workers=1)))}
    assert every - SYMPTOMS == {RULE_OF[cause]}
    finding = found[RULE_OF[cause]]
    assert finding.ranks == (1,)  # planted on rank 1 only
    assert finding.at_stake_ns > 0 and finding.evidence and finding.advice
    assert "rank 1" in finding.title and "\n" not in finding.title


def test_the_loader_told_by_os_waits_alone_fires_data_loading(tmp_path):
    found = diagnoses_of(training_run(tmp_path / "run", "loader", variant=2))
    assert set(found) == {"data_loading"}
    assert "OS waits" in found["data_loading"].title


def test_a_healthy_run_fires_none(tmp_path):
    assert diagnoses_of(training_run(tmp_path / "run")) == {}
    assert find(view_of(analyze_run([tmp_path / "run"], workers=1))) == []  # nor any other rule


def test_the_time_at_stake_is_what_the_cause_costs_per_step(tmp_path):
    # the fixture's planted costs: 3 ms of host work after a mid-step sync, 1.3 ms of allocator calls per step
    stake = {cause: diagnoses_of(training_run(tmp_path / cause, cause))[RULE_OF[cause]].at_stake_ns
             for cause in ("sync", "alloc")}  # fmt: skip
    assert stake["sync"] == pytest.approx(3e6, rel=0.05)
    assert stake["alloc"] == pytest.approx(1.3e6, rel=0.05)


def test_a_cause_on_both_ranks_is_one_finding_naming_both_with_the_steps(tmp_path):
    found = diagnoses_of(training_run(tmp_path / "run", "module", planted=(0, 1)))
    assert list(found) == ["module_loading"]
    assert found["module_loading"].ranks == (0, 1)
    assert found["module_loading"].steps == (3, 5, 7)  # the steps the loads were planted in
    assert found["module_loading"].evidence["calls"] == 6  # summed over the ranks


def test_parts_give_the_findings_of_one_process(tmp_path):
    run = training_run(tmp_path / "run", "sync", planted=(0, 1))
    whole = find(view_of(analyze_run([run], workers=1)))
    map_reports([run], tmp_path / "parts")
    merged, _facts = merge_parts(tmp_path / "parts")
    assert [f.to_json() for f in find(view_of(merged))] == [f.to_json() for f in whole]


def test_at_512_ranks_a_rule_is_one_line_naming_how_many_ranks(tmp_path):
    analysis = analyze_run([training_run(tmp_path / "run", "alloc", planted=(0, 1))], workers=1)
    rows = analysis.evidence.take(analysis.evidence["rank"] == 1)
    wide = len(rows)
    ranks = np.repeat(np.arange(512), wide)
    keys = np.tile(rows["key"], 512)
    calls = np.isin(keys, ["calls", "cpu_ns", "idle_beside_ns", "steps_with_calls"]) & (ranks % 2 == 1)
    analysis.evidence = Table({  # odd ranks: no allocator calls at all
        "rank": ranks, "rule": np.tile(rows["rule"], 512), "key": keys,
        "value": np.where(calls, 0.0, np.tile(rows["value"], 512)),
    })  # fmt: skip
    finding = judge.allocator(view_of(analysis))
    assert finding.ranks == tuple(range(0, 512, 2))
    assert "256 of 512 ranks (0, 2, 4, 6, ...)" in finding.title and "\n" not in finding.title
    assert (
        finding.evidence["calls"] == 256 * rows["value"][(rows["key"] == "calls") & (rows["rule"] == "allocator")][0]
    )  # summed over the ranks


@pytest.mark.parametrize(
    "name, kind",
    [("cudaMalloc_v3020", ALLOC), ("cudaFreeAsync_v11020", ALLOC), ("cuMemMap", ALLOC), ("cudaMemcpy_v3020", SYNC),
     ("cudaMemcpyAsync_v3020", 0), ("cudaStreamSynchronize_v3020", SYNC), ("cuCtxSynchronize", SYNC),
     ("cudaLaunchKernel_v7000", LAUNCH), ("cudaLaunchKernel_ptsz_v7000", LAUNCH), ("cuLibraryLoadData", MODULE),
     ("cuModuleLoadDataEx", MODULE), ("cuModuleGetLoadingMode", 0), ("nvrtcCompileProgram", MODULE),
     ("cudaEventRecord_v3020", 0)],
)  # fmt: skip
def test_api_calls_are_told_apart_by_name_whatever_the_version_suffix(name, kind):
    assert api_kind(name) == kind


def test_os_waits_are_the_blocking_calls():
    assert [bool(wait_kind(n)) for n in ("poll", "pthread_cond_wait", "futex", "read", "write", "fork")] == [
        True, True, True, True, False, False]  # fmt: skip


AIPROFILER = ["aiprofiler_a100_baseline.sqlite", "aiprofiler_a100_baseline_nvtx.sqlite",
              "aiprofiler_a100_firstOptimization.sqlite", "aiprofiler_a100_secondOptimization.sqlite",
              "aiprofiler_a100_thirdOptimization.sqlite"]  # fmt: skip


@pytest.mark.parametrize("name", AIPROFILER)
def test_the_ai_profiler_series_names_its_documented_cause_and_no_removed_one(name, real_exports_dir):
    # Its notebooks: the GPU starves while one DataLoader worker loads each batch (baseline); more workers (first
    # optimization), pinned memory (second) and AMP (third) leave data loading the largest share of every step.
    # None of them found syncs, launch overhead, allocator calls or module loads, and none removed them.
    found = diagnoses_of(decompress(name, real_exports_dir))
    assert "data_loading" in found
    assert found["data_loading"].value > 50  # % of the step the GPU idles waiting for its batch
    assert not {"sync_stall", "launch_bound", "allocator", "module_loading"} & set(found)


HEALTHY = ["nsysai_h100_2gpu_1s.sqlite", "nsysai_mfu_2gpu_before.sqlite", "nsysai_mfu_2gpu_after.sqlite",
           "nsysai_mock_rtx3080.sqlite", "flameox_rtx3060_nsight_2025_5_2.sqlite",
           "gpubootcamp_v100_jacobi_single.sqlite", "h100_gpt2_ddp_nsys2025.3.1.sqlite"]  # fmt: skip
HEALTHY += [name for name in PACKED if name.startswith(("rtx", "local", "nsyskit"))]  # this project's own recordings


@pytest.mark.parametrize("name", HEALTHY)
def test_real_exports_without_such_causes_fire_none(name, real_exports_dir):
    # Steady GPU-bound loops (two-rank H100 captures, a Jacobi solver) and one-off tests of a few kernels
    assert diagnoses_of(decompress(name, real_exports_dir)) == {}


def test_nvfuser_profiles_show_its_jit_inside_the_window(real_exports_dir):
    # nvFuser compiles its fusions at run time and loads them (cuLibraryLoadData) between its kernels
    found = diagnoses_of(decompress("fuser_h100_8fa9ec296_report1.sqlite", real_exports_dir))
    assert "module_loading" in found and found["module_loading"].evidence["calls"] >= 10


def test_gpu_idle_says_how_much_of_its_idle_time_the_cause_explains(tmp_path):
    assert judge.IDLE_EXPLAINED == findings.IDLE_EXPLAINED
    found = {f.rule: f for f in find(view_of(analyze_run([training_run(tmp_path / "r", "loader", planted=(0, 1))],
                                                         workers=1)))}  # fmt: skip
    assert "explained by data_loading" in found["gpu_idle"].title
    assert found["gpu_idle"].evidence["explained_by_data_loading_ns_per_step"] == pytest.approx(
        found["data_loading"].at_stake_ns
    )


@pytest.mark.parametrize("rule", sorted(MINE))
def test_explain_prints_what_each_rule_measures_its_threshold_and_what_to_try(rule):
    text = findings.explain(rule)
    assert text.startswith(rule) and "fires when:" in text and "what to try:" in text
    threshold = {"sync_stall": "5%", "launch_bound": "10 us", "allocator": "50%", "module_loading": "100 us",
                 "gpu_gaps": "500 ms", "data_loading": "10%"}[rule]  # fmt: skip
    assert threshold in text


@pytest.mark.parametrize("cause", ["sync", "alloc", "module"])
def test_the_host_calls_read_through_sqlite_give_the_same_findings(tmp_path, monkeypatch, cause):
    run = training_run(tmp_path / "run", cause)
    from_pages = [f.to_json() for f in diagnoses_of(run).values()]
    monkeypatch.setenv("NSYSKIT_PAGE_SCAN", "0")  # no page reader: every table through SQLite (as where it fails)
    assert [f.to_json() for f in diagnoses_of(run).values()] == from_pages
