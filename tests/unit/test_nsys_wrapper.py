"""The rank-aware wrapper's decisions (Container-Root/usr/local/bin/nsys-profile): identity, ranks, nsys arguments."""

from __future__ import annotations

import ctypes.util
import fcntl
import importlib.machinery
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nsyskit import hostpkgs

WRAPPER_PATH = Path(__file__).resolve().parents[2] / "Container-Root/usr/local/bin/nsys-profile"


def load_wrapper():
    """Import the wrapper script (no .py suffix) as a module."""
    loader = importlib.machinery.SourceFileLoader("nsys_profile", str(WRAPPER_PATH))
    spec = importlib.util.spec_from_loader("nsys_profile", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


wrapper = load_wrapper()


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"RANK": "5", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1"}, ("5", "1", "1")),
        (
            {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
            ("3", "1", "1"),
        ),
        ({"SLURM_PROCID": "6", "SLURM_LOCALID": "2", "SLURM_NODEID": "1", "SLURM_JOB_ID": "77"}, ("6", "2", "1")),
        ({"PMIX_RANK": "2"}, ("2", "0", "2")),
        ({}, ("0", "0", "0")),
    ],
)
def test_identity_from_every_launcher(env, expected):
    ident = wrapper.identity(env, hostname="worker-1.example.internal")
    assert (ident["NSYSKIT_RANK"], ident["NSYSKIT_LOCAL_RANK"], ident["NSYSKIT_NODE"]) == expected
    assert ident["NSYSKIT_HOST"] == "worker-1"


def test_job_id_prefers_nsyskit_then_slurm():
    assert wrapper.identity({"NSYSKIT_JOB_ID": "run1", "SLURM_JOB_ID": "9"}, "h")["NSYSKIT_JOB_ID"] == "run1"
    assert wrapper.identity({"SLURM_JOB_ID": "9"}, "h")["NSYSKIT_JOB_ID"] == "9"
    assert wrapper.identity({}, "h")["NSYSKIT_JOB_ID"] == "job"


def ident(rank=0, local_rank=0):
    return {
        "NSYSKIT_RANK": str(rank),
        "NSYSKIT_LOCAL_RANK": str(local_rank),
        "NSYSKIT_NODE": "0",
        "NSYSKIT_HOST": "h",
        "NSYSKIT_JOB_ID": "j",
    }


def test_default_command_traces_without_sampling_and_names_reports_per_rank():
    command = wrapper.nsys_command(
        {"NSYSKIT_REPORT_DIR": "/reports", "NSYSKIT_TRACE": "nvtx,osrt"}, ident(), ["python3", "t.py"]
    )
    assert command == [
        "nsys", "profile", "--trace=nvtx,osrt", "--sample=none",
        "--output=/reports/%q{NSYSKIT_JOB_ID}_node%q{NSYSKIT_NODE}_rank%q{NSYSKIT_RANK}_%q{NSYSKIT_HOST}",
        "--force-overwrite=true", "--stats=false", "--cpuctxsw=none", "python3", "t.py",
    ]  # fmt: skip


def test_capture_ranges_and_delay_duration():
    gpu = wrapper.nsys_command({"NSYSKIT_CAPTURE": "cudaProfilerApi", "NSYSKIT_PROFILE_DELAY": "5"}, ident(), ["app"])
    assert "--capture-range=cudaProfilerApi" in gpu and "--capture-range-end=stop" in gpu
    assert not any(arg.startswith("--delay") for arg in gpu)  # a capture range replaces the delay
    nvtx = wrapper.nsys_command({"NSYSKIT_CAPTURE": "nvtx"}, ident(), ["app"])
    assert "--nvtx-capture=profile_window" in nvtx and "--env-var=NSYS_NVTX_PROFILER_REGISTER_ONLY=0" in nvtx
    timed = wrapper.nsys_command({"NSYSKIT_PROFILE_DELAY": "5", "NSYSKIT_PROFILE_DURATION": "30"}, ident(), ["app"])
    assert "--delay=5" in timed and "--duration=30" in timed
    with pytest.raises(ValueError, match="NSYSKIT_CAPTURE"):
        wrapper.nsys_command({"NSYSKIT_CAPTURE": "sometimes"}, ident(), ["app"])


