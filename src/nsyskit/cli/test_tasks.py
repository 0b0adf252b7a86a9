"""The task that runs the project's own checks: lint, then the whole test suite against real components."""

from __future__ import annotations

import shlex
import sys

from nsyskit import console
from nsyskit.cli import load, project_root, task

TEST_PROFILE = "local-cpu"


@task(
    help={
        "unit": "Only the unit tests (no Docker engine needed).",
        "image": "Only the testinfra checks of the image built from the local-cpu profile.",
        "k": "Only tests matching this pytest -k expression.",
        "args": "Extra arguments passed to pytest as they are.",
        "lint": "Run ruff first (default: yes; --no-lint skips it).",
    }
)
def test(c, unit=False, image=False, k=None, args="", lint=True):
    """Lint and run the test suite; prepares the engine and the local-cpu base image first."""
    from nsyskit.setup import run_setup

    root = project_root(c)
    if lint:
        c.run(f"{shlex.quote(sys.executable)} -m ruff check {shlex.quote(str(root))}", echo=True)
    paths = ["tests/unit"] if unit else ["tests/image"] if image else ["tests"]
    if not unit:
        report = run_setup(load(c, TEST_PROFILE))
        for line in report.done:
            console.done(line)
    pytest = [sys.executable, "-m", "pytest", *paths]
    if k:
        pytest += ["-k", k]
    command = " ".join(shlex.quote(part) for part in pytest) + (f" {args}" if args else "")
    with c.cd(str(root)):
        c.run(command, echo=True, pty=False)
