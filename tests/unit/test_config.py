"""The configuration: layering, typed values, and every validation rule with its one-line message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nsyskit.config import Config, key_of, load_config, settings
from nsyskit.config.parse import host_problem, image_reference_problem
from nsyskit.config.rules import NSYS_PINNED
from nsyskit.errors import ConfigErrors

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project root with a profiles/ folder."""
    (tmp_path / "profiles").mkdir()
    return tmp_path


def load(root: Path, profile: str | None = None, overrides=None, **environ: str) -> Config:
    return load_config(root, profile=profile, overrides=overrides, environ=environ)


def problems(root: Path, **environ: str) -> list:
    with pytest.raises(ConfigErrors) as caught:
        load(root, **environ)
    return caught.value.errors


# --- layering ---------------------------------------------------------------------------------


def test_defaults_apply_without_any_file(project):
    cfg = load(project)
    assert cfg.install_mpi is True and cfg.nodes == 2 and cfg.profile_steps == (10, 15)
    assert set(cfg.sources.values()) == {"default"}


def test_precedence_defaults_env_file_profile_environment_flags(project):
    (project / ".env").write_text("NODES=3\nSTEPS=30\nTAG=from-env-file\nIMAGE=mine\n")
    (project / "profiles" / "p.env").write_text("NODES=4\nSTEPS=40\nTAG=from-profile\n")
    cfg = load(project, profile="p", overrides={"NODES": 6}, STEPS="50", TAG="from-environment")
    assert (cfg.nodes, cfg.sources["NODES"]) == (6, "flag")
    assert (cfg.steps, cfg.sources["STEPS"]) == (50, "environment")
    assert (cfg.tag, cfg.sources["TAG"]) == ("from-environment", "environment")
    assert (cfg.image, cfg.sources["IMAGE"]) == ("mine", ".env")
    assert cfg.sources["AWS_REGION"] == "default"


def test_profile_overrides_env_file_and_is_named_as_source(project):
    (project / ".env").write_text("INSTALL_EFA=true\n")
    (project / "profiles" / "cpu.env").write_text("INSTALL_EFA=false\nINSTALL_TESTS=false\nOPENMPI_SOURCE=distro\n")
    cfg = load(project, profile="cpu")
    assert cfg.install_efa is False and cfg.sources["INSTALL_EFA"] == "profiles/cpu.env"


def test_profile_can_be_chosen_by_environment_variable(project):
    (project / "profiles" / "cpu.env").write_text("GPUS_PER_NODE=0\n")
    assert load(project, NSYSKIT_PROFILE="cpu").uses_gpu is False


def test_missing_profile_names_the_available_ones(project):
    (project / "profiles" / "local-cpu.env").write_text("")
    with pytest.raises(ConfigErrors, match=r"NSYSKIT_PROFILE='nope'.*no profile file.*use one of: local-cpu"):
        load(project, profile="nope")


@pytest.mark.parametrize("word,expected", [("true", True), ("TRUE", True), ("Yes", True), ("1", True),
                                           ("false", False), ("No", False), ("0", False), ("FaLsE", False)])
def test_booleans_accept_true_false_1_0_yes_no_in_any_case(project, word, expected):
    assert load(project, INSTALL_TESTS="false", INSTALL_EFA="false", OPENMPI_SOURCE="distro",
                INSTALL_MPI=word).install_mpi is expected


def test_values_are_typed(project):
    cfg = load(project, NODES="4", PROCS_PER_NODE="2", PROFILE_RANKS="3, 0,3", PROFILE_STEPS="2 - 5")
    assert cfg.world_size == 8 and cfg.profile_ranks == "0,3" and cfg.profile_steps == (2, 5)


def test_ecr_registry_yields_account_and_region(project):
    cfg = load(project, REGISTRY="123456789012.dkr.ecr.eu-central-1.amazonaws.com", AWS_REGION="eu-central-1")
    assert cfg.ecr == {"account": "123456789012", "region": "eu-central-1"}
    assert cfg.image_ref == "123456789012.dkr.ecr.eu-central-1.amazonaws.com/nsyskit:latest"


