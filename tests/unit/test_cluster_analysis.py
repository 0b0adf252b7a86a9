"""analyze --slurm's plan and scripts: golden map/merge scripts (Pyxis, host), shellcheck, the array's shape, the
checks made before submitting. The jobs themselves run on the suite's real Slurm (tests/integration/test_slurm.py).

Golden files are compared, never rewritten, unless NSYSKIT_REGEN_GOLDEN=1 is set by a person on purpose.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from fixtures.golden import assert_matches_golden

from nsyskit import hostpkgs
from nsyskit.clusteranalysis import MAX_ELEMENTS, AnalysisPlan, clear_parts, elements_for, make_plan, parts_done
from nsyskit.config import load_config
from nsyskit.errors import UsageError
from nsyskit.slurm import analysis, scheduler

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data" / "golden" / "slurm-analysis"
RUN = Path("/fsx/nsyskit/reports/run-1")
ECR = "123456789012.dkr.ecr.us-west-2.amazonaws.com"

# name -> (reports, plan options, settings): a 1,024-rank run in Pyxis from ECR, and 16 ranks in host mode.
VARIANTS = {
    "pyxis": (1024, {"max_parallel": 32, "timeline": True, "timeline_max_events": 200000},
              {"REGISTRY": ECR, "SLURM_PARTITION": "cpu", "SLURM_ACCOUNT": "ml-infra"}),
    "host": (16, {"straggler_pct": 10.0, "strict": True},
             {"SLURM_MODE": "host", "SLURM_NSYSKIT": "/fsx/venv/bin/nsyskit", "SLURM_TIME_LIMIT": "30"}),
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


def test_pyxis_runs_the_image_with_the_shared_file_system_and_host_mode_the_nodes_nsyskit():
    pyxis = analysis.scripts(config("pyxis"), ROOT, plan("pyxis"))
    assert f"--container-image='{ECR}#nsyskit:latest'" in pyxis["map.sbatch"]  # quoted: '#' starts a comment
    assert "--container-mounts=/fsx:/fsx" in pyxis["merge.sbatch"] and "  nsyskit analyze-merge " in pyxis["merge.sbatch"]
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


def test_array_task_ids_of_scontrol_and_sacct():
    assert scheduler.task_ids("4") == [4]
    assert scheduler.task_ids("3-6%2") == [3, 4, 5, 6]
    assert scheduler.task_ids("[1,3,5-7]") == [1, 3, 5, 6, 7]
    assert scheduler.task_ids("[0-2%4]") == [0, 1, 2]
