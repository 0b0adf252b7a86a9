"""install/ncu.sh's mechanics in a fresh container of the local base image, with a stand-in NVIDIA .deb made here.

NVIDIA's package cannot be downloaded on these machines; the Debian source is exercised by every local-cpu
image build (tests/image checks its ncu). Here: the .deb at NCU_URL is verified against NCU_SHA256 and
installed, ncu lands on PATH at the checked version, and every wrong input fails naming what to fix.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import docker
import pytest

from nsyskit.config import load_config
from nsyskit.setup import run_setup

pytestmark = [pytest.mark.engine]

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "Container-Root" / "nsyskit" / "install"
FAKE_VERSION = "2025.2.1"


@pytest.fixture(scope="module")
def base_image() -> str:
    cfg = load_config(ROOT, profile="local-cpu", environ={})
    run_setup(cfg)  # the engine and the debootstrapped base image, as 'invoke setup' makes them
    return cfg.base_image


@pytest.fixture(scope="module")
def fake_deb(tmp_path_factory) -> tuple[Path, str]:
    """A .deb laid out like NVIDIA's Nsight Compute package: /opt/nvidia/nsight-compute/VERSION/ncu."""
    root = tmp_path_factory.mktemp("deb")
    tree = root / "pkg"
    ncu = tree / "opt" / "nvidia" / "nsight-compute" / FAKE_VERSION / "ncu"
    ncu.parent.mkdir(parents=True)
    ncu.write_text(f'#!/bin/sh\necho "NVIDIA (R) Nsight Compute Command Line Profiler"\necho "Version {FAKE_VERSION}.0 (build fake)"\n')
    ncu.chmod(0o755)
    (tree / "DEBIAN").mkdir()
    (tree / "DEBIAN" / "control").write_text(
        f"Package: nsight-compute-{FAKE_VERSION}\nVersion: {FAKE_VERSION}-1\nArchitecture: amd64\n"
        "Maintainer: nsyskit tests <tests@example.invalid>\nDescription: stand-in for NVIDIA's Nsight Compute\n"
    )
    deb = root / "nsight-compute-fake.deb"
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(tree), str(deb)], check=True, capture_output=True)
    return deb, hashlib.sha256(deb.read_bytes()).hexdigest()


def install_ncu(base_image: str, deb: Path, **env: str) -> tuple[int, str]:
    """Run install/ncu.sh in a fresh container; returns its exit code and output (then `ncu --version`)."""
    client = docker.from_env()
    script = "bash /nsyskit/install/ncu.sh && ncu --version && readlink -f /usr/local/bin/ncu"
    container = client.containers.run(
        base_image, ["bash", "-c", script], detach=True,
        environment={"NCU_VERSION": FAKE_VERSION, "NSYSKIT_COMPONENT": "ncu", **env},
        volumes={str(INSTALL): {"bind": "/nsyskit/install", "mode": "ro"},
                 str(deb.parent): {"bind": "/sources", "mode": "ro"}},
    )  # fmt: skip
    try:
        code = container.wait(timeout=600)["StatusCode"]
        return code, container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)


def test_nvidia_deb_is_verified_installed_and_put_on_path(base_image, fake_deb):
    deb, sha = fake_deb
    code, out = install_ncu(base_image, deb, NCU_SOURCE="nvidia", NCU_URL=f"file:///sources/{deb.name}", NCU_SHA256=sha)
    assert code == 0, out
    assert "sha256 verified for nsight-compute-fake.deb" in out
    assert f"Version {FAKE_VERSION}.0 (build fake)" in out
    assert f"/opt/nvidia/nsight-compute/{FAKE_VERSION}/ncu" in out.splitlines()[-1]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NCU_SOURCE": "nvidia", "NCU_SHA256": "0" * 64}, "checksum mismatch for nsight-compute-fake.deb"),
        ({"NCU_SOURCE": "nvidia", "NCU_URL": ""}, "NCU_SOURCE=nvidia needs NCU_URL"),
        ({"NCU_SOURCE": "nvidia", "NCU_SHA256": ""}, "NCU_SOURCE=nvidia needs NCU_SHA256"),
        ({"NCU_SOURCE": "nvidia", "NCU_VERSION": "2024.1.0"}, "expected 2024.1.0 (NCU_VERSION)"),
        ({"NCU_SOURCE": "base"}, "NCU_SOURCE=base but BASE_IMAGE has no ncu"),
        ({"NCU_SOURCE": "conda"}, "unknown NCU_SOURCE 'conda'"),
    ],
)
def test_wrong_inputs_fail_naming_the_fix(base_image, fake_deb, env, message):
    deb, sha = fake_deb
    settings = {"NCU_URL": f"file:///sources/{deb.name}", "NCU_SHA256": sha, **env}
    code, out = install_ncu(base_image, deb, **settings)
    error = next((line for line in out.splitlines() if line.startswith("nsyskit[ncu]: error: ")), "")
    assert code != 0 and message in error, out
