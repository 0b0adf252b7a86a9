"""invoke setup against the real machine: idempotent, and says so the second time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[2]


def setup() -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NSYSKIT_PROFILE"}
    return subprocess.run([sys.executable, "-m", "invoke", "setup", "--profile", "local-cpu"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def test_setup_twice_does_nothing_the_second_time_and_says_so():
    first = setup()
    assert first.returncode == 0, first.stderr
    image_id = docker.from_env().images.get("nsyskit-base:bookworm").id
    second = setup()
    assert second.returncode == 0, second.stderr
    assert "nothing to do" in second.stdout
    assert "Docker engine" in second.stderr and "base image nsyskit-base:bookworm exists" in second.stderr
    assert docker.from_env().images.get("nsyskit-base:bookworm").id == image_id
