"""The Slurm renderer: golden sbatch scripts (pyxis, host), shellcheck and bash -n on every variant, one renderer.

Golden files are compared, never rewritten, unless NSYSKIT_REGEN_GOLDEN=1 is set by a person on purpose.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from fixtures.golden import assert_matches_golden

from nsyskit import hostpkgs, slurm, targets
from nsyskit.config import load_config
from nsyskit.errors import ConfigErrors, NsyskitError
from nsyskit.jobdir import find_job_dir, read_record
from nsyskit.ranks import launch
from nsyskit.slurm import render

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data" / "golden" / "slurm"
JOB_DIR = Path("/fsx/nsyskit/jobs/slurm-golden")
ECR = "123456789012.dkr.ecr.us-west-2.amazonaws.com"

# name -> (profile, overrides): the committed .env (GPU + EFA, Pyxis pulling from ECR), a .sqsh variant, host mode on CPU.
VARIANTS = {
    "pyxis": (None, {"REGISTRY": ECR}),
    "pyxis-sqsh": (None, {"REGISTRY": ECR, "SLURM_CONTAINER_IMAGE": "sqsh", "NODES": "4", "SLURM_PARTITION": "p5",
                          "SLURM_ACCOUNT": "ml-infra", "SLURM_TIME_LIMIT": "30", "SLURM_EXCLUSIVE": "false",
                          "SLURM_CONTAINER_MOUNTS": "/data:/data:ro", "PROFILE_RANKS": "local0", "SLURM_MPI": "pmi2"}),
    "host": ("local-cpu", {"SLURM_MODE": "host", "NODES": "2", "EFA_PER_NODE": "1", "EFA_METRICS": "true"}),
    # WORKLOAD=nccl-tests: one srun per test (pmix while SLURM_MPI keeps its default); host mode with one test.
    "pyxis-nccl-tests": (None, {"REGISTRY": ECR, "WORKLOAD": "nccl-tests",
                                "NCCL_TESTS": "all_reduce_perf -b 8 -e 2G -f 2 -g 1; alltoall_perf -b 1M -e 1G -f 2 -g 1"}),
    "host-nccl-tests": (None, {"SLURM_MODE": "host", "WORKLOAD": "nccl-tests", "SLURM_MPI": "pmi2", "EFA_PER_NODE": "4"}),
    # WORKLOAD=command: the user's script from the shared file system, MOUNTS added to Pyxis' mounts.
    "pyxis-command": (None, {"REGISTRY": ECR, "WORKLOAD": "command", "PROFILE_STEPS": "20-25",
                             "COMMAND": "env OMP_NUM_THREADS=4 python3 /code/train.py --config /code/mine.yaml --lr 3e-4",
                             "MOUNTS": "/fsx/code:/code:ro,/fsx/data:/data", "SLURM_CONTAINER_MOUNTS": "/scratch:/scratch"}),
}  # fmt: skip


def config(variant: str, **more: str):
    """The config of a variant from this repository's .env and profiles (the process environment left out)."""
    profile, overrides = VARIANTS[variant]
    return load_config(ROOT, profile=profile, overrides={**overrides, **more}, environ={})


def script(variant: str, **more: str) -> str:
    return render.render_script(config(variant, **more), ROOT, JOB_DIR)


@pytest.fixture(scope="module")
def shellcheck() -> str:
    """Debian's shellcheck, installed when missing (a fresh CI machine has none)."""
    if not shutil.which("shellcheck"):
        hostpkgs.install("shellcheck")
    return shutil.which("shellcheck")


