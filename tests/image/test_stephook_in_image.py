"""The step hook in the image, with its real torch and real nsys: a program that knows nothing of nsyskit gets its
optimizer steps marked 'step N' and PROFILE_STEPS' window, so the analysis finds exactly the window's steps; a program
that marks its own NVTX range gets only that range recorded (PROFILE_RANGE=nvtx:NAME)."""

from __future__ import annotations

import json

from nsyskit.analysis.compute.analyzers import step_times
from nsyskit.analysis.read.reader import ExportReader

# A user's loop: gradient accumulation (3 micro-batches a step), two optimizers stepping each iteration, a scheduler.
SCRIPT = r"""
import torch
model, head = torch.nn.Linear(32, 32), torch.nn.Linear(32, 1)
body_opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
head_opt = torch.optim.SGD(head.parameters(), lr=1e-2)
scheduler = torch.optim.lr_scheduler.StepLR(body_opt, step_size=2)
for micro_batch in range(1, 22):
    loss = head(model(torch.randn(4, 32))).pow(2).mean() / 3
    loss.backward()
    if micro_batch % 3 == 0:
        body_opt.step(); head_opt.step(); scheduler.step()
        body_opt.zero_grad(); head_opt.zero_grad()
print("trained", micro_batch // 3, "steps")
"""
WRAPPER_ENV = ("NSYSKIT_STEP_HOOK=1 NSYSKIT_PROFILE_STEPS={window} NSYSKIT_TRACE=nvtx,osrt NSYSKIT_REPORT_DIR=/tmp/hook "
               "NSYSKIT_JOB_ID=hook RANK=0 LOCAL_RANK=0")  # fmt: skip


def profiled(host, tmp_path, window: str, script: str = SCRIPT, more_env: str = "") -> tuple[ExportReader, dict, str]:
    """Run SCRIPT under the image's wrapper with the hook on: (the export's reader, the steps the hook saw, stdout)."""
    assert host.run(f"rm -rf /tmp/hook && mkdir -p /tmp/hook && cat > /tmp/train.py <<'EOF'\n{script}\nEOF").rc == 0
    done = host.run(f"{WRAPPER_ENV.format(window=window)} {more_env} nsys-profile python3 /tmp/train.py")
    assert done.rc == 0, done.stdout + done.stderr
    (name,) = [n for n in host.file("/tmp/hook").listdir() if n.endswith(".sqlite")]
    export = tmp_path / name
    export.write_bytes(host.file(f"/tmp/hook/{name}").content)
    (steps,) = [n for n in host.file("/tmp/hook/logs").listdir() if n.endswith(".steps.json")]
    return ExportReader(export), json.loads(host.file(f"/tmp/hook/logs/{steps}").content_string), done.stdout + done.stderr


def test_the_window_holds_exactly_its_optimizer_steps(host, tmp_path):
    reader, seen, output = profiled(host, tmp_path, "3-5")
    assert "trained 7 steps" in output
    assert seen == {"steps": 7, "window": [3, 5], "opened": True, "closed": True}
    ranges = reader.nvtx_ranges()
    texts = [ranges.text[i] for i in range(len(ranges))]
    # Steps 1-7, and step 8, opened when step 7 ended, running to the program's end: the window leaves it out.
    assert sorted(t for t in texts if t.startswith("step ")) == sorted(f"step {n}" for n in range(1, 9))
    assert texts.count("profile_window") == 1
    assert list(step_times(ranges).columns["step"]) == [3, 4, 5]  # what the analysis keeps: the window's steps


def test_a_program_that_never_steps_is_recorded_whole_and_says_so(host, tmp_path):
    reader, seen, output = profiled(host, tmp_path, "2-3", "import torch\nprint(torch.ones(3).sum())\n")
    assert seen["steps"] == 0
    assert "never called optimizer.step(), so PROFILE_STEPS=2-3 was not marked; the whole run was recorded" in output
    status = [n for n in host.file("/tmp/hook/logs").listdir() if n.endswith(".status.json")]
    notes = json.loads(host.file(f"/tmp/hook/logs/{status[0]}").content_string)["notes"]
    assert any("never called optimizer.step()" in note for note in notes)


