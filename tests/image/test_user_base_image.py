"""The user's own image as BASE_IMAGE: a base that carries a Python environment of its own (a venv first on PATH,
packages of its own) gets the kit's layers added, its environment and packages kept; testinfra then checks the
kit's parts in it and profiles a training loop there through `nsyskit wrap`."""

from __future__ import annotations

import io
import json
import secrets
import subprocess

import docker
import pytest
import testinfra
from fixtures.kit_image import ROOT

from nsyskit import image
from nsyskit.config import load_config

pytestmark = [pytest.mark.engine, pytest.mark.slow]

USER_BASE = "nsyskit-test-userbase:venv"
# A training image as users make one: its own venv first on PATH, seeing the distribution's packages (Debian's
# matplotlib 3.6 among them, which the kit also wants, at another version).
USER_DOCKERFILE = """
FROM nsyskit-base:bookworm
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-matplotlib \\
    && rm -rf /var/lib/apt/lists/* && python3 -m venv --system-site-packages /opt/venv
ENV PATH=/opt/venv/bin:$PATH
"""
LOOP = ("import torch; m = torch.nn.Linear(4, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(4):\n    m(torch.randn(2, 4)).sum().backward(); o.step(); o.zero_grad()\n")  # fmt: skip


@pytest.fixture(scope="module")
def user_host(kit_image):  # kit_image: the engine, the base image and the layer cache of the kit's own build
    """A container of the kit image built on USER_BASE (testinfra host), and what the base's python had."""
    client = docker.from_env()
    client.images.build(fileobj=io.BytesIO(USER_DOCKERFILE.encode()), tag=USER_BASE, rm=True)
    cfg = load_config(ROOT, profile="local-cpu", environ={},
                      overrides={"BASE_IMAGE": USER_BASE, "BASE_IMAGE_SOURCE": "pull", "IMAGE": "nsyskit-test-userbase-kit"})  # fmt: skip
    built = image.build_image(cfg, ROOT, show_progress=False)
    name = f"nsyskit-userbase-{secrets.token_hex(4)}"
    subprocess.run(["docker", "run", "-d", "--name", name, built.plan.content_ref, "sleep", "infinity"], check=True, capture_output=True)
    try:
        yield testinfra.get_host(f"docker://{name}")
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def test_the_base_s_python_environment_and_packages_are_kept(user_host):
    assert user_host.run("command -v python3").stdout.strip() == "/opt/venv/bin/python3"
    found = user_host.run("python3 -c 'import matplotlib, torch; print(matplotlib.__version__, matplotlib.__file__, torch.__file__)'")
    assert found.rc == 0, found.stderr
    version, matplotlib_file, torch_file = found.stdout.split()
    assert version.startswith("3.6.") and matplotlib_file.startswith("/usr/lib/python3/dist-packages/")  # Debian's, kept
    assert torch_file.startswith("/opt/venv/")  # what the base lacked went into its own environment


def test_the_kit_s_parts_are_there(user_host):
    assert "2022.4" in user_host.run("nsys --version").stdout
    assert user_host.file("/usr/local/bin/nsys-profile").mode & 0o111
    assert user_host.file("/nsyskit/stephook/sitecustomize.py").is_file
    assert user_host.run("mpirun --version").rc == 0
    assert user_host.run("cd /tmp && nsyskit wrap --help").rc == 0


def test_a_loop_in_the_user_s_environment_is_profiled_with_its_window(user_host):
    assert user_host.run(f"cat > /tmp/loop.py <<'EOF'\n{LOOP}EOF").rc == 0
    done = user_host.run("cd /tmp && RANK=0 nsyskit wrap --out /tmp/w --profile-steps 2-3 --trace nvtx,osrt -- python3 /tmp/loop.py")
    assert done.rc == 0, done.stderr
    (steps,) = [n for n in user_host.file("/tmp/w/logs").listdir() if n.endswith(".steps.json")]
    assert json.loads(user_host.file(f"/tmp/w/logs/{steps}").content_string) == {
        "steps": 4, "window": [2, 3], "opened": True, "closed": True}  # fmt: skip
    assert [n for n in user_host.file("/tmp/w").listdir() if n.endswith(".sqlite")]
