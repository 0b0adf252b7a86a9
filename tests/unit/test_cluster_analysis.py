"""analyze --slurm's plan and scripts: golden map/merge scripts (Pyxis, host), shellcheck, the array's shape, the
checks made before submitting. The jobs themselves run on the suite's real Slurm (tests/integration/test_slurm.py).

Golden files are compared, never rewritten, unless NSYSKIT_REGEN_GOLDEN=1 is set by a person on purpose.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fixtures.golden import assert_matches_golden

from nsyskit import hostpkgs
from nsyskit.clusteranalysis import (
    MAX_ELEMENTS,
    AnalysisPlan,
    blocks_for,
    clear_parts,
    elements_for,
    index_list,
    make_plan,
    parts_done,
    submit_and_follow,
)
from nsyskit.config import load_config
from nsyskit.errors import JobError, UsageError
from nsyskit.k8s import analysis as k8s_analysis
from nsyskit.k8s import crd
from nsyskit.slurm import analysis

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data" / "golden" / "slurm-analysis"
RUN = Path("/fsx/nsyskit/reports/run-1")
ECR = "123456789012.dkr.ecr.us-west-2.amazonaws.com"

# name -> (reports, plan options, settings): a 1,024-rank run in Pyxis from ECR, 16 ranks in host mode, and 4,096
# ranks in host mode, merged as a tree (8 partial merges, then the final merge).
VARIANTS = {
    "pyxis": (1024, {"max_parallel": 32, "timeline": True, "timeline_max_events": 200000},
              {"REGISTRY": ECR, "SLURM_PARTITION": "cpu", "SLURM_ACCOUNT": "ml-infra"}),
    "host": (16, {"straggler_pct": 10.0, "strict": True},
             {"SLURM_MODE": "host", "SLURM_NSYSKIT": "/fsx/venv/bin/nsyskit", "SLURM_TIME_LIMIT": "30"}),
    "tree": (4096, {"blocks": blocks_for(4096, 1024), "strict": True},
             {"SLURM_MODE": "host", "SLURM_NSYSKIT": "/fsx/venv/bin/nsyskit"}),
}  # fmt: skip


def plan(variant: str) -> AnalysisPlan:
    count, options, _settings = VARIANTS[variant]
    reports = [RUN / f"nsyskit_1_node_{rank // 8}_rank_{rank}_h{rank // 8}.nsys-rep" for rank in range(count)]
    return AnalysisPlan(RUN, reports, elements_for(count), **options)


def config(variant: str, **more: str):
    return load_config(ROOT, overrides={**VARIANTS[variant][2], **more}, environ={})


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_golden_scripts(variant):
    assert_matches_golden(analysis.scripts(config(variant), ROOT, plan(variant)), GOLDEN / variant)


@pytest.fixture(scope="module")
def shellcheck() -> str:
    if not shutil.which("shellcheck"):
        hostpkgs.install("shellcheck")
    return shutil.which("shellcheck")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_scripts_pass_shellcheck_and_bash_n(variant, shellcheck, tmp_path):
    for name, text in analysis.scripts(config(variant), ROOT, plan(variant)).items():
        path = tmp_path / name
        path.write_text(text)
        for command in ([shellcheck, "--shell=bash", str(path)], ["bash", "-n", str(path)]):
            checked = subprocess.run(command, capture_output=True, text=True)
            assert checked.returncode == 0, f"{name}: {checked.stdout}{checked.stderr}"


def test_a_thousand_reports_make_a_reasonable_array_each_element_taking_every_nth():
    assert [elements_for(n) for n in (1, 16, 256, 1024, 4096)] == [1, 16, 256, MAX_ELEMENTS, MAX_ELEMENTS]
    wide = plan("pyxis")
    taken = [report for element in range(wide.elements) for report in wide.reports_of(element)]
    assert sorted(taken) == sorted(wide.reports) and len(wide.reports_of(0)) == 4  # each report once, 4 per element
    text = analysis.scripts(config("pyxis"), ROOT, wide)["map.sbatch"]
    assert "#SBATCH --array=0-255%32" in text and "--array-size 256" in text
    assert "#SBATCH --partition=cpu" in text and "#SBATCH --account=ml-infra" in text


def test_past_the_threshold_the_merge_is_a_tree_of_partial_merges_between_the_map_and_the_final_merge(tmp_path):
    assert [blocks_for(n, 1024) for n in (16, 1024, 1025, 2048, 4096, 16384)] == [0, 0, 3, 4, 8, 32]
    assert blocks_for(16, 8) == 2  # a low threshold (--tree-ranks) still makes a tree of 2 blocks
    scripts = analysis.scripts(config("tree"), ROOT, plan("tree"))
    assert sorted(scripts) == ["map.sbatch", "merge.sbatch", "partial.sbatch"]
    partial, merge = scripts["partial.sbatch"], scripts["merge.sbatch"]
    assert "#SBATCH --array=0-7\n" in partial and "#SBATCH --job-name=nsyskit-partial" in partial
    assert (f"analyze-merge {RUN}/analysis-parts --partial {RUN}/analysis-partials --array-size 8 --strict "
            '--array-index "$SLURM_ARRAY_TASK_ID"') in partial  # fmt: skip
    assert f"analyze-merge {RUN}/analysis-partials --output {RUN}" in merge and "--array" not in merge
    assert "partial.sbatch" not in analysis.scripts(config("host"), ROOT, plan("host"))  # 16 ranks: no tree
    # a run folder of 12 reports with --tree-ranks 8 (ANALYZE_TREE_RANKS' flag): the dry run renders the third job
    run = tmp_path / "fsx" / "run"
    run.mkdir(parents=True)
    for rank in range(12):
        (run / f"rank_{rank}.sqlite").write_bytes(b"")
    small = make_plan(run, tree_ranks=8)
    assert small.blocks == 2 and make_plan(run).blocks == 0
    cfg = config("host", SLURM_SHARED_DIR=str(tmp_path / "fsx"))
    said = submit_and_follow(analysis, cfg, ROOT, small, wait=False, dry_run=True)
    assert said == [f"rendered {small.folder / name} (nothing submitted)" for name in ("map.sbatch", "partial.sbatch", "merge.sbatch")]
    assert submit_and_follow(analysis, cfg, ROOT, make_plan(run), wait=False, dry_run=True)[1].endswith("merge.sbatch (nothing submitted)")
    assert not (small.folder / "partial.sbatch").exists()  # a plan without a tree removes an earlier one's script


def test_pyxis_runs_the_image_with_the_shared_file_system_and_host_mode_the_nodes_nsyskit():
    pyxis = analysis.scripts(config("pyxis"), ROOT, plan("pyxis"))
    sqsh = f"/fsx/enroot/docker+{ECR}+nsyskit+latest.sqsh"  # the pushed image, imported once (test_slurm_analysis_image)
    assert f"enroot import --output \"$partial\" 'docker://{ECR}#nsyskit:latest'" in pyxis["import.sbatch"]
    assert f"image={sqsh}\n" in pyxis["map.sbatch"] and '--container-image="$image"' in pyxis["map.sbatch"]
    assert "--container-mounts=/fsx:/fsx" in pyxis["merge.sbatch"] and " nsyskit analyze-merge " in pyxis["merge.sbatch"]
    host = analysis.scripts(config("host"), ROOT, plan("host"))
    assert "srun" not in host["map.sbatch"] and "/fsx/venv/bin/nsyskit analyze-part" in host["map.sbatch"]
    assert "command -v /fsx/venv/bin/nsyskit" in host["map.sbatch"]  # a node without it says so in the log
    merge = re.search(r"^/fsx/venv/bin/nsyskit analyze-merge .*$", host["merge.sbatch"], re.M)[0]
    assert merge.endswith("--output /fsx/nsyskit/reports/run-1 --straggler-pct 10 --strict")


def test_the_analysis_runs_as_the_run_ran(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "a_rank_0.sqlite").write_bytes(b"")
    (run / "run.json").write_text('{"schema_version": 2, "run_id": "run", "target": "slurm", "image": "/fsx/e/k.sqsh",'
                                  ' "details": {"mode": "pyxis"}}')  # fmt: skip
    assert analysis.how_it_runs(config("host"), make_plan(run)) == ("pyxis", "/fsx/e/k.sqsh")
    (run / "run.json").unlink()
    assert analysis.how_it_runs(config("host"), make_plan(run)) == ("host", "")


def test_a_run_off_the_shared_file_system_is_refused_before_anything_is_written(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "a_rank_0.sqlite").write_bytes(b"")
    problems = analysis.problems(config("host", SLURM_SHARED_DIR="/fsx"), make_plan(run))
    assert [p.one_line() for p in problems] == [
        f"run folder='{run}': is not on SLURM_SHARED_DIR (/fsx), so the compute nodes cannot read its reports; "
        "fix: keep runs on the shared file system (under /fsx), or set SLURM_SHARED_DIR to the shared folder that "
        "holds this run"
    ]
    with pytest.raises(Exception, match="is not on SLURM_SHARED_DIR"):
        analysis.submit(config("host", SLURM_SHARED_DIR="/fsx"), ROOT, make_plan(run))
    assert not (run / "analysis-jobs").exists()
    assert analysis.problems(config("host", SLURM_SHARED_DIR=str(tmp_path)), make_plan(run)) == []
    pyxis = analysis.problems(config("host", SLURM_SHARED_DIR=str(tmp_path), SLURM_MODE="pyxis"), make_plan(run))
    assert [p.key for p in pyxis] == ["SLURM_CONTAINER_IMAGE"]  # registry without REGISTRY: nothing to pull


def test_a_run_whose_squashfs_image_is_gone_is_refused_before_submitting(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "a_rank_0.sqlite").write_bytes(b"")
    sqsh = tmp_path / "kit.sqsh"
    (run / "run.json").write_text(json.dumps({"schema_version": 2, "run_id": "run", "target": "slurm", "image": str(sqsh),
                                              "details": {"mode": "pyxis"}}))  # fmt: skip
    settings = config("host", SLURM_SHARED_DIR=str(tmp_path))
    [problem] = analysis.problems(settings, make_plan(run))
    assert problem.key == "image" and problem.value == str(sqsh) and "does not exist" in problem.one_line()
    assert f"enroot import -o {sqsh}" in problem.one_line()
    sqsh.write_bytes(b"hsqs")  # there again: nothing in the way
    assert analysis.problems(settings, make_plan(run)) == []


def test_bad_plans_are_one_line(tmp_path):
    with pytest.raises(UsageError, match="is not a run folder"):
        make_plan(tmp_path / "nowhere")
    run = tmp_path / "run"
    run.mkdir()
    (run / "a_rank_0.sqlite").write_bytes(b"")
    with pytest.raises(UsageError, match="--slurm-max-parallel 0"):
        make_plan(run, max_parallel=0)


def test_stale_parts_are_cleared_and_half_written_ones_never_counted(tmp_path):
    run = tmp_path / "run"
    (run / "analysis-parts").mkdir(parents=True)
    (run / "a_rank_0.sqlite").write_bytes(b"")
    (run / "analysis-parts" / "a_rank_0.sqlite.part.npz").write_bytes(b"old")
    (run / "analysis-parts" / ".xyz.tmp").write_bytes(b"half")
    fresh = make_plan(run)
    assert parts_done(fresh) == 1 and clear_parts(fresh) == 1 and parts_done(fresh) == 0


def test_index_ranges_of_scontrol_sacct_and_kubernetes():
    assert index_list("4") == [4]
    assert index_list("3-6%2") == [3, 4, 5, 6]  # scontrol: pending elements as one range, with the %N cap
    assert index_list("[1,3,5-7]") == [1, 3, 5, 6, 7]  # sacct
    assert index_list("[0-2%4]") == [0, 1, 2]
    assert index_list("1,3-5") == [1, 3, 4, 5] and index_list("") == []  # a Job's status.failedIndexes


# --- analyze --k8s: the Jobs' manifest, its validation, and following them through kubectl -----------------------------

K8S_GOLDEN = ROOT / "tests" / "data" / "golden" / "k8s-analysis"
K8S = {"REGISTRY": ECR, "K8S_REPORT_PVC": "fsx-claim", "K8S_SHARED_DIR": "/fsx", "K8S_NAMESPACE": "ml"}


def test_golden_k8s_jobs():
    text = k8s_analysis.manifests(load_config(ROOT, overrides=K8S, environ={}), ROOT, plan("pyxis"))
    assert_matches_golden({"k8s-jobs.yaml": text}, K8S_GOLDEN)


def test_golden_k8s_jobs_of_a_tree_an_indexed_job_of_partial_merges_between_the_map_and_the_merge():
    text = k8s_analysis.manifests(load_config(ROOT, overrides=K8S, environ={}), ROOT, plan("tree"))
    assert_matches_golden({"k8s-jobs.yaml": text}, K8S_GOLDEN.with_name("k8s-analysis-tree"))
    map_job, partial_job, merge_job = yaml.safe_load_all(text)
    spec = partial_job["spec"]
    assert (spec["completionMode"], spec["completions"]) == ("Indexed", 8)
    pod = spec["template"]["spec"]
    assert "-ge 4096 ]" in pod["initContainers"][0]["command"][-1]  # every part first
    assert pod["containers"][0]["command"][-1].endswith('--partial /fsx/nsyskit/reports/run-1/analysis-partials '
                                                        '--array-size 8 --strict --array-index "$JOB_COMPLETION_INDEX"')  # fmt: skip
    wait = merge_job["spec"]["template"]["spec"]["initContainers"][0]
    assert wait["name"] == "wait-for-partial-merges" and "analysis-partials" in wait["command"][-1] and "-ge 8 ]" in wait["command"][-1]
    merge = merge_job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert merge[:3] == ["nsyskit", "analyze-merge", str(RUN / "analysis-partials")]


def test_the_jobs_are_an_indexed_map_and_a_merge_waiting_for_every_part_valid_against_the_job_api():
    text = k8s_analysis.manifests(load_config(ROOT, overrides=K8S, environ={}), ROOT, plan("pyxis"))
    map_job, merge_job = yaml.safe_load_all(text)
    spec = map_job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimitPerIndex"]) == (
        "Indexed", 256, 32, 1)  # fmt: skip
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "fsx-claim"
    assert pod["containers"][0]["image"] == f"{ECR}/nsyskit:latest"
    assert pod["containers"][0]["command"][-1].endswith('--array-size 256 --timeline --timeline-max-events 200000 '
                                                        '--array-index "$JOB_COMPLETION_INDEX"')  # fmt: skip
    wait = merge_job["spec"]["template"]["spec"]["initContainers"][0]["command"][-1]
    assert "-ge 1024 ]" in wait and str(RUN / "analysis-parts") in wait
    assert merge_job["spec"]["template"]["spec"]["containers"][0]["command"][:2] == ["nsyskit", "analyze-merge"]


@pytest.mark.parametrize("path, value", [
    (("spec", "template", "spec", "containers", 0, "imagePullPolicyy"), "Always"),  # a typo in a pod field
    (("spec", "completionMode"), "indexed"),
    (("spec", "parallelism"), "4"),
    (("metadata", "name"), "Nsyskit_Map"),
])  # fmt: skip
def test_a_wrong_job_field_is_refused_naming_it(path, value):
    text = k8s_analysis.manifests(load_config(ROOT, overrides=K8S, environ={}), ROOT, plan("host"))
    documents = list(yaml.safe_load_all(text))
    target = documents[0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(crd.InvalidManifest, match=r"does not match the batch/v1 Job API: [\w-]+: "
                       + re.escape(".".join(map(str, path[:-1])))):  # fmt: skip
        crd.validate_jobs(yaml.safe_dump_all(documents), ROOT / crd.CRD_FILE, "k8s-jobs.yaml")


def test_k8s_needs_the_claim_and_where_it_is_mounted_here(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "a_rank_0.sqlite").write_bytes(b"")
    bare = k8s_analysis.problems(load_config(ROOT, environ={}), make_plan(run))
    assert [p.key for p in bare] == ["K8S_REPORT_PVC", "K8S_SHARED_DIR"]
    off = k8s_analysis.problems(load_config(ROOT, overrides=K8S, environ={}), make_plan(run))
    assert [p.one_line().split(":")[0] for p in off] == [f"run folder='{run}'"] and "is not on K8S_SHARED_DIR" in str(off[0])


@pytest.fixture
def fake_kubectl(tmp_path, monkeypatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f"#!{sys.executable}\n" + (Path(__file__).parent / "fake_kubectl.py").read_text())
    kubectl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_KUBECTL_STATE", str(tmp_path / "state.json"))
    return tmp_path / "state.json"


def k8s_run(tmp_path: Path, reports: int = 3) -> tuple[Path, object]:
    run = tmp_path / "fsx" / "run"
    (run / "analysis-parts").mkdir(parents=True)
    for rank in range(reports):
        (run / f"x_rank_{rank}.sqlite").write_bytes(b"")
    (run / "analysis-parts" / "stale.part.npz").write_bytes(b"from an earlier analysis")
    return run, load_config(ROOT, overrides={**K8S, "K8S_SHARED_DIR": str(tmp_path / "fsx")}, environ={})


def test_k8s_applies_both_jobs_follows_them_and_prints_the_merge(tmp_path, fake_kubectl, monkeypatch, capsys):
    run, cfg = k8s_run(tmp_path)
    monkeypatch.setenv("FAKE_JOB_LOG", f"Findings\n  1. the merged analysis\n\u2713 report: {run / 'report.html'}\n")
    lines = submit_and_follow(k8s_analysis, cfg, ROOT, make_plan(run), wait=True)
    assert lines == [f"report: {run / 'report.html'}"]  # the command prints it: the merge log's own line is dropped
    state = json.loads(fake_kubectl.read_text())
    map_name, merge_name = k8s_analysis.job_names(make_plan(run))
    assert state["jobs"] == [map_name, merge_name] and not (run / "analysis-parts" / "stale.part.npz").exists()
    partial_name = k8s_analysis.partial_name(make_plan(run))  # an earlier analysis' tree too: its pods would write partials
    assert [c[:3] for c in state["calls"][:3]] == [["delete", "job", n] for n in (map_name, partial_name, merge_name)]
    printed = capsys.readouterr().out
    assert "the merged analysis" in printed and "report:" not in printed


def test_k8s_names_failed_indexes_with_their_reports_and_deletes_the_waiting_merge(tmp_path, fake_kubectl, monkeypatch):
    run, cfg = k8s_run(tmp_path)
    monkeypatch.setenv("FAKE_FAILED_INDEXES", "1,2")
    with pytest.raises(JobError) as raised:
        submit_and_follow(k8s_analysis, cfg, ROOT, make_plan(run), wait=True)
    map_name, merge_name = k8s_analysis.job_names(make_plan(run))
    assert raised.value.one_line().startswith(
        f"2 of 3 map element(s) of Indexed Job {map_name} failed: index 1 (x_rank_1.sqlite); index 2 (x_rank_2.sqlite); "
        f"logs: kubectl logs -n ml -l job-name={map_name},batch.kubernetes.io/job-completion-index=N; fix: read the "
        f"logs; the parts that exist merge with 'invoke analyze-merge {run / 'analysis-parts'}'"
    )  # fmt: skip
    assert json.loads(fake_kubectl.read_text())["deleted"][-1] == merge_name


def test_k8s_follows_a_tree_map_then_partial_merges_then_the_merge_and_a_failed_block_deletes_the_merge(
    tmp_path, fake_kubectl, monkeypatch, capsys
):  # fmt: skip
    run, cfg = k8s_run(tmp_path)
    tree = make_plan(run, tree_ranks=2)  # 3 reports past 2: 2 blocks
    monkeypatch.setenv("FAKE_JOB_LOG", "Findings\n  1. the merged analysis\n")
    assert submit_and_follow(k8s_analysis, cfg, ROOT, tree, wait=True) == [f"report: {run / 'report.html'}"]
    map_name, merge_name = k8s_analysis.job_names(tree)
    partial = k8s_analysis.partial_name(tree)
    state = json.loads(fake_kubectl.read_text())
    assert state["jobs"] == [map_name, partial, merge_name] and state["specs"][partial]["completions"] == 2
    asked = [call[2] for call in state["calls"] if call[:2] == ["get", "job"]]
    assert asked.index(map_name) < asked.index(partial) < asked.index(merge_name)  # followed in that order
    assert f"partial merges: Indexed Job {partial}, 3 parts in 2 partial merges of up to 2" in capsys.readouterr().err
    fake_kubectl.unlink()
    monkeypatch.setenv("FAKE_FAILED_INDEXES", "1")
    monkeypatch.setenv("FAKE_FAILED_JOB", "nsyskit-partial-")
    with pytest.raises(JobError, match=rf"^the partial merges \(Indexed Job {partial}\) failed: block\(s\) 1 of 2; .*"
                       rf"fix: read the logs; the parts merge without the tree: 'invoke analyze-merge {run / 'analysis-parts'}'"):  # fmt: skip
        submit_and_follow(k8s_analysis, cfg, ROOT, tree, wait=True)
    assert json.loads(fake_kubectl.read_text())["deleted"][-1] == merge_name


@pytest.mark.parametrize("how", [["--tree-ranks", "8"], []])
def test_the_command_renders_the_tree_past_the_flag_or_the_setting_and_refuses_the_flag_alone(tmp_path, how):
    run = tmp_path / "fsx" / "run"
    run.mkdir(parents=True)
    for rank in range(12):
        (run / f"rank_{rank}.sqlite").write_bytes(b"")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSYSKIT_")}
    env |= {"NSYSKIT_SLURM_SHARED_DIR": str(tmp_path / "fsx"), "NSYSKIT_SLURM_MODE": "host"}
    env |= {} if how else {"NSYSKIT_ANALYZE_TREE_RANKS": "8"}  # the typed setting, no flag
    nsyskit = [sys.executable, "-m", "nsyskit", "analyze", str(run)]
    done = subprocess.run([*nsyskit, "--slurm", "--dry-run", *how], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"rendered {run / 'analysis-jobs' / 'partial.sbatch'} (nothing submitted)" in done.stdout
    assert "--array=0-1" in (run / "analysis-jobs" / "partial.sbatch").read_text()  # 12 reports past 8: 2 blocks
    if how:
        alone = subprocess.run([*nsyskit, *how], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert alone.returncode != 0 and "--tree-ranks go with --slurm or --k8s" in alone.stderr
