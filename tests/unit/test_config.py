"""The configuration: layering, typed values, and every validation rule with its one-line message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nsyskit.config import Config, key_of, load_config, settings
from nsyskit.config.envfile import parse
from nsyskit.config.parse import host_problem, image_reference_problem
from nsyskit.config.rules import NSYS_PINNED
from nsyskit.config.schema import SECTION_TITLES
from nsyskit.config.template import render_template
from nsyskit.errors import ConfigErrors

ROOT = Path(__file__).resolve().parents[2]
KEYS = {key_of(f) for f in settings()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project root with a profiles/ folder."""
    (tmp_path / "profiles").mkdir()
    return tmp_path


def load(root: Path, profile: str | None = None, overrides=None, **environ: str) -> Config:
    """Settings given as a user sets them in the environment: NSYSKIT_<KEY> (other variables as they are)."""
    environ = {f"NSYSKIT_{k}" if k in KEYS else k: v for k, v in environ.items()}
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
    ({"PROFILE_DELAY": "5s"}, "PROFILE_DELAY", "5s", "0 or more"),
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
    assert cfg.warnings == ("unknown environment variable INSTALL_EFAA: did you mean NSYSKIT_INSTALL_EFA?",)


def test_misspelt_prefixed_variable_gets_did_you_mean_but_the_kits_own_do_not(project):
    cfg = load(project, NSYSKIT_INSTALL_EFAA="false", NSYSKIT_DEBUG="1", NSYSKIT_NODE="0", NSYSKIT_ASSETS_PORT="7489")
    assert cfg.warnings == ("unknown environment variable NSYSKIT_INSTALL_EFAA: did you mean NSYSKIT_INSTALL_EFA?",)


def test_the_time_window_is_profile_delay_and_profile_duration(project):
    (project / ".env").write_text("PROFILE_DELAY=20\n")
    cfg = load(project, PROFILE_DURATION="30", PROFILE_STEPS="")
    assert (cfg.profile_delay, cfg.profile_duration, cfg.sources["PROFILE_DELAY"]) == (20, 30, ".env")


@pytest.mark.parametrize(
    ("settings", "key", "says"),
    [
        ({"PROFILE_DELAY": "30", "PROFILE_STEPS": "10-15", "GPUS_PER_NODE": "8"}, "PROFILE_DELAY",
         "gives a time window, but PROFILE_STEPS on GPUs opens nsys' capture range, which decides what is recorded; "
         "fix: for a time window leave PROFILE_STEPS empty; else set PROFILE_DELAY=0"),
        ({"PROFILE_DURATION": "60", "WORKLOAD": "command", "COMMAND": "./solver", "PROFILE_RANGE": "nvtx:solve",
          "GPUS_PER_NODE": "0"}, "PROFILE_DURATION",
         "gives a time window, but PROFILE_RANGE=nvtx:solve opens nsys' capture range, which decides what is recorded; "
         "fix: for a time window leave PROFILE_RANGE empty; else set PROFILE_DURATION=0"),
    ],
)  # fmt: skip
def test_a_time_window_with_a_capture_range_is_an_error_instead_of_being_ignored(project, settings, key, says):
    (error,) = problems(project, **settings)
    assert error.key == key and str(error).endswith(says)


@pytest.mark.parametrize(
    "settings",
    [
        {"PROFILE_DELAY": "30", "PROFILE_STEPS": "10-15", "GPUS_PER_NODE": "0"},  # CPU: the window is NVTX marks only
        {"PROFILE_DELAY": "30", "PROFILE_STEPS": "", "GPUS_PER_NODE": "8"},
        {"PROFILE_DELAY": "30", "WORKLOAD": "command", "COMMAND": "./solver", "STEP_HOOK": "false", "GPUS_PER_NODE": "8"},
    ],
)
def test_a_time_window_without_a_capture_range_is_taken(project, settings):
    assert load(project, **settings).profile_delay == 30


@pytest.mark.parametrize("old, new", [("NSYS_DELAY", "PROFILE_DELAY"), ("NSYS_DURATION", "PROFILE_DURATION")])
def test_a_renamed_key_is_an_error_naming_the_new_one_in_a_file_and_in_the_environment(project, old, new):
    (project / ".env").write_text(f"{old}=20\n")
    with pytest.raises(ConfigErrors) as caught:
        load_config(project, environ={f"NSYSKIT_{old}": "5", old: "6"})
    assert [str(e) for e in caught.value.errors] == [
        f"{old}='20' (from .env): this setting was renamed {new}; fix: write {new}=20 instead",
        f"NSYSKIT_{old}='5' (from environment): this setting was renamed {new}; fix: write NSYSKIT_{new}=5 instead",
        f"{old}='6' (from environment): this setting was renamed {new}; fix: write NSYSKIT_{new}=6 instead",
    ]