def test_sampling_keeps_context_switches_and_extra_args_come_last_before_the_app():
    command = wrapper.nsys_command(
        {"NSYSKIT_SAMPLE": "process-tree", "NSYSKIT_EXTRA_ARGS": "--cuda-memory-usage=true -x true"}, ident(), ["app"]
    )
    assert "--sample=process-tree" in command and "--cpuctxsw=none" not in command
    assert command[-4:] == ["--cuda-memory-usage=true", "-x", "true", "app"]


def test_expand_matches_nsys_patterns():
    scope = {"NSYSKIT_JOB_ID": "r1", "NSYSKIT_NODE": "1", "NSYSKIT_RANK": "3", "NSYSKIT_HOST": "worker-1"}
    assert wrapper.expand(wrapper.DEFAULT_REPORT_NAME, scope) == "r1_node1_rank3_worker-1"
    assert wrapper.expand("%h-%q{MISSING}-100%%", scope) == "worker-1--100%"


def test_rank_environment_shares_tmpdir_per_node_and_names_the_nccl_log():
    env = {"NSYSKIT_TMPDIR": "/scratch", "NCCL_DEBUG": "INFO"}
    child = wrapper.rank_environment(env, ident(3), "/reports/j_node0_rank3_h")
    assert child["TMPDIR"] == "/scratch" and child["NSYSKIT_RANK"] == "3"
    assert child["NCCL_DEBUG_FILE"] == "/reports/j_node0_rank3_h.nccl.log"
    assert "NCCL_DEBUG_FILE" not in wrapper.rank_environment({}, ident(3), "/r/x")
    assert (
        wrapper.rank_environment({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "/mine"}, ident(), "/r/x")["NCCL_DEBUG_FILE"]
        == "/mine"
    )


