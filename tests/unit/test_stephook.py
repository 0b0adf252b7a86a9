"""The step hook (Container-Root/nsyskit/stephook/sitecustomize.py): optimizer steps counted the way PROFILE_STEPS
means them, the NVTX marks and window in the example's order, chaining the sitecustomize it shadows, and nothing done
in a program without torch. Real torch and real nsys: tests/image/test_stephook_in_image.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsyskit.ranks import stephook

ROOT = Path(__file__).resolve().parents[2]
HOOK_DIR = ROOT / "Container-Root" / "nsyskit" / "stephook"


class Optimizer:
    """Stands for one torch optimizer: the hook only keys its counts by the object."""


def counter(window=None, cuda=False):
    """A StepCounter whose NVTX and CUDA calls are written down in order."""
    calls: list[str] = []
    start = (lambda: calls.append("cudaProfilerStart")) if cuda else None
    stop = (lambda: calls.append("cudaProfilerStop")) if cuda else None
    def open_range(name):
        calls.append(f"push {name}")
        return name  # the handle: which range a close ends

    made = stephook.StepCounter(window, open_range, lambda handle: calls.append(f"pop {handle}"), start, stop)
    return made, calls


def step(made, *optimizers) -> None:
    """One training iteration: each optimizer's step(), as torch's global hooks report it."""
    for optimizer in optimizers:
        made.before_step(optimizer)
        made.after_step(optimizer)


def test_gradient_accumulation_counts_one_step_per_optimizer_step_call():
    made, calls = counter((2, 3))
    optimizer = Optimizer()
    for micro_batch in range(1, 13):  # 4 micro-batches per optimizer step, as an accumulating loop calls it
        if micro_batch % 4 == 0:
            step(made, optimizer)
    assert made.step == 3
    assert calls == ["push step 1", "pop step 1", "push profile_window", "push step 2", "pop step 2", "push step 3",
                     "pop step 3", "pop profile_window", "push step 4"]  # fmt: skip
    assert made.status() == {"steps": 3, "window": [2, 3], "opened": True, "closed": True}


def test_several_optimizers_stepping_each_iteration_count_one_step():
    made, calls = counter()
    generator, discriminator = Optimizer(), Optimizer()
    for _ in range(5):
        step(made, generator, discriminator)
    assert made.step == 5 and calls == [c for n in range(1, 6) for c in (f"push step {n}", f"pop step {n}")] + ["push step 6"]
    # An optimizer stepping every other iteration (a scheduler of its own) does not move the count.
    rare = Optimizer()
    step(made, generator, discriminator, rare)
    step(made, generator, discriminator)
    assert made.step == 7


def test_on_gpu_the_window_is_the_capture_range_inside_its_nvtx_range():
    made, calls = counter((1, 2), cuda=True)
    optimizer = Optimizer()
    for _ in range(3):
        step(made, optimizer)
    assert calls[:3] == ["push profile_window", "cudaProfilerStart", "push step 1"]  # a window from step 1: at once
    assert calls[calls.index("cudaProfilerStop") - 1 : calls.index("cudaProfilerStop") + 2] == [
        "pop step 2", "cudaProfilerStop", "pop profile_window"]  # step 2 closed, the capture stopped, the window  # fmt: skip
    assert calls.count("cudaProfilerStart") == calls.count("cudaProfilerStop") == 1


def test_a_program_that_ends_inside_the_window_says_so():
    made, _ = counter((3, 9))
    for _ in range(4):
        step(made, Optimizer())  # a new optimizer each time still counts its first step
    assert made.status() == {"steps": 1, "window": [3, 9], "opened": False, "closed": False}


@pytest.mark.parametrize(("text", "window"), [("3-5", (3, 5)), (" 10 - 15 ", (10, 15)), ("", None), ("5-3", None),
                                              ("0-2", None), ("x", None)])  # fmt: skip
def test_the_window_setting(text, window):
    assert stephook.window_of(text) == window


def run_python(tmp_path, code: str, pythonpath: list[Path], **env: str) -> subprocess.CompletedProcess:
    """python3 -c CODE as the wrapper starts a rank: the hook's folder first on PYTHONPATH, the hook on."""
    environ = {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join(map(str, [HOOK_DIR, *pythonpath])),
               "NSYSKIT_STEP_HOOK": "1", "NSYSKIT_PROFILE_STEPS": "2-3",
               "NSYSKIT_STEP_HOOK_STATUS": str(tmp_path / "steps.json"), **env}  # fmt: skip
    return subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=60)