# --- the environment: NSYSKIT_<KEY>, deprecated bare names, Slurm's own SLURM_* ---------------------


def test_prefixed_variable_sets_a_setting_without_warning(project):
    cfg = load_config(project, environ={"NSYSKIT_NODES": "4", "NSYSKIT_SLURM_PARTITION": "p5"})
    assert (cfg.nodes, cfg.sources["NODES"], cfg.slurm_partition) == (4, "environment", "p5")
    assert cfg.warnings == ()


def test_bare_name_still_works_with_one_deprecation_warning_naming_both(project):
    cfg = load_config(project, environ={"NODES": "4", "TAG": "v1"})
    assert (cfg.nodes, cfg.tag, cfg.sources["TAG"]) == (4, "v1", "environment")
    assert cfg.warnings == ("environment variable NODES is deprecated; use NSYSKIT_NODES",
                            "environment variable TAG is deprecated; use NSYSKIT_TAG")  # fmt: skip


def test_aws_region_of_the_aws_tools_is_honoured_without_a_warning(project):
    cfg = load_config(project, environ={"AWS_REGION": "eu-west-1"})
    assert (cfg.aws_region, cfg.sources["AWS_REGION"], cfg.warnings) == ("eu-west-1", "environment", ())
    assert load_config(project, environ={"AWS_REGION": "eu-west-1", "NSYSKIT_AWS_REGION": "us-east-1"}).aws_region == "us-east-1"


def test_prefixed_name_wins_over_the_bare_one(project):
    cfg = load_config(project, environ={"NODES": "3", "NSYSKIT_NODES": "5"})
    assert (cfg.nodes, cfg.warnings) == (5, ())


def test_bare_slurm_names_are_slurms_own_and_do_not_set_the_setting(project):
    cfg = load_config(project, environ={"SLURM_PARTITION": "p5", "SLURM_ACCOUNT": ""})
    assert (cfg.slurm_partition, cfg.sources["SLURM_PARTITION"]) == ("", "default")
    assert cfg.warnings == ("SLURM_PARTITION='p5' in the environment is Slurm's own variable and does not set "
                            "nsyskit's SLURM_PARTITION (resolved: ''); set NSYSKIT_SLURM_PARTITION for that",)  # fmt: skip


def test_bare_slurm_name_that_agrees_with_the_setting_gets_no_note(project):
    cfg = load_config(project, environ={"SLURM_PARTITION": "p5", "NSYSKIT_SLURM_PARTITION": "p5", "SLURM_MPI": "none"})
    assert (cfg.slurm_partition, cfg.warnings) == ("p5", ())


# --- the committed files ----------------------------------------------------------------------


def test_committed_env_holds_only_what_differs_from_the_defaults_and_points_to_the_template():
    text = (ROOT / ".env").read_text()
    values, bad_lines = parse(text, ".env")
    assert not bad_lines
    defaults = {key_of(f): f.metadata["raw_default"] for f in settings()}
    assert [key for key, value in values.items() if defaults.get(key) == value] == []
    assert "invoke config --template" in text
    assert set(load_config(ROOT, environ={}).sources.values()) == {"default"} | ({".env"} if values else set())


def _template_blocks() -> list[tuple[str, str, str]]:
    """(section heading, help, 'KEY=value') for each setting in the template, in order."""
    blocks, heading, lines = [], "", render_template().splitlines()
    for number, line in enumerate(lines):
        if line.startswith("# ---- "):
            heading = line
        elif line.startswith("# ") and "=" in line and line[2:].split("=", 1)[0] in KEYS:
            blocks.append((heading, lines[number - 1], line[2:]))
    return blocks


def test_template_has_every_setting_once_commented_with_its_help_in_its_group():
    blocks = _template_blocks()
    assert sorted(line.split("=", 1)[0] for _, _, line in blocks) == sorted(KEYS)
    by_key = {f.name.upper(): f.metadata for f in settings()}
    for heading, help_line, line in blocks:
        meta = by_key[line.split("=", 1)[0]]
        assert help_line == f"# {meta['help']}"
        assert heading == f"# ---- {SECTION_TITLES[meta['section']]} ----"
    assert all(not line or line.startswith("#") for line in render_template().splitlines())  # nothing set by itself


def test_template_uncommented_reads_back_as_exactly_the_defaults(tmp_path):
    uncommented = "\n".join(line for _, _, line in _template_blocks()) + "\n"
    values, bad_lines = parse(uncommented, "template")
    assert not bad_lines
    assert values == {key_of(f): f.metadata["raw_default"] for f in settings()}
    (tmp_path / ".env").write_text(uncommented)
    assert load_config(tmp_path, environ={}) == load_config(tmp_path / "nothing", environ={})


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
