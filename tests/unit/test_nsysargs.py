"""One decision for nsys (Container-Root/nsyskit/nsysargs.py): which ranks, which arguments, for the wrapper and the injectors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsyskit.errors import ConfigErrors
from nsyskit.k8s import render
from nsyskit.ranks import launch, nsysargs
from tests.unit.k8s_variants import ECR, ROOT, config
from tests.unit.test_nsys_wrapper import load_wrapper

wrapper = load_wrapper()


def test_the_host_and_the_image_share_one_file():
    assert Path(nsysargs.__file__).resolve() == (ROOT / "Container-Root/nsyskit/nsysargs.py").resolve()
    assert Path(wrapper.nsysargs.__file__).resolve() == Path(nsysargs.__file__).resolve()


@pytest.mark.parametrize(
    ("selection", "rank", "local_rank", "profiled"),
    [
        ("all", 3, 1, True), ("", 3, 1, True), ("none", 0, 0, False),
        ("local0", 4, 0, True), ("local0", 5, 1, False),
        ("0,3", 3, 1, True), ("0, 3", 2, 0, False),
    ],
)  # fmt: skip
def test_which_ranks_are_profiled(selection, rank, local_rank, profiled):
    assert nsysargs.should_profile(selection, rank, local_rank) is profiled


def test_a_bad_rank_selection_is_refused():
    with pytest.raises(ValueError, match="NSYSKIT_PROFILE_RANKS"):
        nsysargs.should_profile("odd", 1, 1)


@pytest.mark.parametrize(
    ("env", "local_rank", "version", "applied", "note"),
    [
        ({}, 0, (2024, 6, 1), False, "not requested"),
        ({"NSYSKIT_EFA_METRICS": "1"}, 1, (2024, 6, 1), False, "skipped: only local rank 0"),
        ({"NSYSKIT_EFA_METRICS": "1"}, 0, (2022, 4, 2, 1), False, "skipped: nsys 2022.4.2.1 has no efa_metrics"),
        ({"NSYSKIT_EFA_METRICS": "1"}, 0, (2024, 4), True, "applied"),
        ({"NSYSKIT_EFA_METRICS": "true"}, 0, None, True, "applied"),
    ],
)
def test_efa_metrics_only_on_local_rank_0_with_a_capable_nsys(env, local_rank, version, applied, note):
    decided, why = nsysargs.efa_decision(env, local_rank, version)
    assert decided is applied and why.startswith(note)
    args = nsysargs.profile_args(env, "/reports/x", efa=decided)
    assert (args[-2:] == ["--enable", "efa_metrics"]) is applied


# The settings an injector can honour, each changing the arguments: the injector must pass exactly the wrapper's.
INJECTOR_SETTINGS = [
    {},
    {"NSYS_SAMPLE": "process-tree", "NSYS_TRACE": "cuda,nvtx"},
    {"PROFILE_STEPS": "", "PROFILE_DELAY": "5", "PROFILE_DURATION": "30"},
    {"NSYS_EXTRA_ARGS": "--cuda-memory-usage=true -x true"},
]


@pytest.mark.parametrize("injector", ["nsight-operator", "devtools-sidecar-injector"])
@pytest.mark.parametrize("settings", INJECTOR_SETTINGS)
def test_injector_arguments_are_the_wrappers_for_the_same_settings(injector, settings):
    cfg = config("default", K8S_PROFILER=injector, EFA_METRICS="false", **settings)
    env = launch.wrapper_env(cfg)
    rank = {"NSYSKIT_RANK": "1", "NSYSKIT_LOCAL_RANK": "1", "NSYSKIT_NODE": "0", "NSYSKIT_HOST": "h", "NSYSKIT_JOB_ID": "j"}
    wrapped = wrapper.nsys_command(env, rank, ["python3", launch.EXAMPLE])
    injected = render.injector_nsys_args(cfg).split()
    output = next(arg for arg in injected if arg.startswith("--output="))
    assert "%{OMPI_COMM_WORLD_RANK}" in output  # per-rank names, filled in by nsys and the injector
    same_output = [output if arg.startswith("--output=") else arg for arg in wrapped[1:-2]]
    assert injected == same_output
    assert ("--cpuctxsw=none" in injected) is (cfg.nsys_sample == "none")


@pytest.mark.parametrize(
    ("settings", "key"),
    [({"PROFILE_RANKS": "local0"}, "PROFILE_RANKS"), ({"PROFILE_RANKS": "0,1"}, "PROFILE_RANKS"),
     ({"EFA_METRICS": "true", "EFA_PER_NODE": "4"}, "EFA_METRICS")],
)  # fmt: skip
def test_an_injector_refuses_the_settings_it_cannot_honour(settings, key):
    with pytest.raises(ConfigErrors) as caught:
        config("default", K8S_PROFILER="nsight-operator", **{"EFA_METRICS": "false", **settings})
    text = str(caught.value)
    assert key in text and "K8S_PROFILER=wrapper" in text
    config("default", K8S_PROFILER="wrapper", **settings)  # the wrapper honours them


def test_config_check_names_the_setting_an_injector_cannot_honour(tmp_path):
    environ = {k: v for k, v in os.environ.items() if k != "NSYSKIT_PROFILE"}
    environ.update(NSYSKIT_REGISTRY=ECR, NSYSKIT_K8S_PROFILER="devtools-sidecar-injector",
                   NSYSKIT_PROFILE_RANKS="local0", NSYSKIT_EFA_METRICS="false")  # fmt: skip
    result = subprocess.run([sys.executable, "-m", "invoke", "config", "--check"], cwd=ROOT, env=environ,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode != 0
    assert "PROFILE_RANKS='local0'" in result.stderr or "PROFILE_RANKS=local0" in result.stderr, result.stderr
    assert "set PROFILE_RANKS=all, or K8S_PROFILER=wrapper" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("host_folder", ["host-linux-x64", "linux-desktop-glibc_2_11_3-x64"])
def test_the_importer_beside_nsys_is_found_in_either_layout(tmp_path, host_folder):
    """nsys's own installs keep QdstrmImporter in host-linux-x64; the nsys inside Nsight Compute 2025.3 (seen on an
    H100 machine) in linux-desktop-glibc_2_11_3-x64: without it a rank's report stays a .qdstrm."""
    (tmp_path / "target-linux-x64").mkdir()
    nsys = tmp_path / "target-linux-x64" / "nsys"
    importer = tmp_path / host_folder / "QdstrmImporter"
    importer.parent.mkdir()
    for path in (nsys, importer):
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    assert nsysargs.find_importer(str(nsys)) == str(importer)
    importer.chmod(0o644)  # not executable: not an importer
    assert nsysargs.find_importer(str(nsys)) != str(importer)