def test_after_torch_loads_the_watch_is_gone_and_torch_s_sources_read_as_ever(host):
    check = ("import inspect, sys, torch, torch.optim.optimizer as o; "
             "print(any(type(f).__name__ == '_Watch' for f in sys.meta_path), len(o._global_optimizer_post_hooks), "
             "'def step' in inspect.getsource(torch.optim.SGD.step))")  # fmt: skip
    done = host.run(f'PYTHONPATH=/nsyskit/stephook NSYSKIT_STEP_HOOK=1 python3 -c "{check}"')
    assert done.rc == 0, done.stderr
    assert done.stdout.split() == ["False", "1", "True"]


# A user's program that marks its own phases with NVTX (the C API torch.cuda.nvtx.range_push calls on CUDA builds;
# this CPU torch has no NVTX, so through libnvToolsExt as a C program would) and trains 4 steps inside 'train'.
# Not the PyPI nvtx package: Debian's nsys 2022.4 records none of its ranges, only its domains' creation.
OWN_RANGES = r"""
import ctypes, time, torch
nvtx = ctypes.CDLL("libnvToolsExt.so.1")
nvtx.nvtxRangePushA(b"setup")
model = torch.nn.Linear(16, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
time.sleep(0.3)
nvtx.nvtxRangePop()
nvtx.nvtxRangePushA(b"train")
for _ in range(4):
    model(torch.randn(8, 16)).pow(2).mean().backward()
    optimizer.step(); optimizer.zero_grad()
    time.sleep(0.05)
nvtx.nvtxRangePop()
nvtx.nvtxRangePushA(b"evaluate")
time.sleep(0.3)
nvtx.nvtxRangePop()
print("done")
"""


def test_profile_range_records_only_the_programs_own_nvtx_range(host, tmp_path):
    # What launch.wrapper_env renders for PROFILE_RANGE=nvtx:train: the wrapper's nvtx capture range on 'train'.
    reader, seen, output = profiled(host, tmp_path, "", OWN_RANGES, "NSYSKIT_CAPTURE=nvtx NSYSKIT_NVTX_CAPTURE=train")
    assert "done" in output and seen["steps"] == 4
    ranges = reader.nvtx_ranges()
    texts = [ranges.text[i] for i in range(len(ranges))]
    assert texts.count("train") == 1
    assert "setup" not in texts and "evaluate" not in texts  # before and after the range: not recorded
    assert {f"step {n}" for n in range(1, 5)} <= set(texts)  # what ran inside it is kept (the hook's step marks)
    train = texts.index("train")
    assert min(ranges.start) == ranges.start[train]  # nothing recorded before the range opened


def test_with_the_gpu_capture_range_a_program_that_never_steps_says_nothing_was_recorded_and_how_to(host):
    # What a GPU run renders (NSYSKIT_CAPTURE=cudaProfilerApi); here no cudaProfilerStart comes either, as on a GPU
    # when the program never steps: nsys records nothing, and the rank's lines say why and what to set instead.
    assert host.run("rm -rf /tmp/hook && mkdir -p /tmp/hook && echo 'import torch; print(torch.ones(3).sum())' > /tmp/t.py").rc == 0
    done = host.run(f"{WRAPPER_ENV.format(window='2-3')} NSYSKIT_CAPTURE=cudaProfilerApi nsys-profile python3 /tmp/t.py")
    output = done.stdout + done.stderr
    assert done.rc == 3, output  # no report made
    assert "tensor(3.)" in output  # the program itself ran
    assert "never opened nsys' capture range and nothing was recorded; to record such a program, leave PROFILE_STEPS " \
           "empty (the whole run) or give a time window (PROFILE_DELAY, PROFILE_DURATION)" in output
    assert "error: nsys left no report at /tmp/hook/hook_node0_rank0_" in output
    assert "the program never called optimizer.step(), so the capture range of PROFILE_STEPS never opened" in output
    assert not [n for n in host.file("/tmp/hook").listdir() if n.endswith((".nsys-rep", ".sqlite"))]