@pytest.mark.parametrize("variant", ["pyxis", "host", "pyxis-nccl-tests", "host-nccl-tests", "pyxis-command"])
def test_golden_script(variant):
    assert_matches_golden({f"{variant}.sbatch": script(variant)}, GOLDEN / variant)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_script_passes_shellcheck_and_bash_n(variant, shellcheck, tmp_path):
    path = tmp_path / f"{variant}.sbatch"
    path.write_text(script(variant))
    checked = subprocess.run([shellcheck, "--shell=bash", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    parsed = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert parsed.returncode == 0, parsed.stderr


def sbatch_options(text: str) -> dict[str, str]:
    return dict(re.findall(r"^#SBATCH --([\w-]+)(?:=(\S+))?$", text, re.M))


def srun_words(text: str) -> list[str]:
    """The (first) srun command of a script as the shell would split it: up to its last continued line."""
    lines = text[text.index("srun ") :].splitlines()
    end = next(i for i, line in enumerate(lines) if not line.endswith("\\"))
    return shlex.split(" ".join(line.removesuffix("\\") for line in lines[: end + 1]))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_task_runs_launch_rank_command(variant):
    """The per-rank command comes from nsyskit.ranks.launch (one renderer), last on the srun line: one srun per step."""
    cfg = config(variant)
    report_dir = "/reports" if cfg.slurm_mode == "pyxis" else str(JOB_DIR / "reports")
    sruns = [srun_words("srun " + chunk) for chunk in script(variant).split("\nsrun ")[1:]]
    steps = launch.steps(cfg, report_dir)
    assert len(sruns) == len(steps)
    for words, step in zip(sruns, steps, strict=True):
        assert words[-len(step.rank_command) :] == step.rank_command
    if cfg.workload == "ddp":
        assert steps[0].rank_command == launch.rank_command(cfg)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_wrapper_environment_is_exported(variant):
    cfg = config(variant)
    report_dir = "/reports" if cfg.slurm_mode == "pyxis" else str(JOB_DIR / "reports")
    text = script(variant)
    for key, value in launch.wrapper_env(cfg, report_dir=report_dir, launcher="slurm").items():
        assert f"export {key}={shlex.quote(value)}\n" in text


def test_sbatch_header_follows_the_config():
    opts = sbatch_options(script("pyxis-sqsh"))
    assert opts["nodes"] == "4" and opts["ntasks-per-node"] == "8" and opts["gpus-per-node"] == "8"
    assert opts["partition"] == "p5" and opts["account"] == "ml-infra" and opts["time"] == "30"
    assert "exclusive" not in opts
    assert opts["output"] == f"{JOB_DIR}/slurm-%j.out" and opts["chdir"] == str(JOB_DIR)
    host = sbatch_options(script("host"))
    assert "gpus-per-node" not in host and "exclusive" in host and "partition" not in host


def test_pyxis_options_efa_and_nccl_environment():
    text = script("pyxis")
    words = srun_words(text)
    assert f"--container-image={ECR}#nsyskit:latest" in words
    assert f"--container-mounts={JOB_DIR}/reports:/reports,/fsx:/fsx" in words
    assert "--no-container-remap-root" in words and "--mpi=none" in words  # the example needs no MPI plugin
    for line in ("export FI_PROVIDER=efa", "export FI_EFA_USE_DEVICE_RDMA=1", "export NCCL_DEBUG=INFO",
                 "export NSYSKIT_EFA_METRICS=1", "export NSYSKIT_LAUNCHER=slurm", "export NSYSKIT_REPORT_DIR=/reports"):  # fmt: skip
        assert line in text
    assert "export NCCL_DEBUG_FILE" not in text  # the wrapper sets one per rank, named like the rank's report
    assert (
        "export NSYSKIT_REPORT_NAME='nsyskit_%q{SLURM_JOB_ID}_node_%q{SLURM_NODEID}_rank_%q{SLURM_PROCID}_%q{NSYSKIT_HOST}'"
        in text
    )


def test_sqsh_variant_runs_the_enroot_import_file_with_extra_mounts():
    words = srun_words(script("pyxis-sqsh"))
    assert "--container-image=/fsx/enroot/nsyskit+latest.sqsh" in words
    assert f"--container-mounts={JOB_DIR}/reports:/reports,/fsx:/fsx,/data:/data:ro" in words
    assert "--mpi=pmi2" in words
    explicit = srun_words(script("pyxis-sqsh", SLURM_SQSH="/lustre/img/k.sqsh"))
    assert "--container-image=/lustre/img/k.sqsh" in explicit


def test_host_mode_has_no_container_and_writes_reports_into_the_job_folder():
    text = script("host")
    assert "--container" not in text
    assert f"export NSYSKIT_REPORT_DIR={JOB_DIR}/reports" in text
    assert "export NCCL_DEBUG" not in text and "FI_PROVIDER" not in text  # CPU run: gloo, no NCCL/EFA environment


def test_registry_image_needs_a_registry(tmp_path):
    with pytest.raises(ConfigErrors, match="SLURM_CONTAINER_IMAGE.*REGISTRY is empty"):
        targets.get("slurm").validate(config("pyxis", REGISTRY="", SLURM_SHARED_DIR=str(tmp_path)), tmp_path)
    targets.get("slurm").validate(config("host", REGISTRY="", SLURM_SHARED_DIR=str(tmp_path)), tmp_path)  # pulls nothing


def test_registry_endpoint_is_where_nodes_pull_from():
    words = srun_words(script("pyxis", REGISTRY_ENDPOINT="mirror.example.com:5000"))
    assert "--container-image=mirror.example.com:5000#nsyskit:latest" in words


def test_job_folder_with_blanks_is_refused(tmp_path):
    with pytest.raises(ConfigErrors, match="blanks"):
        targets.get("slurm").validate(config("host"), tmp_path / "my project")


@pytest.mark.parametrize(
    ("key", "value"),
    [("SLURM_TIME_LIMIT", "1h"), ("SLURM_MODE", "docker"), ("SLURM_CONTAINER_MOUNTS", "data:/data"),
     ("SLURM_SHARED_DIR", "fsx"), ("SLURM_CONTAINER_IMAGE", "not an image"), ("SLURM_SQSH", "/fsx/x.tar"),
     ("SLURM_PARTITION", "p5 p4"), ("SLURM_SUBMIT_PREFIX", "ssh 'login")],
)  # fmt: skip
def test_bad_slurm_values_name_the_key(key, value):
    with pytest.raises(ConfigErrors) as caught:
        config("pyxis", **{key: value})
    assert caught.value.errors[0].key == key and "fix:" in str(caught.value)


def test_dry_run_renders_into_a_fresh_job_folder_and_records_it(tmp_path):
    shutil.copytree(ROOT / "slurm", tmp_path / "slurm")
    cfg = config("host", SLURM_SHARED_DIR=str(tmp_path))
    first = targets.deploy(targets.get("slurm"), cfg, tmp_path, dry_run=True).job
    second = targets.deploy(targets.get("slurm"), cfg, tmp_path, dry_run=True).job
    assert first.job_dir != second.job_dir and not second.submitted and second.job_id == ""
    script_path = second.job_dir / "job.sbatch"
    assert second.files == [script_path] and os.access(script_path, os.X_OK)
    assert (second.job_dir / "reports").is_dir()
    assert script_path.read_text() == render.render_script(cfg, tmp_path, second.job_dir)
    assert find_job_dir(tmp_path, "slurm") == second.job_dir  # the last job is the default
    assert read_record(second.job_dir)["mode"] == "host"
    assert second.lines[-1] == f"dry run: nothing submitted; submit with 'sbatch {script_path}'"
    with pytest.raises(NsyskitError, match="dry-run"):
        slurm.status(cfg, tmp_path, None)


def test_a_dry_run_off_the_cluster_renders_prints_and_warns_what_a_submit_would_refuse(tmp_path):
    # A laptop: SLURM_SHARED_DIR (the cluster's /fsx) is not here, nor the .sqsh. The preview still renders.
    shutil.copytree(ROOT / "slurm", tmp_path / "slurm")
    cfg = config("pyxis", SLURM_SHARED_DIR=str(tmp_path / "fsx"), SLURM_CONTAINER_IMAGE="sqsh")
    with pytest.raises(ConfigErrors) as refused:  # a real submit refuses, before writing anything
        targets.deploy(targets.get("slurm"), cfg, tmp_path)
    assert not (tmp_path / "jobs").exists()
    with pytest.raises(ConfigErrors):
        targets.validate_targets(cfg, tmp_path, slurm=True)  # what 'invoke config --check --slurm' runs
    result = targets.deploy(targets.get("slurm"), cfg, tmp_path, dry_run=True)
    script_path = result.job.job_dir / "job.sbatch"
    assert script_path.read_text().rstrip("\n") in result.lines and not result.job.submitted
    assert result.warnings == [f"a real submit would refuse: {problem}" for problem in refused.value.errors]
    assert [w.split("=")[0] for w in result.warnings] == ["a real submit would refuse: SLURM_SHARED_DIR",
                                                          "a real submit would refuse: SLURM_CONTAINER_IMAGE"]
    assert all("; fix: " in warning for warning in result.warnings)
    assert result.lines[-1] == f"dry run: nothing submitted; submit with 'sbatch {script_path}' once the 2 warning(s) are fixed"


def test_a_dry_run_the_k8s_checks_refuse_is_still_refused(tmp_path):
    # Only Slurm previews despite its checks (they are about the cluster's paths); other targets keep refusing.
    cfg = load_config(ROOT, overrides={"GPUS_PER_NODE": "3", "REGISTRY": ECR}, environ={})
    with pytest.raises(ConfigErrors, match="GPUS_PER_NODE"):
        targets.deploy(targets.get("k8s"), cfg, tmp_path, dry_run=True)


# --- every image Pyxis takes; what the nodes need, checked before sbatch ----------------------------------------------


@pytest.mark.parametrize(
    "image",
    ["dockerd://nsyskit:latest", "podman://nsyskit:v1", "docker://nvcr.io#nvidia/pytorch:25.01-py3",
     "docker://user@123456789012.dkr.ecr.us-west-2.amazonaws.com#nsyskit:v3", "nvcr.io#nvidia/pytorch:25.01-py3",
     "nsyskit:latest", "/fsx/enroot/nsyskit+latest.sqsh", f"nsyskit@sha256:{'a' * 64}", "registry", "sqsh"],
)  # fmt: skip
def test_every_image_form_pyxis_takes_is_accepted_and_passed_on(image):
    words = srun_words(script("pyxis", SLURM_CONTAINER_IMAGE=image))
    expected = {"registry": f"{ECR}#nsyskit:latest", "sqsh": "/fsx/enroot/nsyskit+latest.sqsh"}.get(image, image)
    assert f"--container-image={expected}" in words


@pytest.mark.parametrize("image", ["http://nsyskit:latest", "dockerd://", "docker://Nsyskit", "two words", "oci://x"])
def test_an_image_pyxis_cannot_take_is_one_line_listing_the_forms(image):
    with pytest.raises(ConfigErrors, match=r"SLURM_CONTAINER_IMAGE=.*is not a container image for Pyxis; fix: .*dockerd://"):
        config("pyxis", SLURM_CONTAINER_IMAGE=image)


def test_what_the_nodes_need_is_checked_before_submitting_all_at_once(tmp_path):
    project = tmp_path / "home" / "me" / "project"
    project.mkdir(parents=True)
    cfg = config("pyxis", SLURM_SHARED_DIR=str(tmp_path / "fsx"), SLURM_CONTAINER_IMAGE="sqsh")
    with pytest.raises(ConfigErrors) as missing:
        targets.get("slurm").validate(cfg, project)
    text = str(missing.value)
    assert "SLURM_SHARED_DIR=" in text and "does not exist on this host" in text
    assert "SLURM_CONTAINER_IMAGE='sqsh'" in text and "nsyskit+latest.sqsh, which does not exist" in text
    assert "dockerd://nsyskit:latest" in text  # the fix names the local image route
    (tmp_path / "fsx").mkdir()
    with pytest.raises(ConfigErrors, match=r"does not hold the project folder .*/home/me/project"):
        targets.get("slurm").validate(config("host", SLURM_SHARED_DIR=str(tmp_path / "fsx")), project)
    inside = tmp_path / "fsx" / "project"
    inside.mkdir()
    image = tmp_path / "fsx" / "nsyskit.sqsh"
    image.write_bytes(b"hsqs")
    targets.get("slurm").validate(config("pyxis", SLURM_SHARED_DIR=str(tmp_path / "fsx"),
                                         SLURM_CONTAINER_IMAGE=str(image)), inside)  # fmt: skip
    # Submitting from elsewhere (ssh login-node): this host's paths say nothing about the cluster's.
    targets.get("slurm").validate(config("pyxis", SLURM_SHARED_DIR="/nowhere", SLURM_CONTAINER_IMAGE="sqsh",
                                         SLURM_SUBMIT_PREFIX="ssh login-node"), project)  # fmt: skip


def test_the_job_records_the_image_that_runs(tmp_path):
    # run.json's image is what Pyxis ran (collect reads it from job.json): the URI or .sqsh, not IMAGE:TAG.
    shutil.copytree(ROOT / "slurm", tmp_path / "slurm")
    for image in ("dockerd://nsyskit:latest", "/fsx/enroot/nsyskit+latest.sqsh"):
        cfg = config("pyxis", SLURM_CONTAINER_IMAGE=image)
        script = slurm.render_job(cfg, tmp_path)
        assert read_record(script.parent)["image"] == image
    cfg = config("pyxis", SLURM_CONTAINER_IMAGE="registry")
    assert read_record(slurm.render_job(cfg, tmp_path).parent)["image"] == f"{ECR}#nsyskit:latest"
