"""Slurm command lists and the parsing of what Slurm answers (the real Slurm is in tests/integration/test_slurm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsyskit.config import load_config
from nsyskit.errors import CommandError, JobFailed
from nsyskit.slurm import scheduler

ROOT = Path(__file__).resolve().parents[2]

# What Slurm 22.05's 'scontrol --oneliner show job' printed for a failed batch job (trimmed).
SCONTROL_FAILED = (
    "JobId=3 JobName=fail.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901757 Nice=0 "
    "Account=(null) QOS=(null) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=1 Restarts=0 "
    "BatchFlag=1 Reboot=0 ExitCode=3:0 RunTime=00:00:00 TimeLimit=UNLIMITED NodeList=node-[1-2] "
    "BatchHost=node-1 NumNodes=2 StdOut=/fsx/p/jobs/slurm-x/slurm-3.out Power= "
)


def cfg(**more):
    return load_config(ROOT, overrides=more, environ={})


def test_commands_carry_the_submit_prefix():
    plain, prefixed = cfg(), cfg(SLURM_SUBMIT_PREFIX="docker exec -i 'ctl node'")
    assert scheduler.sbatch_command(plain, Path("/j/job.sbatch")) == ["sbatch", "--parsable", "/j/job.sbatch"]
    assert scheduler.scancel_command(prefixed, "7") == ["docker", "exec", "-i", "ctl node", "scancel", "7"]
    assert scheduler.scontrol_command(prefixed, "7")[-5:] == ["scontrol", "--oneliner", "show", "job", "7"]
    assert scheduler.sacct_command(plain, "7")[:3] == ["sacct", "--jobs", "7"]


def test_parse_scontrol_and_exit_status():
    fields = scheduler.parse_scontrol(SCONTROL_FAILED)
    assert fields["JobState"] == "FAILED" and fields["ExitCode"] == "3:0" and fields["NodeList"] == "node-[1-2]"
    assert fields["Reason"] == "NonZeroExitCode" and fields["Power"] == ""
    assert scheduler.exit_status("3:0") == 3
    assert scheduler.exit_status("0:0") == 0
    assert scheduler.exit_status("0:9") == 137  # killed by a signal: 128 + signal, as a shell reports it


def test_final_states():
    assert scheduler.JobState("1", "COMPLETED", 0).final and scheduler.JobState("1", "TIMEOUT", 0).final
    assert not scheduler.JobState("1", "RUNNING", 0).final and not scheduler.JobState("1", "PENDING", 0).final


def test_missing_slurm_client_is_one_line_with_the_fix():
    with pytest.raises(CommandError, match="command not found.*SLURM_SUBMIT_PREFIX"):
        scheduler.run(["nsyskit-no-such-sbatch", "--parsable"], "submitting the job")


def test_job_failure_names_state_exit_code_and_log():
    failed = JobFailed("slurm", "3", "FAILED", 3, "/fsx/p/jobs/slurm-x/slurm-3.out", "reason NonZeroExitCode")
    assert failed.exit_code == 3 and failed.job_id == "3" and failed.state == "FAILED"
    assert failed.one_line() == (
        "Slurm job 3 ended FAILED (exit code 3): reason NonZeroExitCode; logs: /fsx/p/jobs/slurm-x/slurm-3.out"
    )
    assert JobFailed("slurm", "4", "CANCELLED", 0, "/l").exit_code == 1  # no exit code of its own: still a failure
    assert JobFailed("slurm", "5", "FAILED", 137, "/l").exit_code == 137
    assert JobFailed("k8s", "nsyskit-k8s-x", "Failed", 3, "l").one_line().startswith("MPIJob nsyskit-k8s-x ended Failed")