def test_an_unprofiled_rank_runs_the_command_and_records_its_exit(tmp_path):
    """The real script, end to end without nsys: exit code passed through, status file and no .cmd written."""
    env = {"PATH": "/usr/bin:/bin", "NSYSKIT_REPORT_DIR": str(tmp_path), "NSYSKIT_PROFILE_RANKS": "0", "RANK": "1",
           "LOCAL_RANK": "1", "NSYSKIT_JOB_ID": "u1"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(WRAPPER_PATH), sys.executable, "-c", "raise SystemExit(3)"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 3
    assert "not profiled" in done.stderr
    (status_file,) = (tmp_path / "logs").glob("u1_node*_rank1_*.status.json")
    status = json.loads(status_file.read_text())
    assert status["profiled"] is False and status["exit_code"] == 3 and status["efa_metrics"] == "not profiled"
    assert list(tmp_path.glob("*.cmd")) == []


def test_a_rank_killed_by_a_real_time_signal_still_leaves_its_status(tmp_path):
    # Real-time signals have no name in Python's signal module: the status file must be written all the same.
    kill = "import os, signal; os.kill(os.getpid(), signal.SIGRTMIN + 2)"
    done = run_wrapper(tmp_path, {"NSYSKIT_PROFILE_RANKS": "none"}, sys.executable, "-c", kill)
    assert "Traceback" not in done.stderr, done.stderr
    status = status_of(tmp_path)
    assert status["signal"] == "SIGRTMIN+2" and done.returncode == status["exit_code"] == 128 + int(signal.SIGRTMIN) + 2


def test_a_rank_variable_that_is_not_a_number_is_one_line(tmp_path):
    done = run_wrapper(tmp_path, {"RANK": "abc"}, sys.executable, "-c", "pass")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "error: a rank variable is not a number" in done.stderr and "RANK" in done.stderr


# ---- PROFILER=ncu and torch: the same rank selection and report naming, another tool -------------------------


def test_the_profiler_setting_is_checked():
    assert wrapper.profiler_of({}) == "nsys" and wrapper.profiler_of({"NSYSKIT_PROFILER": " NCU "}) == "ncu"
    with pytest.raises(ValueError, match="NSYSKIT_PROFILER='vtune': use nsys, ncu or torch"):
        wrapper.profiler_of({"NSYSKIT_PROFILER": "vtune"})


def test_ncu_command_from_the_settings():
    base = "/reports/j_node0_rank3_h"
    assert wrapper.ncu_command({}, base, ["python3", "t.py"]) == [
        "ncu", "--set=roofline", "--replay-mode=kernel", "--target-processes=all", f"--export={base}",
        "--force-overwrite", "python3", "t.py",
    ]  # fmt: skip
    env = {"NSYSKIT_NCU_SET": "full", "NSYSKIT_NCU_KERNEL": "regex:gemm|attn", "NSYSKIT_NCU_LAUNCH_SKIP": "100",
           "NSYSKIT_NCU_LAUNCH_COUNT": "5", "NSYSKIT_NCU_REPLAY_MODE": "application", "NSYSKIT_CAPTURE": "cudaProfilerApi"}  # fmt: skip
    command = wrapper.ncu_command(env, base, ["app"])
    assert command[1:3] == ["--set=full", "--replay-mode=application"]
    assert command[-8:] == ["--profile-from-start=off", "--kernel-name", "regex:gemm|attn",
                            "--launch-skip", "100", "--launch-count", "5", "app"]  # fmt: skip
    with pytest.raises(ValueError, match="NSYSKIT_NCU_LAUNCH_COUNT='many'"):
        wrapper.ncu_command({"NSYSKIT_NCU_LAUNCH_COUNT": "many"}, base, ["app"])


def test_torch_ranks_are_told_where_to_write_or_that_they_are_not_profiled():
    env = {"NSYSKIT_PROFILER": "torch"}
    assert wrapper.rank_environment(env, ident(1), "/r/j_node0_rank1_h")["NSYSKIT_TORCH_TRACE"] == (
        "/r/j_node0_rank1_h.pt.trace.json.gz"
    )
    assert wrapper.rank_environment(env, ident(1), "/r/x", profiled=False)["NSYSKIT_TORCH_TRACE"] == ""
    assert "NSYSKIT_TORCH_TRACE" not in wrapper.rank_environment({}, ident(1), "/r/x")


def run_wrapper(tmp_path, env: dict, *command: str) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "NSYSKIT_REPORT_DIR": str(tmp_path), "NSYSKIT_JOB_ID": "p1",
            "RANK": "0", "LOCAL_RANK": "0"}  # fmt: skip
    return subprocess.run([sys.executable, str(WRAPPER_PATH), *command], env={**base, **env}, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def status_of(tmp_path) -> dict:
    (path,) = (tmp_path / "logs").glob("p1_node0_rank0_*.status.json")
    return json.loads(path.read_text())


def test_torch_rank_end_to_end_runs_the_command_itself_and_records_its_trace(tmp_path):
    writes = "import os; open(os.environ['NSYSKIT_TORCH_TRACE'], 'w').write('{}')"
    done = run_wrapper(tmp_path, {"NSYSKIT_PROFILER": "torch"}, sys.executable, "-c", writes)
    assert done.returncode == 0, done.stderr
    status = status_of(tmp_path)
    assert status["profiler"] == "torch" and status["command"] == [sys.executable, "-c", writes]
    assert status["report"].endswith("p1_node0_rank0_" + status["host"] + ".pt.trace.json.gz")
    assert status["efa_metrics"] == "not applicable to torch"
    # A command that does not profile itself leaves no trace: a problem, exit code 3 (the run itself succeeded).
    silent = run_wrapper(tmp_path, {"NSYSKIT_PROFILER": "torch", "NSYSKIT_JOB_ID": "p2"}, sys.executable, "-c", "pass")
    assert silent.returncode == 3 and "no torch trace at" in silent.stderr


def test_ncu_rank_end_to_end_without_a_gpu_says_so_in_one_line_and_succeeds(tmp_path):
    """The real ncu on a command without CUDA kernels: no report, a note, exit code 0."""
    if shutil.which("ncu") is None:
        hostpkgs.install("ncu")  # as on a fresh machine: Debian's nsight-compute
    if ctypes.util.find_library("cuda") is None:
        # A GPU image's node has the driver's libcuda and ncu cannot start without one (it exits 1: 'failed to
        # connect to the CUDA driver'); the premise here is a driver library and no GPU. nsight-systems-target
        # brings Debian's libcuda1 (the suite installs it for nsys anyway; this keeps the test order-independent).
        hostpkgs.install("nsys")
    done = run_wrapper(tmp_path, {"NSYSKIT_PROFILER": "ncu"}, sys.executable, "-c", "print('trained')")
    assert done.returncode == 0, done.stderr
    assert "trained" in done.stdout and done.stderr.count("ncu recorded no kernel") == 1
    status = status_of(tmp_path)
    assert status["command"][:2] == ["ncu", "--set=roofline"] and status["report"] is None
    assert status["problems"] == [] and status["notes"][0].startswith("ncu recorded no kernel")
    # Named like every other report of the rank: the .cmd beside it has the same base name.
    assert Path(status["command"][4].removeprefix("--export=") + ".cmd").read_text().startswith("ncu --set=roofline")


# ---- an nsys that fails to start (Debian's 2022.4 under load): started again only when nothing ran ----------

FAKE_NSYS = '''#!/usr/bin/env python3
"""A stand-in for 'nsys profile': attempt N does what the word N of $FAKE_PLAN says (fail, ran-no-report, ok)."""
import os, re, subprocess, sys
count_file = os.environ["FAKE_COUNT"]
attempt = len(open(count_file).read()) if os.path.exists(count_file) else 0
open(count_file, "a").write("x")
plan = os.environ["FAKE_PLAN"].split()
what = plan[min(attempt, len(plan) - 1)]
if what == "fail":
    print("Connection to the Agent lost", file=sys.stderr)
    sys.exit(0)
args = sys.argv[2:]
output = next(a.split("=", 1)[1] for a in args if a.startswith("--output="))
app = [a for a in args if not a.startswith("--")]
code = subprocess.run(app).returncode
if what == "ok":
    open(re.sub(r"%q\\{(\\w+)\\}", lambda m: os.environ[m[1]], output) + ".nsys-rep", "w").write("report")
sys.exit(code)
'''


@pytest.mark.parametrize(
    ("plan", "runs", "code", "restarts"),
    [
        ("fail fail ok", 1, 0, 2),  # started again until the application ran
        ("fail fail fail fail", 0, 3, 2),  # at most three starts, then the problem as before
        ("ran-no-report ok", 1, 3, 0),  # the application ran: never run twice, even with no report
    ],
)
def test_nsys_that_ends_before_the_application_ran_is_started_again(tmp_path, plan, runs, code, restarts):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nsys").write_text(FAKE_NSYS)
    (bin_dir / "nsys").chmod(0o755)
    reports, ran = tmp_path / "reports", tmp_path / "ran"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_PLAN": plan, "FAKE_COUNT": str(tmp_path / "count"),
           "NSYSKIT_EXPORT": "none", "NSYSKIT_TMPDIR": str(tmp_path / "tmp")}  # fmt: skip
    # The application runs long enough to be seen (one that ends between two looks may run again).
    app = f"import time; open({str(ran)!r}, 'a').write('x'); time.sleep(0.5)"
    done = run_wrapper(reports, env, sys.executable, "-c", app)
    assert (ran.read_text() if ran.exists() else "") == "x" * runs
    assert done.returncode == code, done.stderr
    assert done.stderr.count("before starting the application and left no report; starting it again") == restarts
    assert (status_of(reports)["report"] is not None) == (code == 0)


