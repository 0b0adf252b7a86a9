"""The table of bad inputs the battery (test_bad_inputs.py) walks through the real tasks, and the harness that runs them.

Each case is what a user types or leaves lying around: a task line, environment variables, files in the
project (.env, a profile), optionally run as an unprivileged user (root ignores file modes). The promise
checked for each: a non-zero exit, exactly one line on stderr that starts with 'error:', names the key or
file and the value and says the fix, and never a Python traceback.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from fixtures.unprivileged import AS_NOBODY

ROOT = Path(__file__).resolve().parents[2]
INVOKE = ROOT / ".venv" / "bin" / "invoke"
DIR = None  # in Case.files: make a directory at that path
ECR = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
# Environment every case starts from: nothing of the caller's settings, AWS files or Docker host leaks in.
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
            "AWS_CONFIG_FILE": "/nonexistent/aws-config", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-creds",
            "AWS_EC2_METADATA_DISABLED": "true", "NSYSKIT_REGISTRY": "localhost:5000"}  # fmt: skip
HTTP_404 = "{http404}"  # in Case.env: replaced by the URL of a local server that answers 404 to everything
BUILD = "build --dry-run"
K8S = "deploy --k8s --dry-run"
SLURM = "deploy --slurm --dry-run"


@dataclass(frozen=True)
class Case:
    """One bad input: the task line, its environment and project files, and what the one error line must say."""

    id: str
    args: str
    says: tuple[str, ...]
    env: dict[str, str | bytes] = field(default_factory=dict)
    files: dict[str, str | bytes | None] = field(default_factory=dict)  # path in the project -> content (DIR: folder)
    modes: dict[str, int] = field(default_factory=dict)
    nobody: bool = False
    drop: tuple[str, ...] = ()  # project entries removed from the copy (e.g. templates)
    absent: tuple[str, ...] = ()  # commands this user's machine lacks (a login node with no Slurm client, no enroot)


def path_without(names: tuple[str, ...], folder: Path) -> str:
    """A PATH of one folder that links every command of BASE_ENV's PATH but `names`: a machine without them, even
    where this one has them (a test machine with Slurm and enroot installed)."""
    folder.mkdir()
    for directory in reversed(BASE_ENV["PATH"].split(":")):  # the first directory of PATH wins, as in a lookup
        for entry in Path(directory).iterdir() if Path(directory).is_dir() else ():
            if entry.name not in names and os.access(entry, os.X_OK) and not entry.is_dir():
                link = folder / entry.name
                link.unlink(missing_ok=True)
                link.symlink_to(entry)
    return str(folder)


def project_copy() -> Path:
    """A throw-away project: its own tasks.py, .env and profiles/, the read-only inputs linked; readable by nobody."""
    folder = Path(tempfile.mkdtemp(prefix="nsyskit-bad-"))
    folder.chmod(0o755)
    shutil.copy(ROOT / "tasks.py", folder)
    shutil.copy(ROOT / ".env", folder)
    shutil.copytree(ROOT / "profiles", folder / "profiles")
    for name in ("Dockerfile", "Container-Root", "k8s", "slurm"):
        (folder / name).symlink_to(ROOT / name)
    for path in folder.rglob("*"):
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


def prepare(case: Case, project: Path) -> None:
    """Lay out the case's files in the project copy."""
    for name in case.drop:
        target = project / name
        target.unlink() if target.is_symlink() or target.is_file() else shutil.rmtree(target)
    for name, content in case.files.items():
        path = project / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is DIR:
            path.mkdir()
        else:
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
    for name, mode in case.modes.items():
        (project / name).chmod(mode)


def run_case(case: Case, http_404: str = "", timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the case's task line in a fresh project copy, as the user would type it; the project is removed after.

    The result's `left` lists what the task left under jobs/ and reports/ (a failed task must leave nothing).
    """
    project = project_copy()
    try:
        prepare(case, project)
        home = project / "home"
        home.mkdir(mode=0o777)
        home.chmod(0o777)
        # The project on the cluster's shared file system, as Slurm users keep it (a case may say otherwise).
        env: dict[str, str | bytes] = {**BASE_ENV, "HOME": str(home), "NSYSKIT_SLURM_SHARED_DIR": str(project), **case.env}
        env = {k: v.replace(HTTP_404, http_404) if isinstance(v, str) else v for k, v in env.items()}
        if case.absent:
            env["PATH"] = path_without(case.absent, project / "bin")
        argv = [*(AS_NOBODY if case.nobody else []), str(INVOKE), *shlex.split(case.args)]
        environb = {os.fsencode(k): v if isinstance(v, bytes) else os.fsencode(v) for k, v in env.items()}
        result = subprocess.run(argv, cwd=project, env=environb, capture_output=True, timeout=timeout)
        out, err = (result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace"))
        completed = subprocess.CompletedProcess(argv, result.returncode, out, err)
        made = {Path(name) for name in case.files} | {parent for name in case.files for parent in Path(name).parents}
        completed.left = sorted(  # type: ignore[attr-defined]
            str(p.relative_to(project)) for d in ("jobs", "reports") if (project / d).is_dir()
            for p in (project / d).rglob("*") if p.relative_to(project) not in made
        )  # fmt: skip
        return completed
    finally:
        shutil.rmtree(project, ignore_errors=True)
