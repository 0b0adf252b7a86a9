"""Job folders jobs/<job-id>/ that deployments render into, their job.json record and the 'last job' pointer."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from nsyskit.errors import NsyskitError

JOBS = "jobs"
RECORD = "job.json"


def jobs_root(root: Path) -> Path:
    """The folder holding every job folder of a project (git-ignored)."""
    return Path(root).resolve() / JOBS


def new_job_dir(root: Path, target: str) -> Path:
    """A fresh, empty folder jobs/<target>-<UTC time>[-n]/ and the 'last job' pointer of `target` set to it."""
    base = jobs_root(root)
    base.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    for n in range(1000):
        folder = base / (f"{target}-{stamp}" + (f"-{n}" if n else ""))
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        write_record(folder, target=target, job_dir=folder.name)
        (base / f"last-{target}").write_text(folder.name + "\n")
        return folder
    raise NsyskitError(f"could not make a fresh job folder under {base}; fix: remove old job folders")


def read_record(job_dir: Path) -> dict[str, Any]:
    """The job.json record of a job folder ({} when there is none)."""
    path = Path(job_dir) / RECORD
    return json.loads(path.read_text()) if path.is_file() else {}


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
            raise NsyskitError(
                f"no {target} job deployed from {root} yet; fix: run 'invoke deploy --{target}' or pass --job"
            )
        folder = base / pointer.read_text().strip()
        if not folder.is_dir():
            raise NsyskitError(f"the last {target} job folder {folder} is gone; fix: pass --job")
        return folder
    if (base / job).is_dir():
        return base / job
    matches = [d for d in sorted(base.glob(f"{target}-*")) if str(read_record(d).get("job_id")) == str(job)]
    if not matches:
        raise NsyskitError(
            f"job {job!r}: no {target} job folder under {base} has that name or job id; fix: check 'ls {base}'"
        )
    return matches[-1]
