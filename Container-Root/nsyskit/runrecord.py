"""The run record, one contract for image and host: each rank's status file, reports/<id>/run.json, the example's lines.

This file is the single source: the wrapper in the image imports it from /nsyskit (Container-Root/ is copied to /),
the host imports it as nsyskit.runrecord (src/nsyskit/runrecord.py links here). Standard library only, and Python
3.8+ (the image's python3), so it can run on both sides.

Schema versions: 1 is every run.json written before the field existed (a local run's and Slurm collect's shapes,
read through `RunRecord.from_dict`); 2 (SCHEMA_VERSION) is the one shape every target's collect writes now.
Fields added within version 2 (workload, nccl_tests, command) are optional: readers of any version ignore keys they do not
know, and a record without them reads as the DDP example's, the only workload there was before.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field, fields

SCHEMA_VERSION = 2
RUN_JSON = "run.json"
LOGS = "logs"  # the ranks' status files and the launchers' logs, inside a run folder
STATUS_SUFFIX = ".status.json"
TARGETS = ("local", "slurm", "k8s", "wrap")  # wrap: ranks of the user's own launch line (nsyskit wrap)

# The example's lines (Container-Root/nsyskit/workload/train.py prints them; the host follows and parses them).
LINE_PREFIX = "[rank {rank}] "
STEP_MARK = r"\[rank \d+\] step (\d+)/(\d+) "  # the start of a step line: iteration / total
STEP_TIME_KEY = "step_ms"  # the field holding the step time, in milliseconds
STEP_LINE = re.compile(r"\[rank (\d+)\] step (\d+)/(\d+) .*?step_ms=([\d.]+) tokens_per_s=(\d+)")
CHECKSUM_LINE = re.compile(r"\[rank (\d+)\] checksum=(\w+)")
WORLD_SIZE_LINE = re.compile(r"\[rank (\d+)\] world_size=(\d+)")
# The model's training FLOPs of one step on one GPU and the dtype of its math, as the example marks them: the text
# of an NVTX range inside the profiled window, so the analysis finds them in the report itself, wherever it runs
# (here, or in a cluster's map), and a run.json from any version stays as it was. The example prints it too.
FLOPS_MARK_PREFIX = "nsyskit model "
FLOPS_MARK = re.compile(r"nsyskit model flops_per_step=(\d+) dtype=(\w+)")


class RunRecordError(ValueError):
    """A run.json or status file this version cannot read; `fix` says what to do (the host wraps it as an NsyskitError)."""

    def __init__(self, path: str, problem: str, fix: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem, self.fix = str(path), problem, fix


def line(rank: int, message: str) -> str:
    """One line of the example's output, tagged with its rank."""
    return LINE_PREFIX.format(rank=rank) + message


def step_line(rank: int, step: int, total: int, loss: float, step_s: float, tokens_per_s: float, cpu_s: float) -> str:
    """The line rank 0 prints after each training step (STEP_LINE and STEP_MARK parse it)."""
    return line(rank, f"step {step}/{total} loss={loss:.4f} {STEP_TIME_KEY}={step_s * 1e3:.1f} "
                      f"tokens_per_s={tokens_per_s:.0f} cpu_ms={cpu_s * 1e3:.1f}")  # fmt: skip


def checksum_line(rank: int, checksum: str, param_sum: float) -> str:
    """The line every rank prints at the end: its parameters' checksum (equal on all ranks: they stayed in sync)."""
    return line(rank, f"checksum={checksum} param_sum={param_sum:.6f}")


def flops_mark(flops_per_step: float, dtype: str) -> str:
    """The text of the example's FLOPs mark: FLOPs of one training step on one GPU (whole), the math's dtype."""
    return f"{FLOPS_MARK_PREFIX}flops_per_step={int(round(flops_per_step))} dtype={dtype}"


def parse_flops_mark(text: str) -> tuple[float, str] | None:
    """(FLOPs per step per GPU, dtype) of a FLOPs mark's text, else None."""
    found = FLOPS_MARK.fullmatch(text.strip())
    return (float(found.group(1)), found.group(2)) if found else None


def parse_step(text: str) -> tuple[int, int, float, int] | None:
    """(step, total, step_ms, tokens_per_s) of a step line, else None."""
    found = STEP_LINE.search(text)
    return (int(found.group(2)), int(found.group(3)), float(found.group(4)), int(found.group(5))) if found else None


def checksums(text: str) -> dict[int, str]:
    """rank -> parameter checksum, from the example's output."""
    return {int(rank): value for rank, value in CHECKSUM_LINE.findall(text)}


def world_sizes(text: str) -> set[int]:
    """Every world size the ranks logged at start."""
    return {int(size) for _rank, size in WORLD_SIZE_LINE.findall(text)}


