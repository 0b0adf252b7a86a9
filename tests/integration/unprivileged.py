"""Test helper: run a command as an unprivileged user (root ignores file modes), in a folder that user can reach."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

NOBODY = ("--reuid=65534", "--regid=65534", "--clear-groups")


def as_nobody(cmd: list[str], env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """`cmd` run as nobody (uid 65534) with setpriv; output captured as text."""
    return subprocess.run(["setpriv", *NOBODY, *cmd], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture
def world_dir():
    """A fresh folder under /tmp that nobody can enter and write (pytest's own tmp folders are root-only)."""
    folder = Path(tempfile.mkdtemp(prefix="nsyskit-nobody-"))
    folder.chmod(0o777)
    yield folder
    for path in [folder, *folder.rglob("*")]:  # the test may have left read-only folders behind
        if path.is_dir():
            path.chmod(0o777)
    shutil.rmtree(folder, ignore_errors=True)