def test_a_rank_told_to_end_while_waiting_for_the_start_lock_starts_nothing(tmp_path):
    tmpdir, ran = tmp_path / "tmp", tmp_path / "ran"
    tmpdir.mkdir()
    lock = os.open(tmpdir / wrapper.START_LOCK, os.O_CREAT | os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX)  # another rank of the node is starting its nsys
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "NSYSKIT_REPORT_DIR": str(tmp_path), "NSYSKIT_JOB_ID": "p1",
           "RANK": "0", "LOCAL_RANK": "0", "NSYSKIT_TMPDIR": str(tmpdir), "NSYSKIT_EXPORT": "none"}  # fmt: skip
    app = [sys.executable, "-c", f"open({str(ran)!r}, 'w').write('x')"]
    rank = subprocess.Popen([sys.executable, str(WRAPPER_PATH), *app], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not list(tmp_path.glob("*.cmd")) and time.monotonic() < deadline:  # written just before the start
        time.sleep(0.05)
    time.sleep(1.0)  # its signal handlers are set right after; it now waits for the lock
    rank.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    os.close(lock)
    _out, err = rank.communicate(timeout=60)
    assert rank.returncode == 128 + signal.SIGTERM, err
    assert not ran.exists()
    status = status_of(tmp_path)
    assert status["signal"] == "SIGTERM" and status["report"] is None


# ---- when a rank died: the application's end, seen as it happens, not the profiler's (it writes the report) -------

SLOW_NSYS = '''#!/usr/bin/env python3
"""A stand-in for 'nsys profile' that, as nsys does on a loaded machine, reaps its application late (2 s) and then
takes 3 s to write its report."""
import subprocess, sys, time
app = subprocess.Popen([a for a in sys.argv[2:] if not a.startswith("--")])
time.sleep(2)
code = app.wait()
time.sleep(3)
sys.exit(128 - code if code < 0 else code)
'''


def test_the_status_is_written_when_the_application_dies_and_again_when_the_profiler_ends(tmp_path):
    bin_dir, reports = tmp_path / "bin", tmp_path / "reports"
    bin_dir.mkdir()
    (bin_dir / "nsys").write_text(SLOW_NSYS)
    (bin_dir / "nsys").chmod(0o755)
    died_at = tmp_path / "died-at"
    # The application notes the time, then is killed by SIGKILL (as by the OOM killer).
    app = f"import os, time; time.sleep(0.5); open({str(died_at)!r}, 'w').write(repr(time.time())); os.kill(os.getpid(), 9)"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "NSYSKIT_REPORT_DIR": str(reports), "NSYSKIT_JOB_ID": "p1", "RANK": "0",
           "LOCAL_RANK": "0", "NSYSKIT_EXPORT": "none", "NSYSKIT_TMPDIR": str(tmp_path / "tmp")}  # fmt: skip
    rank = subprocess.Popen([sys.executable, str(WRAPPER_PATH), sys.executable, "-c", app], env=env, text=True,
                            stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 60
    while not list((reports / "logs").glob("*.status.json")) and rank.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    at_death = status_of(reports)  # written while the profiler still runs: the wrapper may be killed before it ends
    _out, err = rank.communicate(timeout=60)
    assert rank.returncode == 137, err
    seen = (at_death["final"], at_death["exit_code"], at_death["signal"], at_death["ended"])
    assert seen == (False, 137, "SIGKILL", 0)
    final = status_of(reports)
    assert final["final"] is True and final["exit_code"] == 137 and final["died"] == at_death["died"]
    assert final["ended"] - final["died"] > 3  # the report's 3 s are not in it
    assert 0 <= final["died"] - float(died_at.read_text()) < 0.5


def test_an_importer_that_cannot_run_leaves_the_trace_and_says_how_to_convert_it(tmp_path):
    # Seen on a GPU machine: Nsight Compute's QdstrmImporter (beside its nsys) exited 127, 'libdw.so.1: cannot open
    # shared object file'; the .qdstrm was converted afterwards by another machine's QdstrmImporter
    nsys = tmp_path / "nsight" / "target-linux-x64" / "nsys"
    importer = tmp_path / "nsight" / "host-linux-x64" / "QdstrmImporter"
    for path, text in ((nsys, "exit 0"), (importer, "echo 'libdw.so.1: cannot open shared object file' >&2; exit 127")):
        path.parent.mkdir(parents=True)
        path.write_text(f"#!/bin/sh\n{text}\n")
        path.chmod(0o755)
    base = tmp_path / "reports" / "j_node0_rank0_h"
    base.parent.mkdir()
    (trace := Path(f"{base}.qdstrm")).write_bytes(b"trace")
    (problem,) = wrapper.finish_report({"NSYSKIT_NSYS": str(nsys)}, ident(), str(base))
    assert problem.startswith("QdstrmImporter exited 127: libdw.so.1")
    assert f"the trace stays in {trace}" in problem and "'QdstrmImporter -i j_node0_rank0_h.qdstrm'" in problem
    assert trace.read_bytes() == b"trace"
