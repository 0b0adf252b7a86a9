"""invoke run --local end to end: the kit image (local-cpu), a real Docker engine, real nsys, real torch DDP."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import docker
import pytest
from fixtures.kit_image import ROOT, invoke

pytestmark = [pytest.mark.engine, pytest.mark.slow]

STEPS, WINDOW = 6, (2, 4)
PHASES = ("data", "forward", "backward", "optimizer")


@pytest.fixture
def run_env(kit_image, tmp_path) -> dict[str, str]:
    """Environment that points invoke at the session's kit image and a private report folder."""
    name, _, tag = kit_image.rpartition(":")
    return {"NSYSKIT_IMAGE": name, "NSYSKIT_TAG": tag, "NSYSKIT_REPORT_DIR": str(tmp_path / "reports")}


def run_local(run_env: dict[str, str], run_id: str, *flags: str) -> subprocess.CompletedProcess:
    """invoke run --local with the local-cpu profile and a short training run."""
    return invoke("run", "--local", "--profile", "local-cpu", "--steps", str(STEPS), "--profile-steps", f"{WINDOW[0]}-{WINDOW[1]}",
                  "--run-id", run_id, "--no-progress", *flags, env=run_env, timeout=600)  # fmt: skip


def nvtx_ranges(sqlite_path: Path) -> list[tuple[str, int, int]]:
    """(text, start, end) of every NVTX push/pop range in an nsys sqlite export."""
    with sqlite3.connect(sqlite_path) as db:
        return db.execute(
            "SELECT text, start, end FROM NVTX_EVENTS WHERE eventType = 59 AND end IS NOT NULL"
        ).fetchall()


def leftovers(run_id: str) -> list[str]:
    """Containers and networks of the run still in the engine."""
    client = docker.from_env()
    selector = {"label": f"nsyskit.run={run_id}"}
    return [c.name for c in client.containers.list(all=True, filters=selector)] + [
        n.name for n in client.networks.list(filters=selector)
    ]


def new_run_id(what: str) -> str:
    return f"test-{what}-{uuid.uuid4().hex[:6]}"


def test_two_ranks_leave_reports_with_steps_phases_and_window(run_env):
    run_id = new_run_id("two")
    result = run_local(run_env, run_id)
    run_dir = Path(run_env["NSYSKIT_REPORT_DIR"]) / run_id
    assert result.returncode == 0, result.stderr[-3000:]
    assert "parameters in sync" in result.stdout

    reports = sorted(p.name for p in run_dir.glob("*.nsys-rep"))
    assert reports == [f"{run_id}_node0_rank{r}_worker-0.nsys-rep" for r in (0, 1)]
    for rank in (0, 1):
        ranges = nvtx_ranges(run_dir / f"{run_id}_node0_rank{rank}_worker-0.sqlite")
        names = [text for text, _s, _e in ranges]
        assert sorted(n for n in names if n.startswith("step ")) == sorted(f"step {s}" for s in range(1, STEPS + 1))
        assert all(names.count(phase) == STEPS for phase in PHASES), names
        # The window range spans exactly the steps of PROFILE_STEPS: it contains steps 2-4, and no other step.
        (window,) = [(s, e) for text, s, e in ranges if text == "profile_window"]
        steps = {int(text.split()[1]): (s, e) for text, s, e in ranges if text.startswith("step ")}
        inside = sorted(n for n, (s, e) in steps.items() if window[0] <= s and e <= window[1])
        assert inside == list(range(WINDOW[0], WINDOW[1] + 1))
        # The model's FLOPs per step, marked once inside the window (what analyze's low_mfu reads from the report)
        (mark,) = [(text, s) for text, s, _e in ranges if text.startswith("nsyskit model flops_per_step=")]
        assert window[0] <= mark[1] <= window[1] and mark[0].endswith(" dtype=fp32")

    record = json.loads((run_dir / "run.json").read_text())
    assert record["exit_code"] == 0 and record["world_sizes"] == [2]
    assert len(record["checksums"]) == 2 and len(set(record["checksums"].values())) == 1
    assert record["details"]["commands"]["launcher"][:3] == ["python3", "-m", "torch.distributed.run"]
    assert record["config"]["PROFILE_STEPS"]["value"] == list(WINDOW)
    # The wrapper's record of the exact nsys command line, per rank.
    command = (run_dir / f"{run_id}_node0_rank0_worker-0.cmd").read_text()
    assert command.startswith("nsys profile --trace=nvtx,osrt --sample=none") and "--enable" not in command
    assert leftovers(run_id) == []