def test_non_ecr_registry_is_fine_and_has_no_ecr_facts(project):
    cfg = load(project, REGISTRY="127.0.0.1:5000")
    assert cfg.ecr is None and cfg.image_ref == "127.0.0.1:5000/nsyskit:latest"


def test_empty_step_range_means_whole_run(project):
    assert load(project, PROFILE_STEPS="").profile_steps is None


# --- validation: every rule names key, value and fix -------------------------------------------

BAD = [
    # (environment, key, value, words the fix must contain)
    ({"INSTALL_MPI": "maybe"}, "INSTALL_MPI", "maybe", "true or false"),
    ({"INSTALL_EFA": "on"}, "INSTALL_EFA", "on", "true or false"),
    ({"ECR_SCAN_ON_PUSH": "2"}, "ECR_SCAN_ON_PUSH", "2", "true or false"),
    ({"EFA_METRICS": ""}, "EFA_METRICS", "", "true or false"),
    ({"INSTALL_MPI": "false", "OPENMPI_SOURCE": "distro"}, "INSTALL_EFA", "true", "set INSTALL_MPI=true, or INSTALL_EFA=false"),
    ({"INSTALL_EFA": "false"}, "INSTALL_TESTS", "true", "set INSTALL_EFA=true, or INSTALL_TESTS=false"),
    ({"INSTALL_EFA": "false", "INSTALL_TESTS": "false"}, "OPENMPI_SOURCE", "efa", "OPENMPI_SOURCE=distro"),
    ({"REGISTRY": "https://123456789012.dkr.ecr.us-west-2.amazonaws.com"}, "REGISTRY",
     "https://123456789012.dkr.ecr.us-west-2.amazonaws.com", "no scheme or path"),
    ({"REGISTRY": "registry.example.com/team"}, "REGISTRY", "registry.example.com/team", "no scheme or path"),
    ({"REGISTRY": "bad_host!"}, "REGISTRY", "bad_host!", "host name"),
    ({"REGISTRY": "123456789012.dkr.ecr.us-east-1.amazonaws.com", "AWS_REGION": "us-west-2"}, "AWS_REGION",
     "us-west-2", "set AWS_REGION=us-east-1"),
    ({"AWS_REGION": "oregon"}, "AWS_REGION", "oregon", "us-west-2"),
    ({"NODES": "0"}, "NODES", "0", "1 or more"),
    ({"NODES": "-2"}, "NODES", "-2", "1 or more"),
    ({"PROCS_PER_NODE": "two"}, "PROCS_PER_NODE", "two", "1 or more"),
    ({"STEPS": "1.5"}, "STEPS", "1.5", "1 or more"),
    ({"GPUS_PER_NODE": "-1"}, "GPUS_PER_NODE", "-1", "0 or more"),
    ({"NSYS_DELAY": "5s"}, "NSYS_DELAY", "5s", "0 or more"),
    ({"NSYS_VERSION": "latest"}, "NSYS_VERSION", "latest", "2024.6.1"),
    ({"OPENMPI_VERSION": "4"}, "OPENMPI_VERSION", "4", "dotted release"),
    ({"NCCL_TESTS_VERSION": "main"}, "NCCL_TESTS_VERSION", "main", "dotted release"),
    ({"NSYS_SHA256": "abc123"}, "NSYS_SHA256", "abc123", "sha256sum"),
    ({"EFA_INSTALLER_SHA256": "z" * 64}, "EFA_INSTALLER_SHA256", "z" * 64, "sha256sum"),
    ({"NSYS_SOURCE": "conda"}, "NSYS_SOURCE", "conda", "nvidia, nvidia-apt, debian, base"),
    ({"MODEL_SIZE": "llama"}, "MODEL_SIZE", "llama", "tiny"),
    ({"NSYS_TRACE": "cuda,nvtx,gpu"}, "NSYS_TRACE", "cuda,nvtx,gpu", "cuda,nvtx,osrt"),
    ({"PROFILE_STEPS": "15-10"}, "PROFILE_STEPS", "15-10", "FIRST-LAST"),
    ({"PROFILE_STEPS": "0-3"}, "PROFILE_STEPS", "0-3", "1 <= FIRST"),
    ({"PROFILE_STEPS": "40-60", "STEPS": "50"}, "PROFILE_STEPS", "(40, 60)", "raise STEPS"),
    ({"PROFILE_RANKS": "first"}, "PROFILE_RANKS", "first", "local0"),
    ({"PROFILE_RANKS": "0,16", "NODES": "2", "PROCS_PER_NODE": "8"}, "PROFILE_RANKS", "0,16", "ranks 0-15"),
    ({"IMAGE": "My Image"}, "IMAGE", "My Image", "lower-case"),
    ({"TAG": "-bad"}, "TAG", "-bad", "e.g. latest"),
    ({"BASE_IMAGE": "nvcr.io/nvidia/pytorch:"}, "BASE_IMAGE", "nvcr.io/nvidia/pytorch:", "[registry/]name[:tag]"),
    ({"BASE_IMAGE_SOURCE": "build"}, "BASE_IMAGE_SOURCE", "build", "pull, debootstrap"),
]


