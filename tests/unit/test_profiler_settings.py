"""PROFILER and NCU_* settings: parsing, and what every launcher's rendering carries to the wrapper and the example."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nsyskit.config import load_config
from nsyskit.errors import ConfigErrors
from nsyskit.image.args import build_args
from nsyskit.image.assets import Assets
from nsyskit.k8s import render as k8s_render
from nsyskit.ranks import launch
from nsyskit.slurm import render as slurm_render

ROOT = Path(__file__).resolve().parents[2]


def config(profile: str | None = None, **environ: str):
    return load_config(ROOT, profile=profile, environ={f"NSYSKIT_{key}": value for key, value in environ.items()})


def test_defaults_keep_nsys_and_the_documented_ncu_settings():
    cfg = config()
    assert cfg.profiler == "nsys"
    assert (cfg.ncu_set, cfg.ncu_kernel, cfg.ncu_launch_skip, cfg.ncu_launch_count, cfg.ncu_replay_mode) == (
        "roofline", "", 0, 20, "kernel",
    )  # fmt: skip
    local = config("local-cpu")
    assert (local.install_ncu, local.ncu_source, local.ncu_version) == (True, "debian", "2022.3.0")


@pytest.mark.parametrize(
    ("key", "value", "fix"),
    [("PROFILER", "vtune", "nsys, ncu, torch"), ("NCU_SET", "roof", "roofline, detailed, full"),
     ("NCU_LAUNCH_COUNT", "-1", ""), ("NCU_REPLAY_MODE", "app-range", "kernel, application, range"),
     ("NCU_SOURCE", "pip", "nvidia, nvidia-apt, debian, base")],
)  # fmt: skip
def test_bad_values_name_the_key_the_value_and_the_choices(key, value, fix):
    with pytest.raises(ConfigErrors) as caught:
        config(**{key: value})
    message = caught.value.one_line()
    assert key in message and value in message and fix in message


def test_ncu_and_torch_need_the_wrapper_not_an_nsys_injector():
    with pytest.raises(ConfigErrors) as caught:
        config(PROFILER="torch", K8S_PROFILER="nsight-operator")
    message = caught.value.one_line()
    assert "PROFILER='torch'" in message and "K8S_PROFILER=wrapper" in message
    assert config(PROFILER="torch").k8s_profiler == "wrapper"


def test_nsys_runs_render_exactly_as_before():
    env = launch.wrapper_env(config())
    assert not any(key.startswith(("NSYSKIT_PROFILER", "NSYSKIT_NCU")) for key in env)
    assert "--torch-profile" not in launch.rank_command(config())


def test_ncu_settings_reach_the_wrapper_through_every_launcher():
    cfg = config(PROFILER="ncu", NCU_KERNEL="regex:gemm", NCU_SET="full", NCU_LAUNCH_SKIP="5", NCU_LAUNCH_COUNT="3")
    env = launch.wrapper_env(cfg)
    assert env["NSYSKIT_PROFILER"] == "ncu"
    assert (env["NSYSKIT_NCU_KERNEL"], env["NSYSKIT_NCU_SET"], env["NSYSKIT_NCU_LAUNCH_SKIP"],
            env["NSYSKIT_NCU_LAUNCH_COUNT"], env["NSYSKIT_NCU_REPLAY_MODE"]) == ("regex:gemm", "full", "5", "3", "kernel")  # fmt: skip
    mpirun = launch.mpirun_command(cfg, master_addr="worker-0")
    assert "NSYSKIT_PROFILER=ncu" in mpirun and "NSYSKIT_NCU_KERNEL=regex:gemm" in mpirun
    sbatch = slurm_render.render_script(cfg.replace(slurm_mode="host"), ROOT, Path("/fsx/nsyskit/jobs/j1"))
    assert "NSYSKIT_PROFILER=ncu" in sbatch and "NSYSKIT_NCU_SET=full" in sbatch
    mpijob = k8s_render.render(cfg, "j1", ROOT)["mpijob.yaml"]
    assert "NSYSKIT_PROFILER=ncu" in mpijob and "NSYSKIT_NCU_LAUNCH_SKIP=5" in mpijob


def test_torch_runs_add_the_examples_flag_and_tell_the_wrapper():
    cfg = config(PROFILER="torch")
    assert launch.rank_command(cfg)[-1] == "--torch-profile"
    assert launch.wrapper_env(cfg)["NSYSKIT_PROFILER"] == "torch"
    assert launch.torchrun_command(cfg)[-1] == "--torch-profile"


def test_the_image_gets_the_ncu_build_args():
    args = build_args(config("local-cpu"), Assets(), "http://assets")
    assert (args["INSTALL_NCU"], args["NCU_SOURCE"], args["NCU_VERSION"]) == ("true", "debian", "2022.3.0")
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert all(f"ARG {key}=" in dockerfile for key in ("INSTALL_NCU", "NCU_SOURCE", "NCU_VERSION", "NCU_URL", "NCU_SHA256"))


@pytest.mark.parametrize("task", ["run", "deploy"])
def test_the_profiler_flag_is_on_run_and_deploy(task):
    done = subprocess.run([sys.executable, "-m", "invoke", "--help", task], cwd=ROOT, capture_output=True, text=True)
    text = " ".join(done.stdout.split())  # invoke wraps the help column
    assert done.returncode == 0 and "--profiler" in text and "ncu (Nsight Compute per kernel)" in text


def test_the_profiler_flag_overrides_the_setting(tmp_path):
    # 'invoke deploy --slurm --dry-run --profiler torch' renders the batch script with the torch profiler.
    # The checkout as the project on the shared file system (its parent: SLURM_SHARED_DIR holds the project).
    env = {"PATH": "/usr/bin:/bin", "NSYSKIT_SLURM_MODE": "host", "NSYSKIT_SLURM_SHARED_DIR": str(ROOT.parent)}
    done = subprocess.run([sys.executable, "-m", "invoke", "deploy", "--slurm", "--dry-run", "--profiler", "torch"],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    script = Path(re.search(r"rendered (\S+job\.sbatch)", done.stdout).group(1))
    try:
        text = script.read_text()
        assert "NSYSKIT_PROFILER=torch" in text and "--torch-profile" in text
    finally:
        shutil.rmtree(script.parent)


def test_ncu_on_gpus_gets_the_gpu_counter_capability_and_nothing_else_changes():
    assert k8s_render.capabilities(config(PROFILER="ncu", EFA_PER_NODE="0")) == ["SYS_ADMIN"]
    assert k8s_render.capabilities(config(PROFILER="ncu", EFA_PER_NODE="0", GPUS_PER_NODE="0")) == []
    assert k8s_render.capabilities(config(PROFILER="torch", EFA_PER_NODE="0")) == []
