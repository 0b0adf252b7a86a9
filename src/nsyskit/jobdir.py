"""Job folders jobs/<job-id>/ that deployments render into, their job.json record and the 'last job' pointer."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nsyskit.errors import JobError, JobNotFound

JOBS = "jobs"
RECORD = "job.json"


def jobs_root(root: Path) -> Path:
    """The folder holding every job folder of a project (git-ignored)."""
    return Path(root).resolve() / JOBS


def _make_job_dir(root: Path, target: str) -> Path:
    """A fresh, empty folder jobs/<target>-<UTC time>[-n]/ holding only its job.json."""
    base = jobs_root(root)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    if base.exists() and not base.is_dir():
        raise JobError(f"{base} is a file, but job folders go there", fix="move that file away")
    try:
        base.mkdir(parents=True, exist_ok=True)
        for n in range(1000):
            folder = base / (f"{target}-{stamp}" + (f"-{n}" if n else ""))
            try:
                folder.mkdir()
            except FileExistsError:
                continue
            write_record(folder, target=target, job_dir=folder.name)
            return folder
    except OSError as exc:
        raise JobError(
            f"cannot create a job folder under {base} ({exc.strerror})", fix=f"make {base} a writable folder"
        ) from None
    raise JobError(f"could not make a fresh job folder under {base}", fix="remove old job folders")


@contextmanager
def fresh_job_dir(root: Path, target: str) -> Iterator[Path]:
    """A new job folder to render into: removed again if the block fails; once it succeeds, the last job of TARGET."""
    folder = _make_job_dir(root, target)
    try:
        yield folder
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # a failed render leaves nothing behind
        raise
    (folder.parent / f"last-{target}").write_text(folder.name + "\n")


def read_record(job_dir: Path) -> dict[str, Any]:
    """The job.json record of a job folder ({} when there is none)."""
    path = Path(job_dir) / RECORD
    if not path.is_file():
        return {}
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise JobError(
            f"{path} cannot be read as a job record ({exc})", fix="repair or remove that job folder"
        ) from None
    if not isinstance(record, dict):
        raise JobError(f"{path} is not a job record (a JSON object)", fix="repair or remove that job folder")
    return record


def write_record(folder: Path, /, **fields: Any) -> dict[str, Any]:
    """Merge `fields` into the job folder's job.json (e.g. the scheduler's job id once submitted)."""
    # `folder` is positional-only: 'job_dir' is itself one of the recorded fields.
    record = {**read_record(folder), **fields}
    (Path(folder) / RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record


def find_job_dir(root: Path, target: str, job: str | None = None) -> Path:
    """The job folder for `job` (a folder name or the scheduler's job id), or the last one of `target`."""
    base = jobs_root(root)
    if not job:
        pointer = base / f"last-{target}"
        if not pointer.is_file():
            raise JobNotFound(
                f"no {target} job deployed from {root} yet", fix=f"run 'invoke deploy --{target}' or pass --job"
            )
        try:
            name = pointer.read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise JobError(f"{pointer} cannot be read ({exc})", fix="remove it and pass --job") from None
        if not name or "/" in name or name in (".", ".."):
            raise JobError(f"{pointer} holds {name!r}, not a job folder name", fix="remove it and pass --job")
        folder = base / name
        if not folder.is_dir():
            raise JobNotFound(f"the last {target} job folder {folder} is gone", fix="pass --job")
        return folder
    if job in (".", "..") or "/" in job or "\0" in job:
        raise JobNotFound(
            f"--job {job!r} is not a job name", fix=f"give a job folder name from 'ls {base}' or a job id"
        )
    if (base / job).is_dir():
        return base / job
    matches = [d for d in sorted(base.glob(f"{target}-*")) if str(read_record(d).get("job_id")) == str(job)]
    if not matches:
        raise JobNotFound(
            f"job {job!r}: no {target} job folder under {base} has that name or job id", fix=f"check 'ls {base}'"
        )
    return matches[-1]
