"""The Invoke front: every task and flag documented, user errors as one line with a non-zero exit."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INVOKE = [sys.executable, "-m", "invoke"]


def namespace():
    spec = importlib.util.spec_from_file_location("project_tasks", ROOT / "tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ns


def invoke(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "NSYSKIT_PROFILE"} | env
    return subprocess.run([*INVOKE, *args], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)


def test_every_task_has_a_one_line_help_and_every_flag_has_help():
    ns = namespace()
    assert ns.task_names, "no tasks"
    for name in ns.task_names:
        task = ns[name]
        assert (task.__doc__ or "").strip(), f"task {name} has no docstring"
        flags = [arg for arg in task.get_arguments() if arg.name not in ("c", "ctx")]
        missing = [arg.name for arg in flags if not arg.help]
        assert not missing, f"task {name}: flags without help: {missing}"


def test_invoke_list_shows_every_task_with_its_help():
    result = invoke("--list")
    assert result.returncode == 0, result.stderr
    for name in namespace().task_names:
        line = next((line for line in result.stdout.splitlines() if line.strip().startswith(name + " ")), "")
        assert line.strip() != name and len(line.split()) > 1, f"{name} listed without help: {line!r}"


def test_task_help_works_after_the_task_name_even_where_a_positional_would_take_it():
    # Invoke hands a positional argument the next word, '--help' included: every task answers with its help.
    for name in namespace().task_names:
        result = invoke(name, "--help")
        assert result.returncode == 0, f"invoke {name} --help: {result.stderr}"
        assert f"Usage: inv[oke] [--core-opts] {name} " in result.stdout, f"invoke {name} --help: {result.stdout[:200]}"
        assert "error:" not in result.stderr


def test_config_check_names_both_keys_of_a_broken_dependency_and_exits_non_zero():
    result = invoke("config", "--check", NSYSKIT_INSTALL_TESTS="true", NSYSKIT_INSTALL_EFA="false")
    assert result.returncode != 0
    assert "INSTALL_TESTS" in result.stderr and "INSTALL_EFA" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_config_check_finds_the_host_files_the_build_would_reject(tmp_path):
    # What 'invoke build' would stop on (a CA bundle that is not PEM, a local source file that is gone) shows up front.
    not_pem = tmp_path / "ca.txt"
    not_pem.write_text("not a certificate\n")
    result = invoke("config", "--check", NSYSKIT_EXTRA_CA_BUNDLE=str(not_pem), NSYSKIT_NCCL_TESTS_URL=str(tmp_path / "gone.tar.gz"))
    assert result.returncode == 1
    assert f"EXTRA_CA_BUNDLE='{not_pem}'" in result.stderr and "holds no PEM certificate" in result.stderr
    assert "NCCL_TESTS_URL=" in result.stderr and "no such file" in result.stderr
    assert "2 configuration problem(s)" in result.stderr


def test_config_without_check_shows_the_settings_even_when_a_build_file_is_missing(tmp_path):
    # The host files are checked by --check (and by the build); showing the settings never depends on them.
    result = invoke("config", "--json", NSYSKIT_EXTRA_CA_BUNDLE=str(tmp_path / "gone.pem"))
    assert result.returncode == 0, result.stderr
    assert "EXTRA_CA_BUNDLE" in result.stdout


def test_config_check_lists_every_problem_at_once():
    result = invoke("config", "--check", NSYSKIT_NODES="0", NSYSKIT_INSTALL_MPI="perhaps")
    assert result.returncode != 0
    assert "NODES='0'" in result.stderr and "INSTALL_MPI='perhaps'" in result.stderr
    assert "2 configuration problem(s)" in result.stderr


def test_config_check_passes_on_the_committed_files():
    for profile in ([], ["--profile", "local-cpu"]):
        result = invoke("config", "--check", *profile)
        assert result.returncode == 0, result.stderr


def test_config_shows_value_and_source_of_each_layer():
    result = invoke("config", "--json", "--profile", "local-cpu", NSYSKIT_STEPS="33")
    assert result.returncode == 0, result.stderr
    import json

    shown = json.loads(result.stdout)
    assert shown["STEPS"] == {"value": "33", "source": "environment"}
    assert shown["MODEL_SIZE"] == {"value": "tiny", "source": "profiles/local-cpu.env"}
    assert shown["IMAGE"] == {"value": "nsyskit", "source": "default"}  # the committed .env holds no defaults


def test_a_bad_value_in_a_task_is_one_line_without_traceback():
    result = invoke("setup", NSYSKIT_NODES="zero")
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["error: NODES='zero' (from environment): is not a positive integer; fix: use a whole number of 1 or more (at most 2147483647), e.g. 2"]


def test_unreachable_engine_is_one_line_naming_it_and_the_fix():
    result = invoke("setup", DOCKER_HOST="tcp://127.0.0.1:9")
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: no Docker engine reachable at DOCKER_HOST=tcp://127.0.0.1:9")
    assert "fix: start the engine DOCKER_HOST names" in lines[0]
    assert ("unset DOCKER_HOST" in lines[0]) == (os.geteuid() == 0)  # only root can have 'invoke setup' start one


def test_an_unforeseen_error_is_one_line_and_the_traceback_only_on_request(tmp_path, monkeypatch):
    # A full disk, a permission or a bug no check foresaw: one line, and the traceback only with NSYSKIT_DEBUG=1.
    from invoke import Context, Exit

    from nsyskit.cli import task

    @task()
    def boom(c):
        """Fail the way a bug would."""
        raise ZeroDivisionError("division by zero")

    @task()
    def disk(c):
        """Fail the way a full disk would."""
        raise OSError(28, "No space left on device", str(tmp_path / "x"))

    for body, code, words in ((boom, 70, "unexpected ZeroDivisionError: division by zero; fix: rerun with NSYSKIT_DEBUG=1"),
                              (disk, 1, f"{tmp_path / 'x'}: No space left on device; fix:")):  # fmt: skip
        try:
            body(Context())
        except Exit as exit_:
            assert exit_.code == code and words in exit_.message and "\n" not in exit_.message
        else:
            raise AssertionError("no Exit")
    monkeypatch.setenv("NSYSKIT_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        boom(Context())