@pytest.mark.parametrize("environ,key,value,fix", BAD, ids=[f"{b[1]}={b[2]}" for b in BAD])
def test_bad_value_error_names_key_value_and_fix(project, environ, key, value, fix):
    errors = problems(project, **environ)
    message = next((str(e) for e in errors if e.key == key), None)
    assert message is not None, [str(e) for e in errors]
    assert message.startswith(f"{key}=")
    assert repr(value) in message or value in message
    assert "fix:" in message and fix in message
    assert "\n" not in message


def test_error_says_which_layer_the_bad_value_came_from(project):
    (project / ".env").write_text("NODES=zero\n")
    (error,) = problems(project)
    assert "(from .env)" in str(error)


def test_every_problem_is_reported_at_once(project):
    errors = problems(project, INSTALL_MPI="maybe", NODES="0", NSYS_SHA256="short", TAG="-x")
    assert {e.key for e in errors} == {"INSTALL_MPI", "NODES", "NSYS_SHA256", "TAG"}


def test_both_dependency_rules_are_reported_together(project):
    errors = problems(project, INSTALL_MPI="false", INSTALL_EFA="true", INSTALL_TESTS="true", OPENMPI_SOURCE="distro")
    assert {e.key for e in errors} == {"INSTALL_EFA"}  # TESTS needs EFA, which is on: only EFA->MPI is broken
    errors = problems(project, INSTALL_MPI="false", INSTALL_EFA="false", INSTALL_TESTS="true", OPENMPI_SOURCE="distro")
    assert {e.key for e in errors} == {"INSTALL_TESTS"}


def test_one_line_summary_counts_the_rest(project):
    with pytest.raises(ConfigErrors) as caught:
        load(project, NODES="0", STEPS="0")
    assert re.search(r"and 1 more problem\(s\): run 'invoke config --check'", caught.value.one_line())


# --- did-you-mean -----------------------------------------------------------------------------


def test_misspelt_key_in_env_file_gets_did_you_mean(project):
    (project / ".env").write_text("INSTAL_MPI=true\nNSYS_TRACES=cuda\n")
    cfg = load(project)
    assert "unknown key INSTAL_MPI in .env: did you mean INSTALL_MPI?" in cfg.warnings
    assert "unknown key NSYS_TRACES in .env: did you mean NSYS_TRACE?" in cfg.warnings


def test_unrelated_key_in_profile_is_reported_as_ignored(project):
    (project / "profiles" / "x.env").write_text("COMPLETELY_UNRELATED=1\n")
    (warning,) = load(project, profile="x").warnings
    assert warning == "unknown key COMPLETELY_UNRELATED in profiles/x.env (not a nsyskit setting; ignored)"