def test_two_nodes_of_two_ranks_through_mpirun(run_env):
    run_id = new_run_id("nodes")
    result = run_local(run_env, run_id, "--nodes", "2")
    run_dir = Path(run_env["NSYSKIT_REPORT_DIR"]) / run_id
    assert result.returncode == 0, result.stderr[-3000:]

    expected = [f"{run_id}_node{r // 2}_rank{r}_worker-{r // 2}.nsys-rep" for r in range(4)]
    assert sorted(p.name for p in run_dir.glob("*.nsys-rep")) == expected
    assert len(list(run_dir.glob("*.sqlite"))) == 4
    log = (run_dir / "logs" / "launcher.log").read_text()
    assert len(re.findall(r"\[rank \d\] world_size=4 ", log)) == 4
    checksums = dict(re.findall(r"\[rank (\d+)\] checksum=(\w+)", log))
    assert sorted(checksums) == ["0", "1", "2", "3"] and len(set(checksums.values())) == 1
    record = json.loads((run_dir / "run.json").read_text())
    assert record["details"]["commands"]["launcher"][0] == "mpirun" and record["details"]["commands"]["hostfile"] == [
        "worker-0 slots=2",
        "worker-1 slots=2",
    ]
    assert leftovers(run_id) == []


def test_profiling_only_rank_0_leaves_one_report_and_both_ranks_train(run_env):
    run_id = new_run_id("rank0")
    result = run_local(run_env, run_id, "--profile-ranks", "0")
    run_dir = Path(run_env["NSYSKIT_REPORT_DIR"]) / run_id
    assert result.returncode == 0, result.stderr[-3000:]

    assert [p.name for p in run_dir.glob("*.nsys-rep")] == [f"{run_id}_node0_rank0_worker-0.nsys-rep"]
    record = json.loads((run_dir / "run.json").read_text())
    assert sorted(record["checksums"]) == ["0", "1"] and len(set(record["checksums"].values())) == 1
    assert {r["rank"]: r["profiled"] for r in record["ranks"]} == {0: True, 1: False}


# Inside the run's container: stop rank 1's profiler (nsys, which would write its report), then kill -9 its training
# process (not its wrapper or nsys), as the OOM killer would. Rank 1's nsys stays stopped for a while, as a loaded
# machine can starve it, so rank 0 (which Gloo aborts once its peer is gone) ends first; rank 1's status as its wrapper
# wrote it when the application died is printed meanwhile.
KILL_RANK_1 = """
rank1() { for p in $(ls /proc | grep -E '^[0-9]+$'); do
  tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | grep -qx NSYSKIT_RANK=1 && echo $p; done; }
app=$(for p in $(pgrep -f train.py); do [ "$(cat /proc/$p/comm)" = python3 ] && rank1 | grep -qx $p && echo $p; done)
[ -n "$app" ] || exit 1
profiler=$(rank1 | grep -vx "$app" | tr '\\n' ' ')
kill -STOP $profiler && kill -9 $app && echo killed $app
sleep 2 && echo STATUS && cat /reports/logs/*_rank1_*.status.json
sleep 8 && kill -CONT $profiler
"""


