"""Build-arg rendering, host-file assets and the inputs digest of nsyskit.image (no engine needed)."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from pathlib import Path

import pytest

import nsyskit
from nsyskit.config import load_config
from nsyskit.errors import ConfigError
from nsyskit.image import content_tag, plan_build
from nsyskit.image.args import build_args, proxy_args, redact
from nsyskit.image.assets import Assets, collect_assets
from nsyskit.image.context import LIBRARY_DIR, context_files, context_tar, inputs_digest

ROOT = Path(__file__).resolve().parents[2]
BASE = "http://172.17.0.1:7489"


def config(profile=None, **overrides):
    return load_config(ROOT, profile=profile, overrides={k.upper(): v for k, v in overrides.items()}, environ={})


def dockerfile_args() -> set[str]:
    return set(re.findall(r"^ARG (\w+)", (ROOT / "Dockerfile").read_text(), re.M))


def test_every_dockerfile_arg_is_rendered_and_nothing_else():
    args = build_args(config(), Assets(), BASE)
    assert set(args) == dockerfile_args()


def test_default_config_renders_booleans_and_pins_and_needs_no_assets():
    args = build_args(config(), Assets(), BASE)
    assert args["INSTALL_MPI"] == args["INSTALL_EFA"] == args["INSTALL_TESTS"] == "true"
    assert args["BASE_IMAGE"] == "nvcr.io/nvidia/pytorch:25.01-py3"
    assert args["NSYS_SOURCE"] == "nvidia" and args["NSYS_VERSION"] == "2025.2.1"
    assert args["NSYSKIT_ASSETS"] == "" and args["PIP_WHEELHOUSE"] == "" and args["PIP_WHEELHOUSE_DIGEST"] == ""
    assert args["NCCL_TESTS_GENCODE"] == "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90"


def test_flags_off_render_false():
    args = build_args(config(install_mpi="false", install_efa="false", install_tests="false"), Assets(), BASE)
    assert (args["INSTALL_MPI"], args["INSTALL_EFA"], args["INSTALL_TESTS"]) == ("false", "false", "false")


def test_wheelhouse_and_ca_are_served_not_copied(tmp_path):
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"x" * 10)
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    cfg = config("local-cpu", pip_wheelhouse=str(tmp_path / "wheels"), extra_ca_bundle=str(ca))
    assets = collect_assets(cfg, ROOT)
    args = build_args(cfg, assets, BASE)
    assert args["PIP_WHEELHOUSE"] == f"{BASE}/wheels/" and args["NSYSKIT_ASSETS"] == BASE
    assert assets.files["/ca.pem"] == ca
    assert "BEGIN CERTIFICATE" not in "".join(args.values())  # the CA goes over HTTP, never in an arg
    before = args["PIP_WHEELHOUSE_DIGEST"]
    (tmp_path / "wheels" / "nvtx-0.2.17-cp311-cp311-manylinux_2_17_x86_64.whl").write_bytes(b"y")
    assert build_args(cfg, collect_assets(cfg, ROOT), BASE)["PIP_WHEELHOUSE_DIGEST"] != before


@pytest.mark.parametrize("form", ["path", "file-url"])
def test_local_source_is_served_under_its_content_hash(tmp_path, form):
    archive = tmp_path / "aws-efa-installer-1.38.0.tar.gz"
    archive.write_bytes(b"archive bytes")
    value = str(archive) if form == "path" else f"file://{archive}"
    cfg = config(efa_installer_url=value)
    assets = collect_assets(cfg, ROOT)
    url = build_args(cfg, assets, BASE)["EFA_INSTALLER_URL"]
    sha = hashlib.sha256(b"archive bytes").hexdigest()
    assert url == f"{BASE}/sources/{sha[:16]}/aws-efa-installer-1.38.0.tar.gz"
    assert assets.files[url[len(BASE) :]] == archive


def test_https_source_is_passed_through():
    cfg = config(nccl_tests_url="https://mirror.example.com/nccl-tests-2.13.11.tar.gz")
    assert (
        build_args(cfg, collect_assets(cfg, ROOT), BASE)["NCCL_TESTS_URL"]
        == "https://mirror.example.com/nccl-tests-2.13.11.tar.gz"
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("EFA_INSTALLER_URL", "/nonexistent/efa.tar.gz"),
        ("PIP_WHEELHOUSE", "/nonexistent/wheels"),
        ("EXTRA_CA_BUNDLE", "/nonexistent/ca.pem"),
    ],
)
def test_missing_host_file_is_a_config_error_naming_the_key(key, value):
    with pytest.raises(ConfigError) as error:
        collect_assets(config(**{key.lower(): value}), ROOT)
    assert error.value.one_line().startswith(f"{key}='{value}'") and "fix:" in error.value.one_line()


def test_proxies_pass_only_when_set_and_the_assets_host_bypasses_them():
    assert proxy_args({"HOME": "/root"}) == {}
    env = {"https_proxy": "http://user:secret@proxy:3128", "no_proxy": "localhost"}
    args = proxy_args(env, "172.17.0.1")
    assert args["https_proxy"] == env["https_proxy"]
    assert args["no_proxy"] == "localhost,172.17.0.1" and args["NO_PROXY"] == "localhost,172.17.0.1"
    assert redact(args)["https_proxy"] == "http://***@proxy:3128"


def test_proxies_are_never_dockerfile_args():
    # Undeclared predefined args stay out of `docker history` and the cache key; declaring one would persist it.
    assert not dockerfile_args() & {"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}


def test_digest_follows_content_not_mtime(tmp_path):
    (tmp_path / "Container-Root" / "nsyskit").mkdir(parents=True)
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    example = tmp_path / "Container-Root" / "nsyskit" / "train.py"
    example.write_text("print(1)\n")
    first = inputs_digest(context_files(tmp_path), {"A": "1"}, {})
    os.utime(example, (1, 1))
    assert inputs_digest(context_files(tmp_path), {"A": "1"}, {}) == first
    assert context_tar(context_files(tmp_path)) == context_tar(context_files(tmp_path))
    example.write_text("print(2)\n")
    assert inputs_digest(context_files(tmp_path), {"A": "1"}, {}) != first
    assert inputs_digest(context_files(tmp_path), {"A": "2"}, {}) != first


def test_context_keeps_exec_bits_and_drops_bytecode(tmp_path):
    (tmp_path / "Container-Root" / "usr" / "local" / "bin").mkdir(parents=True)
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    wrapper = tmp_path / "Container-Root" / "usr" / "local" / "bin" / "tool"
    wrapper.write_text("#!/bin/sh\n")
    wrapper.chmod(0o755)
    (tmp_path / "Container-Root" / "__pycache__").mkdir()
    (tmp_path / "Container-Root" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    files = {f.name: f.mode for f in context_files(tmp_path) if not f.name.startswith(LIBRARY_DIR)}
    assert files == {"Container-Root/usr/local/bin/tool": 0o755, "Dockerfile": 0o644}


def test_context_carries_this_nsyskit_for_the_image_without_compiled_files():
    # The image's nsyskit (analyze-part/-merge on the nodes) is this library's sources, whatever the project folder.
    library = {f.name.removeprefix(LIBRARY_DIR + "/"): f.data for f in context_files(ROOT) if f.name.startswith(LIBRARY_DIR)}
    package = Path(nsyskit.__file__).resolve().parent
    assert library["__init__.py"] == (package / "__init__.py").read_bytes()
    assert {"cli/program.py", "analysis/mapreduce/parts.py", "native/pagescan.c"} <= set(library)
    assert not [name for name in library if name.endswith((".so", ".pyc")) or name.startswith("_kit/")]
    launcher = next(f for f in context_files(ROOT) if f.name == "Container-Root/usr/local/bin/nsyskit")
    assert launcher.mode == 0o755 and b"/opt/nsyskit/python" in launcher.data and LIBRARY_DIR.endswith("/opt/nsyskit/python/nsyskit")


def test_plan_tags_image_ref_and_content_tag_and_prints_every_arg():
    plan = plan_build(config("local-cpu"), ROOT, environ={})
    assert plan.tags == ["nsyskit:latest", f"nsyskit:{content_tag(plan.digest)}"]
    command = plan.docker_command()
    for key in plan.build_args:
        assert f"--build-arg {key}=" in command
    assert plan.layer_steps == sum(
        1 for line in (ROOT / "Dockerfile").read_text().splitlines() if line.split(" ")[0] in ("RUN", "COPY")
    )


def test_registry_goes_into_the_main_tag():
    plan = plan_build(config("local-cpu", registry="127.0.0.1:5000", tag="v1"), ROOT, environ={})
    assert plan.tags[0] == "127.0.0.1:5000/nsyskit:v1" and plan.tags[1].startswith("127.0.0.1:5000/nsyskit:content-")


def test_dry_run_command_is_safe_to_paste_whatever_the_values_hold():
    tricky = "-DNAME=\"it's here\" -DY='$HOME; `id`'"  # a valid word list full of shell syntax
    plan = plan_build(config("local-cpu", nccl_tests_gencode=tricky, nsys_extra_args="--a 'b c'"), ROOT, environ={})
    words = shlex.split(plan.docker_command().replace(" \\\n", " "))
    args = dict(words[i + 1].split("=", 1) for i, word in enumerate(words) if word == "--build-arg")
    assert args == {**plan.build_args, **plan.proxy_args}
    assert args["NCCL_TESTS_GENCODE"] == tricky
    assert words[-1] == "." and words[-3:-1] == ["-t", plan.tags[1]]
