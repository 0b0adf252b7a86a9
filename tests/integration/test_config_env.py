"""Settings through the real tasks: the documented .env template, NSYSKIT_<KEY> overrides, deprecated bare names, SLURM_*."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from bad_inputs import BASE_ENV, INVOKE, project_copy  # tests/integration is on sys.path

from nsyskit.config import key_of, settings

KEYS = {key_of(f) for f in settings()}


@pytest.fixture
def project():
    folder = project_copy()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def invoke(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(INVOKE), *args], cwd=project, env={**BASE_ENV, "HOME": str(project), **env},
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def stderr_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def shown(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# --- the template -------------------------------------------------------------------------------


def test_template_on_stdout_documents_every_setting_commented(project):
    result = invoke(project, "config", "--template")
    assert result.returncode == 0 and not result.stderr, result.stderr
    commented = re.findall(r"^# ([A-Z0-9_]+)=", result.stdout, re.M)
    assert sorted(commented) == sorted(KEYS)
    assert "# NODES=2\n" in result.stdout and "# Number of nodes" in result.stdout
    assert "# ---- Slurm:" in result.stdout


def test_template_written_to_a_file_then_kept_unless_forced(project):
    target = project / "settings.env"
    first = invoke(project, "config", "--template", "--output", "settings.env")
    assert first.returncode == 0, first.stderr
    written = target.read_text()
    assert written == invoke(project, "config", "--template").stdout

    target.write_text("NODES=7\n")
    again = invoke(project, "config", "--template", "--output", "settings.env")
    assert again.returncode == 1
    assert stderr_lines(again) == ["error: settings.env: exists already; fix: pass --force to overwrite it, or give another --output"]
    assert target.read_text() == "NODES=7\n"  # the user's file is untouched

    forced = invoke(project, "config", "--template", "--output", "settings.env", "--force")
    assert forced.returncode == 0, forced.stderr
    assert target.read_text() == written


def test_output_without_template_is_a_usage_error(project):
    result = invoke(project, "config", "--output", "x.env")
    assert result.returncode == 1 and not (project / "x.env").exists()
    assert stderr_lines(result) == ["error: --output goes with --template only; fix: add --template"]


def test_the_template_as_env_changes_nothing_and_the_committed_env_reports_defaults(project):
    before = shown(invoke(project, "config", "--json"))
    assert before.pop("REGISTRY")["source"] == "environment"  # BASE_ENV's NSYSKIT_REGISTRY
    assert {entry["source"] for entry in before.values()} == {"default"}
    assert invoke(project, "config", "--template", "--output", ".env", "--force").returncode == 0
    after = shown(invoke(project, "config", "--json"))
    after.pop("REGISTRY")
    assert after == before


# --- environment overrides ----------------------------------------------------------------------


def test_prefixed_override_sets_the_value_without_a_warning(project):
    result = invoke(project, "config", "--json", NSYSKIT_NODES="4")
    assert shown(result)["NODES"] == {"value": "4", "source": "environment"}
    assert not result.stderr


def test_bare_override_works_with_one_deprecation_line(project):
    result = invoke(project, "config", "--json", NODES="4")
    assert shown(result)["NODES"] == {"value": "4", "source": "environment"}
    assert stderr_lines(result) == ["warning: environment variable NODES is deprecated; use NSYSKIT_NODES"]


def test_prefixed_override_wins_over_the_bare_one(project):
    result = invoke(project, "config", "--json", NODES="3", NSYSKIT_NODES="5")
    assert shown(result)["NODES"]["value"] == "5" and not result.stderr


def _sbatch_lines(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 0, result.stderr
    script = Path(re.search(r"rendered (\S+job\.sbatch)", result.stdout).group(1))
    return [line for line in script.read_text().splitlines() if line.startswith("#SBATCH")]


def test_slurm_settings_come_only_from_prefixed_names(project):
    shared = {"NSYSKIT_SLURM_SHARED_DIR": str(project)}  # the project on the cluster's shared file system
    prefixed = invoke(project, "deploy", "--slurm", "--dry-run", NSYSKIT_SLURM_PARTITION="p5", NSYSKIT_SLURM_ACCOUNT="ml",
                      **shared)  # fmt: skip
    assert {"#SBATCH --partition=p5", "#SBATCH --account=ml"} <= set(_sbatch_lines(prefixed))
    assert not prefixed.stderr

    bare = invoke(project, "deploy", "--slurm", "--dry-run", SLURM_PARTITION="p5", **shared)
    assert not any("--partition" in line for line in _sbatch_lines(bare))
    assert stderr_lines(bare) == [
        "warning: SLURM_PARTITION='p5' in the environment is Slurm's own variable and does not set nsyskit's "
        "SLURM_PARTITION (resolved: ''); set NSYSKIT_SLURM_PARTITION for that"
    ]
