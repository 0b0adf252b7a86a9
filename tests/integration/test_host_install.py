"""Every host-side install step works on a fresh Debian bookworm with only `main` enabled, as CI's machines start.

A green run on a machine that already has the packages proves nothing (Debian's nsys needs contrib as well as
non-free, and a machine with nsys passed), so the kit's own installer runs in a fresh container of the base image.
"""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from nsyskit import hostpkgs

pytestmark = [pytest.mark.engine, pytest.mark.slow]
SRC = Path(__file__).resolve().parents[2] / "src"
BASE_IMAGE = "nsyskit-base:bookworm"  # made by 'invoke setup' (debootstrap minbase: sources list only main)
# What each step must leave working: a command that exits 0 only when the program really runs.
CHECKS = {
    "nsys": "nsys --version",
    "ncu": "ncu --version",
    "docker": "dockerd --version",
    "debootstrap": "debootstrap --version",
    "registry": "docker-registry --version && command -v htpasswd",
    "shellcheck": "shellcheck --version",
    "kubectl": "kubectl version --client",
    "sqlite-ext": "cc --version && test -f /usr/include/sqlite3ext.h",
}
SCRIPT = r"""
set -eu
echo "components before: $(grep -rhoE '^(deb |Components:).*' /etc/apt/sources.list /etc/apt/sources.list.d 2>/dev/null | tr '\n' ' ')"
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 >/dev/null
PYTHONPATH=/nsyskit-src python3 -m nsyskit.hostpkgs all
{checks}
"""


@pytest.fixture(scope="module")
def fresh_install_output() -> str:
    """Output of the kit's host installer plus each program's check, in a fresh container of the base image."""
    client = docker.from_env()
    checks = "\n".join(f'echo "== {step}"; {command}' for step, command in CHECKS.items())
    container = client.containers.run(
        BASE_IMAGE, ["bash", "-c", SCRIPT.format(checks=checks)], detach=True,
        volumes={str(SRC): {"bind": "/nsyskit-src", "mode": "ro"}},
    )  # fmt: skip
    try:
        result = container.wait(timeout=900)
        output = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    assert result["StatusCode"] == 0, output[-3000:]
    return output


def test_the_base_image_starts_with_only_main_enabled(fresh_install_output):
    before = fresh_install_output.splitlines()[0]
    assert " main" in before
    assert "contrib" not in before and "non-free" not in before


def test_every_host_step_is_covered_by_a_check():
    assert set(CHECKS) == set(hostpkgs.HOST_PACKAGES)


def test_nsys_installs_from_contrib_and_non_free_and_runs(fresh_install_output):
    after_nsys = fresh_install_output.split("== nsys", 1)[1]
    assert "NVIDIA Nsight Systems version 2022.4" in after_nsys


@pytest.mark.parametrize("step", [s for s in CHECKS if s != "nsys"])
def test_every_other_host_step_installs_and_runs(fresh_install_output, step):
    assert f"\n{step}: " in fresh_install_output  # the installer reported the step
    assert f"== {step}" in fresh_install_output  # and its check ran (set -e: a failed check fails the fixture)
