"""enroot for Pyxis: the ECR credentials line (real boto3 against moto's ECR API) and the import command.

enroot itself is not packaged for Debian and cannot be downloaded here: 'enroot import' is tested for its
command line and for the clear error without enroot, never run.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from nsyskit import enroot
from nsyskit.config import load_config
from nsyskit.errors import ConfigError, EnrootMissing

ROOT = Path(__file__).resolve().parents[2]
INVOKE = Path(sys.executable).with_name("invoke")  # the venv's own (make test's .venv, or any install's)
OTHER_LINES = (
    "# NVIDIA GPU Cloud\n"
    "machine authn.nvidia.com login $oauthtoken password ngc-secret\n"
    "\n"
    "machine auth.docker.io\n"
    "  login someone\n"
    "  password hub-secret\n"
)


def ecr_config(moto_ecr, **more):
    return load_config(
        ROOT, overrides={"REGISTRY": moto_ecr.registry_host, "AWS_REGION": moto_ecr.region, **more}, environ={}
    )


@pytest.fixture
def moto_env(moto_ecr, monkeypatch):
    """boto3 pointed at moto (fake credentials) for in-process calls."""
    for key, value in moto_ecr.env.items():
        monkeypatch.setenv(key, value)
    return moto_ecr


def test_credentials_file_location():
    assert enroot.credentials_file({"ENROOT_CONFIG_PATH": "/c"}) == Path("/c/.credentials")
    assert enroot.credentials_file({"XDG_CONFIG_HOME": "/x"}) == Path("/x/enroot/.credentials")
    assert enroot.credentials_file({}) == Path.home() / ".config" / "enroot" / ".credentials"


def test_merge_replaces_only_the_host_entry_single_or_multi_line():
    host = "1.dkr.ecr.us-west-2.amazonaws.com"
    old = OTHER_LINES + f"machine {host}\n  login AWS\n  password OLD\n# trailing comment\n"
    merged = enroot.merge_entry(old, host, enroot.netrc_entry(host, "AWS", "NEW"))
    assert merged == OTHER_LINES + f"machine {host} login AWS password NEW\n# trailing comment\n"
    again = enroot.merge_entry(merged, host, enroot.netrc_entry(host, "AWS", "NEWER"))
    assert again.count(host) == 1 and "NEWER" in again and "NEW\n" not in again
    assert enroot.merge_entry("", host, "machine h login a password b") == "machine h login a password b\n"


def test_write_credentials_from_moto_token_keeps_other_lines_mode_0600(moto_env, tmp_path):
    config_dir = tmp_path / "enroot"
    config_dir.mkdir()
    (config_dir / ".credentials").write_text(OTHER_LINES)
    cfg = ecr_config(moto_env)
    path = enroot.write_credentials(cfg, {"ENROOT_CONFIG_PATH": str(config_dir)})
    text = path.read_text()
    assert text.startswith(OTHER_LINES)
    line = f"machine {moto_env.registry_host} login AWS password {moto_env.password}"
    assert text.splitlines()[-1] == line
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    enroot.write_credentials(cfg, {"ENROOT_CONFIG_PATH": str(config_dir)})  # a fresh token replaces, never duplicates
    assert path.read_text() == text
    assert [p.name for p in config_dir.iterdir()] == [".credentials"]  # no temporary file left behind


def test_task_writes_a_new_private_file(moto_ecr, tmp_path):
    """'invoke enroot-credentials' end to end: a new file (and folder), mode 0600, one line printed."""
    config_dir = tmp_path / "new" / "enroot"
    env = {**os.environ, **moto_ecr.env, "ENROOT_CONFIG_PATH": str(config_dir),
           "NSYSKIT_REGISTRY": moto_ecr.registry_host, "NSYSKIT_AWS_REGION": moto_ecr.region}  # fmt: skip
    env.pop("NSYSKIT_PROFILE", None)
    done = subprocess.run(
        [str(INVOKE), "enroot-credentials"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    path = config_dir / ".credentials"
    assert path.read_text() == f"machine {moto_ecr.registry_host} login AWS password {moto_ecr.password}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert str(path) in done.stdout and moto_ecr.password not in done.stdout + done.stderr


def test_non_ecr_registry_is_refused():
    cfg = load_config(ROOT, overrides={"REGISTRY": "registry.example.com"}, environ={})
    with pytest.raises(ConfigError, match="REGISTRY.*not an ECR registry"):
        enroot.write_credentials(cfg, {"ENROOT_CONFIG_PATH": "/nonexistent"})


def test_import_command_renders_the_pushed_image_and_the_sqsh_path():
    ecr = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
    cfg = load_config(ROOT, overrides={"REGISTRY": ecr, "TAG": "v3"}, environ={})
    assert enroot.import_command(cfg) == [
        "enroot", "import", "--output", "/fsx/enroot/nsyskit+v3.sqsh", f"docker://{ecr}#nsyskit:v3",
    ]  # fmt: skip
    cfg = load_config(ROOT, overrides={"REGISTRY": ecr, "SLURM_SQSH": "/lustre/k.sqsh"}, environ={})
    assert enroot.import_command(cfg)[3] == "/lustre/k.sqsh"
    # Without a registry, the image 'invoke build' made on this host, from its Docker daemon.
    local = enroot.import_command(load_config(ROOT, overrides={"REGISTRY": "", "TAG": "dev"}, environ={}))
    assert local == ["enroot", "import", "--output", "/fsx/enroot/nsyskit+dev.sqsh", "dockerd://nsyskit:dev"]


def test_import_without_enroot_says_where_to_run_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a login node without enroot, even where this machine has it
    cfg = load_config(ROOT, overrides={"REGISTRY": "123456789012.dkr.ecr.us-west-2.amazonaws.com"}, environ={})
    with pytest.raises(EnrootMissing, match="enroot is not installed here"):
        enroot.import_image(cfg)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda d: (d / "enroot").write_text("x"), "cannot be written"),  # ENROOT_CONFIG_PATH is a file
        (lambda d: (d / "enroot" / ".credentials").mkdir(parents=True), "cannot be written"),
        (lambda d: ((d / "enroot").mkdir(), (d / "enroot" / ".credentials").write_bytes(b"\xff\xfe")), "not UTF-8"),
    ],
    ids=["config-path-is-a-file", "credentials-is-a-folder", "credentials-not-text"],
)
def test_an_unusable_credentials_file_is_one_config_error(tmp_path, make, words):
    make(tmp_path)
    path = enroot.credentials_file({"ENROOT_CONFIG_PATH": str(tmp_path / "enroot")})
    with pytest.raises(ConfigError) as error:
        enroot.store_entry(path, "h", "machine h login AWS password p")
    assert error.value.key == "ENROOT_CONFIG_PATH" and words in str(error.value) and "fix:" in str(error.value)