def test_an_existing_sitecustomize_still_runs_after_the_hook(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIRS_RAN'] = 'yes'\n")
    done = run_python(tmp_path, "import os, sys; print(os.environ.get('THEIRS_RAN'), "
                      "any(type(f).__name__ == '_Watch' for f in sys.meta_path))", [theirs])  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["yes", "True"]


def test_a_program_without_torch_pays_nothing_and_the_wrapper_learns_no_step_was_seen(tmp_path):
    code = "import sys; print(sorted(m for m in sys.modules if m.startswith(('torch', '_nsyskit', 'ctypes'))))"
    done = run_python(tmp_path, code, [])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"  # no torch, no NVTX library, no markers loaded
    assert json.loads((tmp_path / "steps.json").read_text()) == {"steps": 0, "window": [2, 3], "opened": False,
                                                                  "closed": False}  # fmt: skip


def test_only_the_first_process_of_the_rank_counts(tmp_path):
    child = "import os; print(os.environ.get('NSYSKIT_STEP_HOOK_PID'))"
    done = run_python(tmp_path, f"import os, subprocess, sys; print(os.getpid()); "
                      f"subprocess.run([sys.executable, '-c', {child!r}])", [])  # fmt: skip
    parent, seen_by_child = done.stdout.split()
    assert parent == seen_by_child  # the child inherits the owner's pid: it chains, it does not count


def test_the_hook_does_nothing_when_off(tmp_path):
    done = run_python(tmp_path, "import sys; print(any(type(f).__name__ == '_Watch' for f in sys.meta_path))", [],
                      NSYSKIT_STEP_HOOK="0")  # fmt: skip
    assert done.stdout.strip() == "False" and not (tmp_path / "steps.json").exists()


def test_the_run_summary_names_the_ranks_whose_window_was_not_marked(tmp_path):
    from nsyskit import runrecord
    from nsyskit.local.run import RunResult

    note = "step hook: the program never called optimizer.step(), so PROFILE_STEPS=2-3 was not marked; the whole run was recorded"
    statuses = [runrecord.RankStatus(rank=rank, notes=[note] if rank != 2 else []) for rank in range(4)]
    lines = RunResult("r", tmp_path, 0, 1.0, step_notes=runrecord.step_hook_lines(statuses)).summary_lines()
    assert lines[-1] == "ranks 0,1,3: " + note.removeprefix("step hook: ")



@pytest.mark.parametrize(
    ("capture", "note"),
    [
        ("none", "the program never called optimizer.step(), so PROFILE_STEPS=2-3 was not marked; the whole run was recorded"),
        ("cudaProfilerApi", "the program never called optimizer.step(), so PROFILE_STEPS=2-3 never opened nsys' capture "
         "range and nothing was recorded; to record such a program, leave PROFILE_STEPS empty (the whole run) or give a "
         "time window (PROFILE_DELAY, PROFILE_DURATION)"),
    ],
)  # fmt: skip
def test_a_program_that_never_steps_gets_one_line_saying_what_was_recorded_and_on_gpu_how_to_record_it(tmp_path, capture, note):
    from nsyskit.ranks import wrap

    wrapper = wrap.load_wrapper(wrap.wrapper_path())  # the image's wrapper and its rankenv, as the rank runs them
    status = tmp_path / "steps.json"
    status.write_text(json.dumps({"steps": 0, "window": [2, 3], "opened": False, "closed": False}))
    env = {"NSYSKIT_STEP_HOOK": "1", "NSYSKIT_PROFILE_STEPS": "2-3", "NSYSKIT_CAPTURE": capture}
    notes = wrapper.step_notes(env, str(status))
    assert notes == ["step hook: " + note]
    # The rank's missing report then says why, instead of a bare "no report" (nsys records nothing: no range opened).
    problems = wrapper.explained_problems(["nsys left no report at /r/x.nsys-rep"], notes)
    if capture == "cudaProfilerApi":
        assert problems == ["nsys left no report at /r/x.nsys-rep: the program never called optimizer.step(), so the "
                            "capture range of PROFILE_STEPS never opened"]  # fmt: skip
    else:
        assert problems == ["nsys left no report at /r/x.nsys-rep"]


def test_a_program_that_steps_inside_the_window_gets_no_line(tmp_path):
    from nsyskit.ranks import wrap

    wrapper = wrap.load_wrapper(wrap.wrapper_path())
    status = tmp_path / "steps.json"
    status.write_text(json.dumps({"steps": 6, "window": [2, 3], "opened": True, "closed": True}))
    env = {"NSYSKIT_STEP_HOOK": "1", "NSYSKIT_PROFILE_STEPS": "2-3", "NSYSKIT_CAPTURE": "cudaProfilerApi"}
    assert wrapper.step_notes(env, str(status)) == []
