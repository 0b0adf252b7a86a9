"""What a rank's program finds in its environment besides the wrapper's own settings: torch.distributed's variables
from whatever launcher started it, the step hook first on PYTHONPATH, and the hook's word on PROFILE_STEPS.

Used by the wrapper (usr/local/bin/nsys-profile) from /nsyskit; standard library only, Python 3.8+.
"""

from __future__ import annotations

import json
import os

import runrecord

STEP_HOOK_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "stephook")  # its sitecustomize.py
DEFAULT_MASTER_PORT = "29500"  # torchrun's
NEVER_OPENED = "never opened nsys' capture range and nothing was recorded"
RECORD_IT = "to record such a program, leave PROFILE_STEPS empty (the whole run) or give a time window (PROFILE_DELAY, PROFILE_DURATION)"


def first_int(env: dict, *keys: str, default: int = 0) -> int:
    """The first of `keys` set in env, as an int, else default."""
    for key in keys:
        value = env.get(key, "").strip()
        if value:
            return int(value)
    return default


def distributed_env(env: dict, ident: dict) -> dict[str, str]:
    """What torch.distributed's env:// rendezvous reads, from the launcher's own variables where they are unset.

    torchrun sets them all; mpirun and srun set their own (OMPI_COMM_WORLD_*, SLURM_*, PMI_*), so a user's program
    meets its peers on every launcher. MASTER_ADDR stays the launcher's (the kit's sbatch and mpirun export it), and
    is localhost only when the world fits on this node.
    """
    world = first_int(env, "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE", default=1)
    local_world = first_int(env, "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE",
                            "MPI_LOCALNRANKS", default=world)  # fmt: skip
    found = {
        "RANK": ident["NSYSKIT_RANK"], "LOCAL_RANK": ident["NSYSKIT_LOCAL_RANK"], "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(local_world), "GROUP_RANK": ident["NSYSKIT_NODE"], "MASTER_PORT": DEFAULT_MASTER_PORT,
    }  # fmt: skip
    if local_world >= world:
        found["MASTER_ADDR"] = "localhost"
    return {key: value for key, value in found.items() if not env.get(key, "").strip()}


def step_hook_env(env: dict, status_path: str) -> dict[str, str]:
    """With NSYSKIT_STEP_HOOK=1: the hook's folder first on PYTHONPATH (its sitecustomize chains any other) and where
    it writes the steps it saw; else nothing."""
    if env.get("NSYSKIT_STEP_HOOK", "0").strip() != "1":
        return {}
    path = env.get("PYTHONPATH", "")
    return {"PYTHONPATH": STEP_HOOK_DIR + (os.pathsep + path if path else ""), "NSYSKIT_STEP_HOOK_STATUS": status_path}


def step_notes(env: dict, status_path: str) -> list[str]:
    """One line when PROFILE_STEPS could not be marked as asked (from the hook's status file), else none."""
    window = env.get("NSYSKIT_PROFILE_STEPS", "").strip()
    if env.get("NSYSKIT_STEP_HOOK", "0").strip() != "1" or not window:
        return []
    try:
        with open(status_path) as handle:
            seen = json.load(handle)
    except (OSError, ValueError):
        return [runrecord.STEP_HOOK_NOTE + f"no Python process reported optimizer steps, so PROFILE_STEPS={window} was not marked"]
    steps, capture = int(seen.get("steps") or 0), env.get("NSYSKIT_CAPTURE", "none")
    if steps == 0 and capture == "cudaProfilerApi":
        # The capture range opens at step A: a program that never steps leaves nsys nothing to record. Recording it
        # whole anyway would mean recording every run's start-up before its first step, on every rank.
        return [runrecord.STEP_HOOK_NOTE + f"the program never called optimizer.step(), so PROFILE_STEPS={window} "
                f"{NEVER_OPENED}; {RECORD_IT}"]  # fmt: skip
    if steps == 0:
        return [runrecord.STEP_HOOK_NOTE + f"the program never called optimizer.step(), so PROFILE_STEPS={window} was not marked; the whole run was recorded"]
    if not seen.get("closed"):
        return [runrecord.STEP_HOOK_NOTE + f"the program ended after {steps} optimizer step(s), before PROFILE_STEPS={window} was complete"]
    return []


def steps_path(report_base: str) -> str:
    """Where the step hook writes what it saw: logs/NAME.steps.json beside the rank's status file."""
    folder, name = os.path.split(report_base)
    return os.path.join(folder, runrecord.LOGS, name + ".steps.json")


def explained_problems(problems: list[str], notes: list[str]) -> list[str]:
    """The rank's problems, a missing report saying why when the step hook's note tells (the capture never opened)."""
    if not any(NEVER_OPENED in note for note in notes):
        return problems
    return [f"{problem}: the program never called optimizer.step(), so the capture range of PROFILE_STEPS never opened"
            if problem.startswith("nsys left no report") else problem for problem in problems]  # fmt: skip
