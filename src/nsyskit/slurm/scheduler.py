"""Talk to Slurm: the command lists of sbatch, scontrol, squeue, sacct and scancel, run here or behind a prefix."""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from nsyskit.clusteranalysis import index_list
from nsyskit.config import Config
from nsyskit.errors import CommandError, JobError, JobNotFound

# Job states after which nothing changes any more (squeue(1) JOB STATE CODES).
FINAL_STATES = {
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
    "BOOT_FAIL", "DEADLINE", "PREEMPTED", "REVOKED", "SPECIAL_EXIT",
}  # fmt: skip
POLL_S = 2.0


@dataclass(frozen=True)
class JobState:
    """What Slurm says about a job: its state, exit code (the batch script's), reason and node list."""

    job_id: str
    state: str
    exit_code: int
    reason: str = ""
    nodes: str = ""

    @property
    def final(self) -> bool:
        """True once the job has ended."""
        return self.state in FINAL_STATES


def prefix(cfg: Config) -> list[str]:
    """SLURM_SUBMIT_PREFIX as a word list (e.g. ['ssh', 'login-node'] or ['docker', 'exec', 'ctl'])."""
    return shlex.split(cfg.slurm_submit_prefix)


def sbatch_command(cfg: Config, script: Path, dependency: str = "") -> list[str]:
    """Submit the script (after `dependency`, e.g. afterok:123, when given); --parsable prints 'JOBID[;CLUSTER]' only."""
    after = [f"--dependency={dependency}"] if dependency else []
    return [*prefix(cfg), "sbatch", "--parsable", *after, str(script)]


def scontrol_command(cfg: Config, job_id: str) -> list[str]:
    """One line 'Key=Value ...' about the job while slurmctld remembers it (MinJobAge after its end)."""
    return [*prefix(cfg), "scontrol", "--oneliner", "show", "job", str(job_id)]


def sacct_command(cfg: Config, job_id: str) -> list[str]:
    """The accounting record of the job and its steps (needs accounting storage on the cluster)."""
    fields = "JobID,JobName,State,ExitCode,Elapsed,NNodes,NTasks,NodeList"
    return [*prefix(cfg), "sacct", "--jobs", str(job_id), "--parsable2", "--format", fields]


def squeue_command(cfg: Config, job_id: str) -> list[str]:
    """The queue line of the job (pending or running)."""
    return [*prefix(cfg), "squeue", "--jobs", str(job_id), "--format", "%i %j %T %M %l %D %R"]


def scancel_command(cfg: Config, job_id: str) -> list[str]:
    """Cancel the job."""
    return [*prefix(cfg), "scancel", str(job_id)]