@dataclass
class RankStatus:
    """What the wrapper recorded for one rank (logs/<name>.status.json); report and sqlite are file names."""

    rank: int
    local_rank: int = 0
    node: int = 0
    host: str = "?"
    job_id: str = ""
    profiler: str = "nsys"
    profiled: bool = True
    profile_ranks: str = "all"  # the selection that decided `profiled`
    command: list = field(default_factory=list)
    efa_metrics: str = ""  # the decision about '--enable efa_metrics', and why
    exit_code: int = 0
    signal: str | None = None
    started: float = 0.0
    ended: float = 0.0  # when the wrapper ended the rank (after the profiler wrote its report)
    # When the rank's application ended, wall clock, taken by the wrapper as it happened (before the report was
    # written): what orders the failures of a run. 0: not recorded (a wrapper before this field).
    died: float = 0.0
    # False in the status written when the application died, while the profiler still writes the report: exit_code
    # and signal are what was seen then (0 with a note when not); True once the wrapper has ended.
    final: bool = True
    report: str | None = None
    sqlite: str | None = None
    # Whether the sqlite holds NCCL's NVTX payload values (the message sizes): "exported" (nsys export
    # --include-blobs=true), "not exported" (that nsys's export lacks the flag), "" (no export made).
    nccl_payloads: str = ""
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """The status as JSON data, with the schema version."""
        return {"schema_version": SCHEMA_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict) -> RankStatus:
        """A status from JSON data of any version (unknown keys ignored, missing ones defaulted)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for key in ("report", "sqlite"):  # version 1 kept the path inside the container
            if values.get(key):
                values[key] = os.path.basename(str(values[key]))
        return cls(**values)


def status_path(report_dir: str, name: str) -> str:
    """Where the wrapper writes the status of the rank whose reports are named NAME."""
    return os.path.join(report_dir, LOGS, name + STATUS_SUFFIX)


def _write_json(path: str, data: dict) -> None:
    """Write JSON atomically: readers never see half of it."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".tmp", "w") as handle:
        json.dump(data, handle, indent=1, default=str)
        handle.write("\n")
    os.replace(path + ".tmp", path)


def write_status(report_dir: str, name: str, status: RankStatus) -> str:
    """Write one rank's status file; returns its path."""
    path = status_path(report_dir, name)
    _write_json(path, status.to_dict())
    return path


def read_statuses(run_dir: str) -> list[RankStatus]:
    """The status files the ranks' wrappers left in RUN_DIR/logs, by rank (unreadable ones are skipped)."""
    folder, found = os.path.join(str(run_dir), LOGS), []
    names = sorted(n for n in os.listdir(folder) if n.endswith(STATUS_SUFFIX)) if os.path.isdir(folder) else []
    for name in names:
        try:
            with open(os.path.join(folder, name)) as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            continue  # a rank killed while writing: the atomic rename makes this rare; its log still says why
        if is_rank_status(data):
            found.append(RankStatus.from_dict(data))
    return sorted(found, key=lambda status: status.rank)


def is_rank_status(data: object) -> bool:
    """True for a rank's status as JSON data: an object with an integer rank (JSON's true is not a rank)."""
    return isinstance(data, dict) and isinstance(data.get("rank"), int) and not isinstance(data["rank"], bool)


def rank_list(ranks) -> str:
    """'1,3' for ranks [3, 1]."""
    return ",".join(str(rank) for rank in sorted(ranks))


