"""The `nsyskit` command as a user meets it outside any checkout: version, help for every task, conventional short
flags only, init, --env-file, and one-line errors for bad numbers and settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsyskit import __version__
from nsyskit.cli.collection import ns

ROOT = Path(__file__).resolve().parents[2]
NSYSKIT = [sys.executable, "-m", "nsyskit"]
CONVENTIONAL_SHORT = {"o", "j", "k"}  # -o output, -j json, -k (pytest's, on test); every other flag is long only


def nsyskit(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NSYSKIT_")} | env
    return subprocess.run([*NSYSKIT, *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=120)


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    """A folder outside the checkout, as a user's own project folder."""
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def test_version(elsewhere):
    done = nsyskit("--version", cwd=elsewhere)
    assert done.returncode == 0 and done.stdout.strip() == f"nsyskit {__version__}"


def test_help_lists_every_task(elsewhere):
    done = nsyskit("--help", cwd=elsewhere)
    assert done.returncode == 0 and "--env-file" in done.stdout
    listed = done.stdout.split("Subcommands:")[1]
    assert all(f"  {name} " in listed or f"  {name}\n" in listed for name in ns.task_names)


@pytest.mark.parametrize("name", sorted(ns.task_names))
def test_dash_h_after_a_task_is_its_help(elsewhere, name):
    done = nsyskit(name, "-h", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: nsyskit [--core-opts] {name} ") and not (elsewhere / ".env").exists()


def test_only_conventional_short_flags():
    shorts = {
        (name, flag)
        for name in ns.task_names
        for argument in ns[name].get_arguments()
        for flag in argument.names
        if len(flag) == 1
    }
    assert {flag for _, flag in shorts} <= CONVENTIONAL_SHORT, sorted(shorts)
    assert ("analyze", "j") in shorts and ("analyze", "o") in shorts


def test_no_flag_is_parsed_as_a_number_by_invoke():
    # Invoke turns a bad value of a flag with a numeric default into a traceback: number flags are text, checked
    # by the task (one line naming the flag, the value and the fix).
    numeric = [
        (name, argument.name)
        for name in ns.task_names
        for argument in ns[name].get_arguments()
        if argument.kind in (int, float)
    ]
    assert numeric == []


@pytest.mark.parametrize(
    ("task", "flag"), [("nccl-log", "--top"), ("analyze", "--top"), ("analyze", "--timeline-max-events")]
)
def test_a_bad_number_is_one_line(elsewhere, task, flag):
    log = ROOT / "tests" / "data" / "nccl" / "kit_mpirun.log"
    done = nsyskit(task, str(log), flag, "abc", cwd=elsewhere)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == f"error: {flag}='abc': must be a whole number >= 1; fix: e.g. {flag} 6"


def test_init_writes_a_commented_env_and_never_overwrites(elsewhere):
    done = nsyskit("init", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    written = (elsewhere / ".env").read_text()
    assert "# INSTALL_EFA=" in written and all(line.startswith("#") or not line.strip() for line in written.splitlines())
    (elsewhere / ".env").write_text("NODES=3\n")
    again = nsyskit("init", cwd=elsewhere)
    assert again.returncode == 1 and (elsewhere / ".env").read_text() == "NODES=3\n"
    assert again.stderr.strip() == f"error: {elsewhere / '.env'}: exists already; fix: pass --force to overwrite it, or give another --output"


def test_env_file_is_read_from_the_current_folder_or_the_flag(elsewhere):
    (elsewhere / ".env").write_text("NODES=3\n")
    (elsewhere / "other.env").write_text("NODES=5\n")
    here = nsyskit("config", "--json", cwd=elsewhere)
    given = nsyskit("--env-file", "other.env", "config", "--json", cwd=elsewhere)
    assert '"value": "3"' in here.stdout.split('"NODES"')[1].split("}")[0]
    assert '"value": "5"' in given.stdout.split('"NODES"')[1].split("}")[0]


def test_a_missing_env_file_is_one_line_and_nothing_is_written(elsewhere):
    done = nsyskit("--env-file", "nope.env", "init", "--output", "x.env", cwd=elsewhere)
    assert done.returncode == 0  # init writes where it is told, whatever --env-file says
    done = nsyskit("--env-file", "nope.env", "config", "--check", cwd=elsewhere)
    assert done.returncode == 1 and "nope.env: does not exist" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == ["x.env"]


def test_a_bad_assets_port_fails_config_check(elsewhere):
    done = nsyskit("config", "--check", cwd=elsewhere, NSYSKIT_ASSETS_PORT="abc")
    assert done.returncode == 1
    assert "NSYSKIT_ASSETS_PORT='abc' (from environment): is not a port number 1-65535" in done.stderr


def test_the_kits_own_profile_and_build_files_serve_any_folder(elsewhere):
    # Outside a checkout the packaged local-cpu profile and build inputs are used: the same image as in the checkout.
    outside = nsyskit("build", "--profile", "local-cpu", "--dry-run", cwd=elsewhere)
    inside = nsyskit("build", "--profile", "local-cpu", "--dry-run", cwd=ROOT)
    assert outside.returncode == 0, outside.stderr
    tag = [line for line in outside.stdout.splitlines() if "content-" in line]
    assert tag and tag == [line for line in inside.stdout.splitlines() if "content-" in line]