def run(cmd: list[str], what: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run one command; a missing program or a failure (when check) is a CommandError naming it."""
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise CommandError(
            what, cmd, 127, f"{cmd[0]}: command not found (install Slurm's client or set SLURM_SUBMIT_PREFIX)"
        ) from None
    except OSError as exc:  # a folder or a file that is not a program (SLURM_SUBMIT_PREFIX)
        raise CommandError(
            what, cmd, 126, f"{cmd[0]}: cannot run it ({exc.strerror}); check SLURM_SUBMIT_PREFIX"
        ) from None
    if check and result.returncode != 0:
        raise CommandError(what, cmd, result.returncode, result.stderr or result.stdout)
    return result


def submit(cfg: Config, script: Path, dependency: str = "") -> str:
    """sbatch the script (after `dependency` when given) and return the job id."""
    out = run(sbatch_command(cfg, script, dependency), "submitting the job").stdout.strip()
    job_id = out.split(";")[0].strip()
    if not job_id.isdigit():
        raise JobError(f"sbatch printed {out!r} instead of a job id", fix="check 'sbatch --parsable' on this cluster")
    return job_id


def parse_scontrol(text: str) -> dict[str, str]:
    """Key=Value pairs of 'scontrol --oneliner show job' (values have no blanks in the keys we read)."""
    return dict(re.findall(r"(\w[\w/:]*)=(\S*)", text))


def exit_status(code: str) -> int:
    """Slurm's 'EXIT:SIGNAL' as one number: the exit code, else 128 + signal."""
    exit_part, _, signal = code.partition(":")
    value = int(exit_part or 0)
    return value if value or not signal or signal == "0" else 128 + int(signal)


def query(cfg: Config, job_id: str) -> JobState | None:
    """The job's state from scontrol, else from sacct; None when Slurm no longer knows the job."""
    result = run(scontrol_command(cfg, job_id), "asking Slurm about the job", check=False)
    if result.returncode == 0 and "JobState=" in result.stdout:
        fields = parse_scontrol(result.stdout)
        return JobState(job_id, fields["JobState"], exit_status(fields.get("ExitCode", "0:0")),
                        fields.get("Reason", ""), fields.get("NodeList", ""))  # fmt: skip
    result = run(sacct_command(cfg, job_id), "asking Slurm accounting about the job", check=False)
    for line in result.stdout.splitlines()[1:] if result.returncode == 0 else []:
        cols = line.split("|")
        if cols[0] == str(job_id):
            state = cols[2].split()[0]  # 'CANCELLED by 0' -> CANCELLED
            return JobState(job_id, state, exit_status(cols[3]), "", cols[7])
    return None


def array_states(cfg: Config, array_id: str) -> dict[int, JobState]:
    """The state of each element of an array job ({} before Slurm lists it): scontrol's lines (pending elements
    come as one line of a range), else sacct's."""
    states: dict[int, JobState] = {}
    result = run(scontrol_command(cfg, array_id), "asking Slurm about the array job", check=False)
    for line in result.stdout.splitlines() if result.returncode == 0 else []:
        fields = parse_scontrol(line)
        if "ArrayTaskId" in fields and "JobState" in fields:
            for index in index_list(fields["ArrayTaskId"]):
                states[index] = JobState(f"{array_id}_{index}", fields["JobState"],
                                         exit_status(fields.get("ExitCode", "0:0")), fields.get("Reason", ""))  # fmt: skip
    if states:
        return states
    result = run(sacct_command(cfg, array_id), "asking Slurm accounting about the array job", check=False)
    for line in result.stdout.splitlines()[1:] if result.returncode == 0 else []:
        cols = line.split("|")
        job, _sep, tasks = cols[0].partition("_")
        if job == str(array_id) and tasks and "." not in tasks:
            for index in index_list(tasks):
                states[index] = JobState(f"{array_id}_{index}", cols[2].split()[0], exit_status(cols[3]))
    return states


def wait(cfg: Config, job_id: str, poll_s: float = POLL_S, on_poll=None) -> JobState:
    """Poll until the job has ended; on_poll(state) is called after every poll (progress)."""
    while True:
        state = query(cfg, job_id)
        if state is None:
            raise JobNotFound(
                f"Slurm no longer knows job {job_id} (neither scontrol nor sacct)",
                fix="raise MinJobAge or enable accounting",
            )
        if on_poll:
            on_poll(state)
        if state.final:
            return state
        time.sleep(poll_s)


def cancel(cfg: Config, job_id: str) -> None:
    """scancel the job."""
    run(scancel_command(cfg, job_id), "cancelling the job")


def describe(cfg: Config, job_id: str) -> list[str]:
    """Human lines about the job: scontrol's state, squeue's line while queued/running, sacct's steps if it has them."""
    lines = []
    state = query(cfg, job_id)
    if state is None:
        lines.append(f"job {job_id}: unknown to Slurm now (ended longer ago than MinJobAge, and no accounting)")
    else:
        reason = f", reason {state.reason}" if state.reason and state.reason != "None" else ""
        lines.append(f"job {job_id}: {state.state}, exit code {state.exit_code}{reason}, nodes {state.nodes or '-'}")
        if not state.final:
            queue = run(squeue_command(cfg, job_id), "asking squeue", check=False)
            lines += [line for line in queue.stdout.splitlines() if line.strip()]
    acct = run(sacct_command(cfg, job_id), "asking sacct", check=False)
    if acct.returncode == 0 and len(acct.stdout.splitlines()) > 1:
        lines += ["sacct:"] + ["  " + line.replace("|", "  ") for line in acct.stdout.splitlines()]
    return lines