@dataclass
class RunRecord:
    """reports/<run-id>/run.json: one run, whichever target ran it."""

    run_id: str
    target: str  # local, slurm or k8s
    schema_version: int = SCHEMA_VERSION
    started: float | None = None
    ended: float | None = None
    duration_s: float | None = None
    exit_code: int | None = None
    ended_how: str = ""  # 'exited', 'stopped after rank failure', a Slurm state, an MPIJob condition
    nodes: int | None = None
    procs_per_node: int | None = None
    world_size: int | None = None
    image: str = ""
    launcher: str = ""
    profiler: str = ""
    profile_ranks: str = ""
    workload: str = "ddp"  # ddp (the DDP example), nccl-tests or command; a run.json from before the field: ddp, the only one then
    nccl_tests: list = field(default_factory=list)  # WORKLOAD=nccl-tests: {name, binary, args, output} per test, in order
    command: list = field(default_factory=list)  # WORKLOAD=command (or nsyskit wrap): what one rank ran, as words
    config: dict = field(default_factory=dict)  # setting -> {"value", "source"}
    ranks: list = field(default_factory=list)  # RankStatus, by rank
    checksums: dict = field(default_factory=dict)  # rank -> parameter checksum
    world_sizes: list = field(default_factory=list)
    files: dict = field(default_factory=dict)  # kind -> names relative to the run folder
    failed_rank: dict | None = None
    details: dict = field(default_factory=dict)  # what only one target has: containers, Slurm job id, MPIJob name

    def unprofiled(self) -> list[int]:
        """The ranks whose status says they ran without a profiler (a rank that left no status is not claimed)."""
        return sorted({status.rank for status in self.ranks if not status.profiled})

    def unprofiled_line(self) -> str:
        """'ranks 1,3 were not profiled (PROFILE_RANKS=local0)', or '' when every rank was."""
        ranks = self.unprofiled()
        if not ranks:
            return ""
        selection = self.profile_ranks or next((s.profile_ranks for s in self.ranks if not s.profiled), "")
        noun = "rank" if len(ranks) == 1 else "ranks"
        verb = "was" if len(ranks) == 1 else "were"
        return f"{noun} {rank_list(ranks)} {verb} not profiled" + (f" (PROFILE_RANKS={selection})" if selection else "")

    def to_dict(self) -> dict:
        """The record as JSON data."""
        data = asdict(self)
        data["ranks"] = [status.to_dict() for status in self.ranks]
        data["checksums"] = {str(rank): value for rank, value in sorted(self.checksums.items())}
        data["unprofiled_ranks"] = self.unprofiled()  # derived, for readers of the JSON alone
        return data

    @classmethod
    def from_dict(cls, data: dict, path: str = RUN_JSON) -> RunRecord:
        """A record from run.json data of this or an earlier version; RunRecordError for a later one or no record."""
        if not isinstance(data, dict):
            raise RunRecordError(path, "is not a run record (not a JSON object)", "remove it, or collect the run again")
        version = data.get("schema_version", 1)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise RunRecordError(path, f"has schema_version {version!r}, newer than this nsyskit reads ({SCHEMA_VERSION})",
                                 "upgrade nsyskit (git pull; make install)")  # fmt: skip
        try:
            known = {f.name for f in fields(cls)} - {"ranks", "schema_version", "details"}
            values = {k: v for k, v in data.items() if k in known}
            details = dict(data.get("details") or {})
            if version == 1:  # the earlier shapes: a local run's (no 'target') and Slurm collect's (files as a list)
                values.setdefault("target", "local")
                details.update({k: v for k, v in data.items() if k not in known and k not in ("ranks", "schema_version")})
                if "state" in data and not values.get("ended_how"):
                    values["ended_how"] = str(data["state"])
                if isinstance(values.get("files"), list):
                    values["files"] = {"files": values["files"]}
            values.setdefault("run_id", os.path.basename(os.path.dirname(os.path.abspath(path))))
            values.setdefault("target", "local")
            values["checksums"] = {int(r): c for r, c in (values.get("checksums") or {}).items() if str(r).isdigit()}
            entries = data.get("ranks") if isinstance(data.get("ranks"), list) else []
            ranks = [RankStatus.from_dict(e) for e in entries if is_rank_status(e)]
            if not values.get("profile_ranks"):
                values["profile_ranks"] = _setting(values.get("config"), "PROFILE_RANKS")
            if not values.get("profiler"):
                values["profiler"] = _setting(values.get("config"), "PROFILER")
            if not values.get("workload"):  # a record from before the field: its config's, else the DDP example
                values["workload"] = _setting(values.get("config"), "WORKLOAD") or "ddp"
            for listed in ("nccl_tests", "command"):
                if not isinstance(values.get(listed, []), list):
                    raise TypeError(f"{listed} is {type(values[listed]).__name__}, not a list")
            return cls(**values, ranks=sorted(ranks, key=lambda s: s.rank), details=details)
        except RunRecordError:
            raise
        except (TypeError, ValueError, AttributeError) as exc:  # a field of another type than this version writes
            raise RunRecordError(path, f"has a field of an unexpected type ({exc})",
                                 "remove it, or collect the run again") from None  # fmt: skip

    def write(self, run_dir: str) -> str:
        """Write RUN_DIR/run.json (atomically); returns its path."""
        path = os.path.join(str(run_dir), RUN_JSON)
        _write_json(path, self.to_dict())
        return path


def _setting(config, key: str) -> str:
    """A setting's value from a config snapshot, as text ('' when absent)."""
    entry = config.get(key) if isinstance(config, dict) else None
    value = entry.get("value") if isinstance(entry, dict) else None
    return "" if value is None else str(value)


def read_run(run_dir: str) -> RunRecord | None:
    """RUN_DIR/run.json as a RunRecord; None when there is none; RunRecordError when it cannot be read."""
    path = os.path.join(str(run_dir), RUN_JSON)
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise RunRecordError(path, f"is not readable JSON ({exc})", "remove it, or collect the run again") from None
    return RunRecord.from_dict(data, path)


STEP_HOOK_NOTE = "step hook: "  # how the wrapper starts the notes of the step hook (nsyskit/stephook)


def step_hook_lines(statuses: list) -> list[str]:
    """The step hook's notes of the ranks, each once, naming its ranks: 'ranks 0,1: the program never called ...'."""
    ranks_of: dict[str, list[int]] = {}
    for status in statuses:
        for note in status.notes:
            if note.startswith(STEP_HOOK_NOTE):
                ranks_of.setdefault(note[len(STEP_HOOK_NOTE):], []).append(status.rank)
    return [f"{'rank' if len(ranks) == 1 else 'ranks'} {rank_list(sorted(ranks))}: {note}" for note, ranks in ranks_of.items()]