def busy_loops(count: int = 2) -> list[subprocess.Popen]:
    """COUNT processes that keep a core busy each (the machine has 2), until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def test_killing_a_rank_ends_the_run_naming_it_and_keeps_the_reports(run_env):
    run_id = new_run_id("kill")
    run_dir = Path(run_env["NSYSKIT_REPORT_DIR"]) / run_id
    command = [sys.executable, "-m", "invoke", "run", "--local", "--profile", "local-cpu", "--steps", "1000",
               "--profile-steps", "2-4", "--run-id", run_id, "--no-progress"]  # fmt: skip
    env = {**{k: v for k, v in os.environ.items() if k != "NSYSKIT_PROFILE"}, **run_env}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    load: list[subprocess.Popen] = []
    try:
        log = run_dir / "logs" / "worker-0.log"
        deadline = time.monotonic() + 300
        while not (log.exists() and "step 5/" in log.read_text(errors="replace")):
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "training did not reach step 5"
            time.sleep(1)
        load = busy_loops()  # both cores busy from the kill to the end of the run
        container = docker.from_env().containers.get(f"nsyskit-{run_id}-worker-0")
        killed = container.exec_run(["bash", "-c", KILL_RANK_1], detach=False)
        assert b"killed" in killed.output, killed.output
        at_death = json.loads(killed.output.decode().split("STATUS\n", 1)[1])  # written while its nsys was stopped
        killed_at = time.monotonic()
        stdout, stderr = process.communicate(timeout=120)
        took = time.monotonic() - killed_at
    finally:
        for busy in load:
            busy.kill()
        if process.poll() is None:
            process.kill()
    assert process.returncode != 0
    assert took < 120
    record = json.loads((run_dir / "run.json").read_text())
    statuses = {status["rank"]: status for status in record["ranks"]}
    # Rank 1's wrapper wrote its status when its application died, before nsys could go on.
    assert (at_death["final"], at_death["exit_code"], at_death["signal"]) == (False, 137, "SIGKILL"), at_death
    assert at_death["died"] == statuses[1]["died"] and statuses[1]["final"] is True
    # The case that misled the kit: the killed rank's status was written after its peer's (the peer's wrapper ended
    # first), though it died first.
    assert statuses[1]["died"] < statuses[0]["died"] and statuses[0]["ended"] < statuses[1]["ended"], statuses
    named = "rank 1 on worker-0 was killed by SIGKILL; then rank 0 on worker-0 "
    assert "error: " in stderr and named in stderr, stderr[-2000:]
    assert record["failed_rank"]["rank"] == 1 and record["exit_code"] != 0
    assert [later["rank"] for later in record["failed_rank"]["then"]] == [0]
    # What nsys had written stays: the killed rank's report, and the survivor's, finished after the launcher's SIGTERM.
    assert sorted(p.name for p in run_dir.glob("*.nsys-rep")) == [
        f"{run_id}_node0_rank{r}_worker-0.nsys-rep" for r in (0, 1)
    ]
    assert leftovers(run_id) == []


def test_ctrl_c_removes_the_containers_and_keeps_the_run_folder(run_env):
    run_id = new_run_id("int")
    run_dir = Path(run_env["NSYSKIT_REPORT_DIR"]) / run_id
    command = [sys.executable, "-m", "invoke", "run", "--local", "--profile", "local-cpu", "--steps", "1000",
               "--run-id", run_id, "--no-progress"]  # fmt: skip
    env = {**{k: v for k, v in os.environ.items() if k != "NSYSKIT_PROFILE"}, **run_env}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        log = run_dir / "logs" / "worker-0.log"
        deadline = time.monotonic() + 300
        while not (log.exists() and "step 3/" in log.read_text(errors="replace")):
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "training did not reach step 3"
            time.sleep(1)
        process.send_signal(signal.SIGINT)  # what Ctrl-C in a terminal sends
        _stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == f"error: interrupted: local run {run_id} stopped; its reports and logs are in {run_dir}"
    assert leftovers(run_id) == []
    assert json.loads((run_dir / "run.json").read_text())["ended_how"] == "interrupted (Ctrl-C)"


def test_the_long_running_container_gets_the_runs_host_config_and_undeploy_local_removes_it(run_env):
    env = {**run_env, "NSYSKIT_NSYS_SAMPLE": "process-tree"}  # CPU sampling: the run's containers get SYS_ADMIN
    try:
        started = invoke("run", "--local", "--detach", "--profile", "local-cpu", env=env, timeout=120)
        assert started.returncode == 0, started.stderr
        host = docker.from_env().containers.get("nsyskit-dev").attrs["HostConfig"]
        assert host["CapAdd"] == ["SYS_ADMIN"] and host["ShmSize"] == 1024**3
        assert host["Binds"] == [f"{Path(run_env['NSYSKIT_REPORT_DIR']).resolve() / 'dev'}:/reports:rw"]
        status = invoke("status", "--local", "--profile", "local-cpu", env=env, timeout=60)
        assert "nsyskit-dev  running" in status.stdout, status.stderr
    finally:
        removed = invoke("undeploy", "--local", "--profile", "local-cpu", env=env, timeout=60)
    assert removed.returncode == 0 and "removed nsyskit-dev" in removed.stdout, removed.stderr
    assert leftovers("dev") == []
