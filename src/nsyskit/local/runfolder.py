"""The run folder reports/<run-id>/: its id, its layout, what the ranks left in it, and run.json."""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from nsyskit.config import Config
from nsyskit.config.schema import key_of, settings

LOGS = "logs"
RUN_JSON = "run.json"
CHECKSUM_LINE = re.compile(r"\[rank (\d+)\] checksum=(\w+)")
WORLD_SIZE_LINE = re.compile(r"\[rank (\d+)\] world_size=(\d+)")
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,62}")  # no '_': it separates the fields of report names


def new_run_id() -> str:
    """A sortable, unique id: UTC time plus 4 random hex digits, e.g. 20261121-223000-ab12."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def check_run_id(run_id: str) -> str:
    """The run id if it can name containers and report files, else ValueError saying what is allowed."""
    if not RUN_ID.fullmatch(run_id):
        raise ValueError(
            f"--run-id {run_id!r} is not a run id; fix: use letters, digits, '.' and '-' (no '_'), at most 63 characters"
        )
    return run_id


def make_run_dir(root: Path, cfg: Config, run_id: str) -> Path:
    """Create reports/<run-id>/ and its logs/ folder (an existing run id is refused: reports are never overwritten)."""
    run_dir = Path(root) / cfg.report_dir / run_id
    if run_dir.exists():
        raise FileExistsError(f"run folder {run_dir} exists already; fix: pick another --run-id")
    (run_dir / LOGS).mkdir(parents=True)
    return run_dir


@dataclass
class RankStatus:
    """What the wrapper recorded for one rank (logs/<name>.status.json)."""

    rank: int
    host: str
    exit_code: int
    signal: str | None
    ended: float
    profiled: bool
    report: str | None
    sqlite: str | None
    raw: dict = field(repr=False, default_factory=dict)


def rank_statuses(run_dir: Path) -> list[RankStatus]:
    """The status files the ranks' wrappers wrote, by rank."""
    statuses = []
    for path in sorted((run_dir / LOGS).glob("*.status.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a rank killed while writing: the atomic rename makes this rare; its log still says why
        if not isinstance(data, dict) or not isinstance(data.get("rank"), int):
            continue  # not a status the wrapper wrote
        statuses.append(
            RankStatus(
                rank=data["rank"],
                host=data.get("host", "?"),
                exit_code=data.get("exit_code", 0),
                signal=data.get("signal"),
                ended=data.get("ended", 0.0),
                profiled=data.get("profiled", False),
                report=data.get("report"),
                sqlite=data.get("sqlite"),
                raw=data,
            )  # fmt: skip
        )
    return sorted(statuses, key=lambda s: s.rank)


def checksums(log_text: str) -> dict[int, str]:
    """rank -> parameter checksum printed by the example."""
    return {int(rank): value for rank, value in CHECKSUM_LINE.findall(log_text)}


def world_sizes(log_text: str) -> set[int]:
    """Every world size the ranks logged at start."""
    return {int(size) for _rank, size in WORLD_SIZE_LINE.findall(log_text)}


def outputs(run_dir: Path) -> dict[str, list[str]]:
    """The files the run left, relative to the run folder, by kind."""

    def names(pattern: str) -> list[str]:
        return sorted(str(path.relative_to(run_dir)) for path in run_dir.glob(pattern))

    return {
        "reports": names("*.nsys-rep"),
        "sqlite": names("*.sqlite"),
        "ncu_reports": names("*.ncu-rep"),
        "torch_traces": names("*.pt.trace.json.gz"),
        "commands": names("*.cmd"),
        "nccl_logs": names("*.nccl.log"),
        "logs": names(f"{LOGS}/*.log"),
        "statuses": names(f"{LOGS}/*.status.json"),
    }


def config_snapshot(cfg: Config) -> dict[str, object]:
    """Every setting's value and where it came from."""
    snapshot = {}
    for f in settings():
        value = getattr(cfg, f.name)
        snapshot[key_of(f)] = {
            "value": list(value) if isinstance(value, tuple) else value,
            "source": cfg.sources.get(key_of(f), "default"),
        }
    return snapshot


def write_run_json(run_dir: Path, record: dict) -> Path:
    """Write run.json (atomically) and return its path."""
    path = run_dir / RUN_JSON
    path.with_suffix(".tmp").write_text(json.dumps(record, indent=2, default=str) + "\n")
    path.with_suffix(".tmp").replace(path)
    return path
