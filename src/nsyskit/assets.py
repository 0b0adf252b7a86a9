"""Where the kit's own files are (Dockerfile, Container-Root/, k8s/ and slurm/ templates, profiles/): the project
folder when it has them (a checkout), else the copy shipped in the package (a pip install, run from any folder)."""

from __future__ import annotations

from pathlib import Path

PACKAGED = Path(__file__).resolve().parent / "_kit"  # in a checkout: links to the repository's top-level folders
MARKERS = ("Dockerfile", "Container-Root")  # a project folder holding these is a checkout: its own files are used


def kit_root(project: Path | str) -> Path:
    """The folder holding Dockerfile, Container-Root/, k8s/, slurm/ and profiles/ for this project."""
    project = Path(project)
    return project if all((project / name).exists() for name in MARKERS) else PACKAGED