def test_misspelt_environment_variable_gets_did_you_mean_but_others_are_left_alone(project):
    cfg = load(project, INSTALL_EFAA="false", HOME="/root", PATH="/bin", AWS_PROFILE="dev")
    assert cfg.warnings == ("unknown environment variable INSTALL_EFAA: did you mean INSTALL_EFA?",)


# --- the committed files ----------------------------------------------------------------------


def test_committed_env_documents_every_setting_with_a_comment_and_nothing_else():
    lines = (ROOT / ".env").read_text().splitlines()
    keys = {}
    for number, line in enumerate(lines):
        if line and not line.startswith("#"):
            key = line.split("=", 1)[0]
            keys[key] = number
            assert lines[number - 1].startswith("# "), f".env: {key} has no comment line above it"
    assert set(keys) == {key_of(f) for f in settings()}


def test_committed_env_and_every_profile_load_cleanly():
    assert load_config(ROOT, environ={}).warnings == ()
    for profile in sorted((ROOT / "profiles").glob("*.env")):
        assert load_config(ROOT, profile=profile.stem, environ={}).warnings == (), profile.name


def test_local_cpu_profile_is_cpu_only_without_efa():
    cfg = load_config(ROOT, profile="local-cpu", environ={})
    assert (cfg.uses_gpu, cfg.install_efa, cfg.install_tests, cfg.install_mpi) == (False, False, False, True)
    assert cfg.base_image_source == "debootstrap" and cfg.nsys_source == "debian"


def test_variables_slurm_sets_inside_an_allocation_get_no_warning(project):
    cfg = load(project, SLURM_JOB_PARTITION="gpu", SLURM_JOB_ACCOUNT="ml", SLURM_TIMELIMIT="60", SLURM_PROCID="0")
    assert cfg.warnings == ()


def test_nsys_pinned_versions_match_the_install_script():
    script = (Path(__file__).resolve().parents[2] / "Container-Root/nsyskit/install/nsys.sh").read_text()
    body = script.split("pinned_deb() {", 1)[1].split("esac", 1)[0]
    assert tuple(re.findall(r"^\s+([0-9][0-9.]*)\)", body, re.M)) == NSYS_PINNED


def test_a_byte_order_mark_and_crlf_lines_are_read_as_plain_settings(tmp_path):
    (tmp_path / ".env").write_bytes(b"\xef\xbb\xbfSTEPS=70\r\nNODES=3\r\n")
    cfg = load_config(tmp_path, environ={})
    assert (cfg.steps, cfg.nodes) == (70, 3) and not cfg.warnings


GOOD_REFERENCES = ["ubuntu", "nvcr.io/nvidia/pytorch:25.01-py3", "localhost:5000/team/app:v1", "[::1]:5000/x:latest",
                   "nsyskit-base:bookworm", "a/b__c/d-e.f", "Registry.Example.com/x", "x@sha256:" + "a" * 64]  # fmt: skip
BAD_REFERENCES = ["https://nvcr.io/x", "nvcr.io//x", "nvcr.io/X/y", "x:", "x:bad tag", "/x", "x/", "a" * 256,
                  "x@sha256:abc", "999.0.0.1:5000/x", "localhost:0/x", "-x"]  # fmt: skip


@pytest.mark.parametrize("reference", GOOD_REFERENCES)
def test_image_references_docker_accepts_are_accepted(reference):
    assert image_reference_problem(reference) is None


@pytest.mark.parametrize("reference", BAD_REFERENCES)
def test_image_references_docker_refuses_are_refused(reference):
    assert image_reference_problem(reference)


@pytest.mark.parametrize(
    ("host", "ok"),
    [("localhost", True), ("127.0.0.1:5000", True), ("[::1]:443", True), ("reg-1.example.com:65535", True),
     ("localhost:65536", False), ("localhost:0", False), ("[::1::2]", False), ("256.1.1.1", False),
     ("localhost:５０００", False), ("-bad.example.com", False)],
)  # fmt: skip
def test_registry_hosts_are_checked_for_port_range_and_ip_addresses(host, ok):
    assert (host_problem(host) is None) == ok
