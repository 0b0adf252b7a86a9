"""invoke build against the real engine: layer cache, fast example rebuilds, proxies, and one-line errors."""

from __future__ import annotations

import shutil
import time

import docker
import pytest
from fixtures.kit_image import ROOT, invoke, local_cpu_config

from nsyskit import image
from nsyskit.config import load_config

TOUCH_BUDGET_S = 15


def test_second_build_is_fully_cached(kit_image_build):
    again = image.build_image(local_cpu_config(), ROOT, show_progress=False)
    assert again.fully_cached, f"rebuilt: {again.rebuilt}"
    assert again.image_id == kit_image_build.image_id and again.plan.tags == kit_image_build.plan.tags
    print(f"\nno-change rebuild: {again.seconds:.1f} s, image {again.size_bytes / 1e6:,.0f} MB, "
          f"{(again.size_bytes - again.base_size_bytes) / 1e6:,.0f} MB over the base")  # fmt: skip


def test_touching_only_the_example_rebuilds_only_the_last_layer_in_seconds(kit_image_build, tmp_path):
    # A copy of the project whose example differs by one comment: same install layers, new last layer.
    for name in ("Dockerfile", ".env"):
        shutil.copy2(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "profiles", tmp_path / "profiles")
    shutil.copytree(ROOT / "Container-Root", tmp_path / "Container-Root", ignore=shutil.ignore_patterns("__pycache__"))
    example = tmp_path / "Container-Root" / "nsyskit" / "workload" / "train.py"
    example.write_text(example.read_text() + f"\n# touched by test_build at {time.time()}\n")
    cfg = load_config(tmp_path, profile="local-cpu", overrides={"IMAGE": "nsyskit-test-touch"}, environ={})
    result = image.build_image(cfg, tmp_path, show_progress=False)
    client = docker.from_env()
    try:
        print(f"\nexample touched: rebuilt in {result.seconds:.1f} s (budget {TOUCH_BUDGET_S} s): {result.rebuilt}")
        assert result.rebuilt == ["COPY Container-Root/ /"]
        assert result.seconds < TOUCH_BUDGET_S
    finally:
        for tag in result.plan.tags:
            client.images.remove(tag, noprune=False)


def test_proxy_settings_reach_the_build_but_not_the_image_or_the_cache_key(kit_image_build):
    environ = {
        "http_proxy": "http://nsyskit:s3cret-token@127.0.0.1:3128",
        "https_proxy": "http://nsyskit:s3cret-token@127.0.0.1:3128",
    }
    plan = image.plan_build(local_cpu_config(), ROOT, docker.from_env(), environ)
    assert plan.proxy_args["https_proxy"] == environ["https_proxy"]
    assert plan.assets_host in plan.proxy_args["no_proxy"]  # the served CA/wheelhouse bypass the proxy
    result = image.build_image(local_cpu_config(), ROOT, show_progress=False, environ=environ)
    assert result.fully_cached and result.image_id == kit_image_build.image_id
    built = docker.from_env().images.get(result.image_id)
    text = str(built.attrs["Config"]) + " ".join(str(h) for h in built.history())
    assert "s3cret-token" not in text and "proxy" not in text.lower()


def test_dry_run_prints_the_build_arguments_and_builds_nothing():
    result = invoke("build", "--profile", "local-cpu", "--dry-run", "--tag", "nsyskit-dry-run-never-built")
    assert result.returncode == 0, result.stderr
    assert "--build-arg NSYS_SOURCE=debian" in result.stdout and "--build-arg INSTALL_EFA=false" in result.stdout
    assert "-t nsyskit:nsyskit-dry-run-never-built" in result.stdout and "nsyskit:content-" in result.stdout
    assert "/wheels/ <- /opt/wheels" in result.stdout
    with pytest.raises(docker.errors.ImageNotFound):
        docker.from_env().images.get("nsyskit:nsyskit-dry-run-never-built")


def test_wrong_base_image_is_one_line_with_the_step_and_the_fix():
    env = {"NSYSKIT_BASE_IMAGE": "nsyskit-no-such-base:never", "NSYSKIT_BASE_IMAGE_SOURCE": "pull", "NSYSKIT_IMAGE": "nsyskit-test-error"}
    result = invoke("build", "--profile", "local-cpu", "--no-progress", env=env)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: image build failed at step 2/"), result.stderr
    assert "(FROM ${BASE_IMAGE})" in lines[0] and "fix: check BASE_IMAGE=nsyskit-no-such-base:never" in lines[0]


def test_missing_debootstrap_base_says_to_run_setup():
    env = {"NSYSKIT_BASE_IMAGE": "nsyskit-base:no-such-suite", "NSYSKIT_IMAGE": "nsyskit-test-error"}
    result = invoke("build", "--profile", "local-cpu", env=env)
    assert result.returncode != 0 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "nsyskit-base:no-such-suite is not in the local engine" in result.stderr and "invoke setup" in result.stderr


def test_unreachable_engine_is_one_line():
    result = invoke(
        "build", "--profile", "local-cpu", env={"DOCKER_HOST": "unix:///tmp/nsyskit-no-engine.sock"}, timeout=120
    )
    assert result.returncode != 0
    assert result.stderr.strip().startswith("error: no Docker engine reachable at DOCKER_HOST=unix:///tmp/nsyskit-no-engine.sock")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
