"""The run folder reports/<run-id>/ on the host: its id, its layout, and its run.json (schema: nsyskit.runrecord)."""

from __future__ import annotations

import re
import secrets
import time
from pathlib import Path

from nsyskit import runrecord
from nsyskit.config import Config
from nsyskit.config.schema import key_of, settings
from nsyskit.errors import NsyskitError, UsageError
from nsyskit.ranks import workloads
from nsyskit.redact import hide_url_credentials
from nsyskit.runrecord import LOGS, RUN_JSON, RankStatus, RunRecord, checksums, world_sizes  # noqa: F401

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,62}")  # no '_': it separates the fields of report names


def new_run_id() -> str:
    """A sortable, unique id: UTC time plus 4 random hex digits, e.g. 20261121-223000-ab12."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def check_run_id(run_id: str) -> str:
    """The run id if it can name containers and report files, else a UsageError saying what is allowed."""
    if not RUN_ID.fullmatch(run_id):
        raise UsageError(f"--run-id {run_id!r} is not a run id",
                         fix="use letters, digits, '.' and '-' (no '_'), at most 63 characters")  # fmt: skip
    return run_id


def make_run_dir(root: Path, cfg: Config, run_id: str) -> Path:
    """Create reports/<run-id>/ and its logs/ folder (an existing run id is refused: reports are never overwritten)."""
    run_dir = Path(root) / cfg.report_dir / run_id
    if run_dir.exists():
        raise UsageError(f"run folder {run_dir} exists already", fix="pick another --run-id")
    try:
        (run_dir / LOGS).mkdir(parents=True)
    except OSError as exc:
        raise NsyskitError(f"cannot create the run folder {run_dir} under REPORT_DIR={cfg.report_dir} ({exc.strerror})",
                           fix="set REPORT_DIR to a writable folder") from None  # fmt: skip
    return run_dir


def rank_statuses(run_dir: Path) -> list[RankStatus]:
    """The status files the ranks' wrappers wrote, by rank."""
    return runrecord.read_statuses(str(run_dir))


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
        "nccl_tests": names(f"{workloads.OUTPUT_FOLDER}/*.out"),  # WORKLOAD=nccl-tests: rank 0's output of each test
        "logs": names(f"{LOGS}/*.log"),
        "statuses": names(f"{LOGS}/*{runrecord.STATUS_SUFFIX}"),
    }


def config_snapshot(cfg: Config) -> dict[str, object]:
    """Every setting's value and where it came from; credentials in URLs (user:password@, queries) hidden."""
    snapshot = {}
    for f in settings():
        value = getattr(cfg, f.name)
        if isinstance(value, str):
            value = hide_url_credentials(value)
        snapshot[key_of(f)] = {
            "value": list(value) if isinstance(value, tuple) else value,
            "source": cfg.sources.get(key_of(f), "default"),
        }
    return snapshot


def logs_text(run_dir: Path, extra: tuple[Path, ...] = ()) -> str:
    """The launchers' logs of a run folder (logs/*.log) and any other log files given, as one text."""
    paths = sorted((Path(run_dir) / LOGS).glob("*.log")) + [p for p in extra if Path(p).is_file()]
    return "\n".join(Path(path).read_text(errors="replace") for path in paths)


def nccl_test_record(cfg: Config) -> list[dict[str, object]]:
    """What run.json keeps of each NCCL test run (WORKLOAD=nccl-tests): name, binary, flags, output file; else []."""
    if cfg.workload != "nccl-tests":
        return []
    return [{"name": test.name, "binary": test.binary, "args": list(test.args),
             "output": test.output()} for test in cfg.nccl_test_list]  # fmt: skip


def write_run_record(run_dir: Path, cfg: Config, target: str, run_id: str, log_text: str = "", **values) -> RunRecord:
    """Write RUN_DIR/run.json in the one shape every target's collect writes; returns the record.

    The ranks, checksums, world sizes and files are read from the folder and LOG_TEXT (the example's output);
    VALUES sets the other RunRecord fields (exit_code, ended_how, started, details ...; ranks when already read).
    """
    text = log_text or logs_text(run_dir)
    ranks = values.pop("ranks", None)
    record = RunRecord(
        run_id=run_id, target=target, nodes=cfg.nodes, procs_per_node=cfg.procs_per_node, world_size=cfg.world_size,
        image=cfg.image_ref, profiler=cfg.profiler, profile_ranks=cfg.profile_ranks, config=config_snapshot(cfg),
        ranks=rank_statuses(run_dir) if ranks is None else ranks, checksums=checksums(text), world_sizes=sorted(world_sizes(text)),
        files=outputs(Path(run_dir)), workload=cfg.workload, nccl_tests=nccl_test_record(cfg),
        command=workloads.user_command(cfg.command) if cfg.workload == "command" else [],
    )  # fmt: skip
    for key, value in values.items():
        setattr(record, key, value)
    if record.started is None:  # a cluster job: its ranks' status files hold when each ran
        times = [(s.started, s.ended) for s in record.ranks if s.started and s.ended]
        if times:
            record.started, record.ended = min(t[0] for t in times), max(t[1] for t in times)
            record.duration_s = round(record.ended - record.started, 3)
    record.write(str(run_dir))
    return record
