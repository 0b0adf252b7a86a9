"""testinfra against the kit image built from the local-cpu profile: one running container per session."""

from __future__ import annotations

import secrets
import subprocess

import pytest
import testinfra
from fixtures.kit_image import local_cpu_config


@pytest.fixture(scope="session")
def image_config():
    """The config the image was built from: what each check expects (flags, versions)."""
    return local_cpu_config()


@pytest.fixture(scope="session")
def host(kit_image: str):
    """A testinfra host (docker backend) on a container of the kit image; removed at the end of the session."""
    name = f"nsyskit-testinfra-{secrets.token_hex(4)}"
    subprocess.run(
        ["docker", "run", "-d", "--name", name, kit_image, "sleep", "infinity"], check=True, capture_output=True
    )
    try:
        yield testinfra.get_host(f"docker://{name}")
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
