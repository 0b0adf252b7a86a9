"""The local run's pure parts: which rank is blamed, what the run folder yields, the launch commands, rank info."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from nsyskit.config import load_config
from nsyskit.errors import UsageError
from nsyskit.local import cluster, failure, runfolder
from nsyskit.ranks import launch

ROOT = Path(__file__).resolve().parents[2]


def status(rank, exit_code=0, signal=None, ended=0.0, host="worker-0", died=0.0):
    return runfolder.RankStatus(rank, host=host, exit_code=exit_code, signal=signal, ended=ended, died=died)


def test_a_rank_killed_from_outside_is_blamed_over_its_peers_and_the_launchers_sigterm():
    statuses = [status(0, 1, ended=10.0), status(1, 137, ended=12.0), status(2, 143, "SIGTERM", ended=9.0)]
    blamed = failure.blame(statuses)
    assert (blamed.rank, blamed.how) == (1, "was killed by SIGKILL")
    assert blamed.describe() == ("rank 1 on worker-0 was killed by SIGKILL; then rank 2 on worker-0 was killed by "
                                 "SIGTERM; then rank 0 on worker-0 exited with code 1")  # fmt: skip


def test_without_a_kill_the_earliest_error_is_blamed():
    assert failure.blame([status(0, 1, ended=5.0), status(1, 2, ended=3.0), status(2)]).rank == 1


def test_the_rank_killed_first_is_named_though_its_status_was_written_last_then_the_others_in_order(tmp_path):
    # kill -9 of rank 1 at t=100.0: Gloo aborts rank 0 (100.4), the launcher SIGTERMs rank 2 (100.9). Rank 1's nsys
    # took longest to write its report, so its status file came last, and its wrapper ended last.
    deaths = [status(0, 134, "SIGABRT", ended=104.0, died=100.4), status(2, 143, "SIGTERM", ended=105.0, died=100.9),
              status(1, 137, ended=111.0, died=100.0), status(3, 0, ended=103.0, died=102.5)]  # fmt: skip
    for written in deaths:  # in this order, each a moment after the one before
        runfolder.runrecord.write_status(str(tmp_path), f"r_node0_rank{written.rank}_worker-0", written)
    blamed = failure.blame(runfolder.rank_statuses(tmp_path))
    assert blamed.describe() == ("rank 1 on worker-0 was killed by SIGKILL; then rank 0 on worker-0 was killed by "
                                 "SIGABRT; then rank 2 on worker-0 was killed by SIGTERM")  # fmt: skip
    assert blamed.to_dict() == {
        "rank": 1, "host": "worker-0", "exit_code": 137, "how": "was killed by SIGKILL",
        "then": [{"rank": 0, "host": "worker-0", "exit_code": 134, "how": "was killed by SIGABRT"},
                 {"rank": 2, "host": "worker-0", "exit_code": 143, "how": "was killed by SIGTERM"}],
    }  # fmt: skip


def test_a_kill_is_preferred_over_an_abort_timed_just_before_it_but_not_long_after():
    # Death times a moment apart do not order a peer's abort after the kill that caused it (scheduling under load).
    near = [status(0, 134, "SIGABRT", died=50.0), status(1, 137, died=50.0 + failure.SIMULTANEOUS_S - 0.5)]
    assert failure.blame(near).rank == 1
    # An abort well before a kill (an OOM kill of a rank waiting on the aborted one) is the cause.
    apart = [status(0, 134, "SIGABRT", died=50.0), status(1, 137, died=50.0 + failure.SIMULTANEOUS_S + 5)]
    first, then = "rank 0 on worker-0 was killed by SIGABRT", "then rank 1 on worker-0 was killed by SIGKILL"
    assert failure.blame(apart).describe() == f"{first}; {then}"
    # Errors are ordered by when the application died, not by when the wrapper ended.
    assert failure.blame([status(0, 1, ended=20.0, died=5.0), status(1, 1, ended=7.0, died=6.0)]).rank == 0


def test_many_later_failures_are_counted_after_the_first_three():
    statuses = [status(rank, 143, "SIGTERM", died=10.0 + rank) for rank in range(1, 7)] + [status(0, 1, died=1.0)]
    assert failure.blame(statuses).describe() == (
        "rank 0 on worker-0 exited with code 1; then rank 1 on worker-0 was killed by SIGTERM; then rank 2 on worker-0 "
        "was killed by SIGTERM; then rank 3 on worker-0 was killed by SIGTERM; then 3 more ranks"
    )


def test_the_launchers_verdict_when_no_wrapper_recorded_a_failure():
    mpirun = "Process name: [[40310,1],3]\n  Exit code:    1\n"
    assert failure.blame([status(0)], mpirun).rank == 3
    signalled = "mpirun noticed that process rank 2 with PID 88 on node worker-1 exited on signal 9 (Killed)."
    verdict = failure.launcher_verdict(signalled)
    assert (verdict.rank, verdict.host, verdict.how) == (2, "worker-1", "was killed by SIGKILL")
    torchrun = "Root Cause (first observed failure):\n[0]:\n  time      : x\n  host      : worker-0\n  rank      : 1 (local_rank: 1)\n"
    assert failure.launcher_verdict(torchrun).rank == 1
    assert failure.blame([]) is None


def test_run_folder_parsing(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "r_node0_rank1_h.status.json").write_text(
        json.dumps({"rank": 1, "host": "h", "exit_code": 137, "signal": None, "ended": 2.0})
    )
    (tmp_path / "logs" / "broken.status.json").write_text("{")
    (tmp_path / "r_node0_rank1_h.nsys-rep").write_text("")
    assert [(s.rank, s.exit_code) for s in runfolder.rank_statuses(tmp_path)] == [(1, 137)]
    log = "[rank 0] world_size=2 local_rank=0\n[rank 1] checksum=abc param_sum=1\n[rank 0] checksum=abc param_sum=1"
    assert runfolder.checksums(log) == {0: "abc", 1: "abc"} and runfolder.world_sizes(log) == {2}
    assert runfolder.outputs(tmp_path)["reports"] == ["r_node0_rank1_h.nsys-rep"]


@pytest.mark.parametrize("bad", ["a_b", "", "-x", "x" * 64, "a b"])
def test_run_ids_that_would_break_report_names_are_refused(bad):
    with pytest.raises(UsageError, match="run id.*; fix: use letters"):
        runfolder.check_run_id(bad)
    assert runfolder.check_run_id(runfolder.new_run_id())


def cpu_config(**overrides):
    return load_config(ROOT, profile="local-cpu", overrides={k.upper(): v for k, v in overrides.items()}, environ={})


def test_single_node_runs_torchrun_around_the_wrapper():
    cfg = cpu_config()
    command = launch.torchrun_command(cfg)
    assert command[:3] == ["python3", "-m", "torch.distributed.run"] and "--no-python" in command
    assert command[command.index("--nproc-per-node") + 1] == "2"
    assert command[command.index("--no-python") + 1 :] == launch.rank_command(cfg)


def test_multi_node_launcher_exports_rank_0s_host_and_the_run_id():
    cfg = cpu_config(nodes="2")
    command = launch.mpirun_command(cfg, master_addr="worker-0", job_id="r1")
    assert "MASTER_ADDR=worker-0" in command and "NSYSKIT_JOB_ID=r1" in command
    assert command[command.index("-np") + 1] == "4"
    with pytest.raises(TypeError, match="master_addr"):  # the one way ranks learn rank 0's host: never left out
        launch.mpirun_command(cfg)  # type: ignore[call-arg]
    assert cluster.hostfile(cfg) == "worker-0 slots=2\nworker-1 slots=2\n"
    script = cluster.launcher_script(cfg, "r1")
    assert "for host in worker-0 worker-1;" in script
    assert script.index("ssh -o BatchMode=yes") < script.index("exec mpirun --allow-run-as-root")  # sshd answers first


def test_ssh_keys_are_an_openssh_pair_packed_for_root():
    import io
    import tarfile

    keys = cluster.ssh_keys()
    assert keys["id_ed25519"][0].startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----") and keys["id_ed25519"][1] == 0o600
    assert keys["authorized_keys"][0] == keys["id_ed25519.pub"][0]
    with tarfile.open(fileobj=io.BytesIO(cluster.tar_of(keys, ".ssh"))) as archive:
        members = {m.name: m for m in archive.getmembers()}
    assert members[".ssh"].isdir() and members[".ssh"].mode == 0o700 and members[".ssh/authorized_keys"].mode == 0o600


@pytest.fixture
def rankinfo():
    sys.path.insert(0, str(ROOT / "Container-Root/nsyskit/workload"))
    try:
        yield importlib.import_module("rankinfo")
    finally:
        sys.path.pop(0)


def test_rank_info_under_mpirun_slurm_and_torchrun(rankinfo):
    ompi = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "worker-0"}  # fmt: skip
    info = rankinfo.detect(ompi)
    assert (info.rank, info.world_size, info.local_rank, info.node, info.master_addr) == (3, 4, 1, 1, "worker-0")
    slurm = {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_NNODES": "2",
             "SLURM_JOB_NODELIST": "gpu-[3-5,8],cpu1", "MASTER_ADDR": "gpu-3"}  # fmt: skip
    info = rankinfo.detect(slurm)
    assert (info.rank, info.world_size, info.local_world_size, info.node, info.master_addr) == (5, 8, 4, 1, "gpu-3")
    # MASTER_ADDR has one source, the launcher: without it mpirun and srun ranks stop with the fix, not a guess.
    for launched, name in ((ompi, "mpirun"), (slurm, "slurm")):
        with pytest.raises(RuntimeError, match=f"unknown under {name}: the launcher must export MASTER_ADDR"):
            rankinfo.detect({k: v for k, v in launched.items() if k != "MASTER_ADDR"})
    torchrun = {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "n0",
        "MASTER_PORT": "1234",
    }
    info = rankinfo.detect(torchrun)
    assert (info.launcher, info.master_addr, info.master_port, info.node) == ("torchrun", "n0", "1234", 0)
    assert rankinfo.detect({}).world_size == 1


def test_rank_statuses_skip_files_that_are_not_a_wrapper_status(tmp_path):
    logs = tmp_path / runfolder.LOGS
    logs.mkdir()
    (logs / "a.status.json").write_text('{"rank": 1, "exit_code": 0}')
    (logs / "b.status.json").write_text('{"rank": 0, "exit')  # half-written
    (logs / "c.status.json").write_text("[1, 2]")
    (logs / "d.status.json").write_text('{"host": "x"}')
    (logs / "e.status.json").write_bytes(b"\xff")
    assert [s.rank for s in runfolder.rank_statuses(tmp_path)] == [1]


def test_an_engine_without_gpu_support_is_named_with_the_fix():
    from docker.errors import APIError

    from nsyskit import engine

    refused = APIError("500 Server Error", explanation='could not select device driver "" with capabilities: [[gpu]]')
    line = str(engine.start_failed(refused, 8, ".env"))
    assert line.startswith("GPUS_PER_NODE=8 (from .env): asks for GPUs") and "fix: set GPUS_PER_NODE=0" in line
    other = str(engine.start_failed(APIError("500", explanation="no space left on device"), 0))
    assert "no space left on device" in other and "fix:" in other
