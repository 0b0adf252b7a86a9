"""`nsyskit wrap -- COMMAND`: one rank of the user's own launch line (srun, torchrun, mpirun) under the kit's wrapper.

Settings come from the flags, then the kit's environment (NSYSKIT_*, the names the wrapper reads), then defaults.
The wrapper itself (Container-Root/usr/local/bin/nsys-profile) finds the rank from the launcher's variables, profiles
or plainly runs the command per --profile-ranks, names the report as the kit does and exports it; the step hook marks
--profile-steps. Afterwards the rank rewrites the folder's run.json from every rank's status found there, so
`nsyskit analyze DIR` reads the folder like any run folder.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import os
import re
import sys
from pathlib import Path

from nsyskit import runrecord
from nsyskit.assets import PACKAGED
from nsyskit.ranks import nsysargs

IMAGE_WRAPPER = "/usr/local/bin/nsys-profile"  # in the image (its library copy has no _kit/)
CHECKOUT_WRAPPER = PACKAGED / "Container-Root" / "usr" / "local" / "bin" / "nsys-profile"  # a checkout or pip install
# The launcher's job id, the same on every rank: the run id when --run-id and NSYSKIT_JOB_ID are not given.
JOB_ID_VARIABLES = ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE")
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,62}")  # the kit's run ids: no '_', which separates report fields
# The GPUs the NVIDIA kernel driver sees: then the window becomes nsys' capture range. Not /dev/nvidiactl: CUDA's
# nvidia-modprobe creates that node when a profiler loads libcuda, on machines with no GPU too (seen in the image).
GPU_FOLDER = "/proc/driver/nvidia/gpus"
FLAGS = {  # flag -> (environment variable, default, the default as --help says it, help)
    "out": ("NSYSKIT_REPORT_DIR", "", "./nsyskit-RUN_ID", "run folder every rank writes into (on a shared file system for several nodes)"),
    "profile_steps": ("NSYSKIT_PROFILE_STEPS", "", "the whole run", "optimizer steps to record, FIRST-LAST (the step hook marks them; GPU: the capture range)"),
    "profile_ranks": ("NSYSKIT_PROFILE_RANKS", "all", "all", "ranks to profile: all, local0 or a list like 0,3; the others run plainly"),
    "run_id": ("NSYSKIT_JOB_ID", "", "the launcher's job id (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, ...), else 'run'", "first field of every report name"),
    "profile_delay": ("NSYSKIT_PROFILE_DELAY", "0", "0 (from the start)", "seconds before nsys starts recording, for any program (not with a window on GPUs)"),
    "profile_duration": ("NSYSKIT_PROFILE_DURATION", "0", "0 (to the end)", "seconds nsys records, for any program (not with a window on GPUs)"),
    "trace": ("NSYSKIT_TRACE", "cuda,nvtx,osrt", "cuda,nvtx,osrt", "nsys --trace APIs"),
    "step_hook": ("NSYSKIT_STEP_HOOK", "1", "1", "1: count optimizer steps in Python ranks and mark 'step N'; 0: the program marks its own"),
}  # fmt: skip
TIME_WINDOW = (("--profile-delay", "NSYSKIT_PROFILE_DELAY"), ("--profile-duration", "NSYSKIT_PROFILE_DURATION"))
# The wrapper's variables of the settings renamed PROFILE_DELAY/PROFILE_DURATION: an error, never a window ignored.
RENAMED_VARIABLES = {"NSYSKIT_DELAY": "NSYSKIT_PROFILE_DELAY", "NSYSKIT_DURATION": "NSYSKIT_PROFILE_DURATION"}


class WrapUsageError(Exception):
    """A bad `nsyskit wrap` line: one `error: ... fix: ...` line, exit 1, nothing run."""


def parser() -> argparse.ArgumentParser:
    """The flags of `nsyskit wrap`, each with its environment variable and default in the help."""
    made = argparse.ArgumentParser(
        prog="nsyskit wrap", usage="nsyskit wrap [FLAGS] -- COMMAND [ARGS...]",
        description="Run one rank of your launch line under the kit's nsys wrapper, e.g. 'srun nsyskit wrap --out "
                    "/fsx/runs/x -- python train.py' or 'torchrun --nproc-per-node 8 --no-python nsyskit wrap -- "
                    "python train.py'. Settings: flag, else the environment variable named, else the default.",
    )  # fmt: skip
    for name, (variable, _default, shown, text) in FLAGS.items():
        made.add_argument(f"--{name.replace('_', '-')}", default=None, metavar=name.split("_")[-1].upper(),
                          help=f"{text}; else ${variable}, else {shown}")  # fmt: skip
    return made


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """(flags, command) around the first '--'; WrapUsageError when there is no '--' or no command after it."""
    if "--" not in argv:
        if any(word in ("-h", "--help") for word in argv):
            return argv, []
        raise WrapUsageError("nsyskit wrap needs '--' before the command; fix: nsyskit wrap [FLAGS] -- python train.py")
    cut = argv.index("--")
    if cut + 1 == len(argv):
        raise WrapUsageError("nsyskit wrap got no command after '--'; fix: nsyskit wrap [FLAGS] -- python train.py")
    return argv[:cut], argv[cut + 1 :]


def settings(flags: argparse.Namespace, env: dict[str, str]) -> dict[str, str]:
    """The NSYSKIT_* environment of the wrapper: each flag, else its variable, else the default (the run id: the
    launcher's job id); the capture range on GPU machines when a window is asked for."""
    for old, new in RENAMED_VARIABLES.items():
        if old in env:
            raise WrapUsageError(f"{old}={env[old]!r} was renamed {new}; fix: set {new}={env[old]} instead")
    values = {}
    for name, (variable, default, _shown, _text) in FLAGS.items():
        given = getattr(flags, name)
        values[variable] = given if given is not None else env.get(variable, "").strip() or default
    if not values["NSYSKIT_JOB_ID"]:
        values["NSYSKIT_JOB_ID"] = next((env[v] for v in JOB_ID_VARIABLES if env.get(v)), "run")
    values["NSYSKIT_JOB_ID"] = re.sub(r"[^A-Za-z0-9.-]", "-", values["NSYSKIT_JOB_ID"]).strip("-.") or "run"
    if not values["NSYSKIT_REPORT_DIR"]:
        values["NSYSKIT_REPORT_DIR"] = os.path.abspath(f"nsyskit-{values['NSYSKIT_JOB_ID']}")
    _check(values)
    if "NSYSKIT_CAPTURE" not in env:
        gpu = os.path.isdir(GPU_FOLDER) and bool(os.listdir(GPU_FOLDER))
        values["NSYSKIT_CAPTURE"] = nsysargs.capture_mode("command", "", bool(values["NSYSKIT_PROFILE_STEPS"]), gpu,
                                                          values["NSYSKIT_STEP_HOOK"] == "1")  # fmt: skip
        timed = [flag for flag, variable in TIME_WINDOW if int(values[variable])]
        if timed and values["NSYSKIT_CAPTURE"] != "none":  # nsys takes a capture range or a time window, not both
            raise WrapUsageError(f"{timed[0]} gives a time window, but --profile-steps on a GPU machine opens nsys' "
                                 f"capture range, which decides what is recorded; fix: drop --profile-steps for a time "
                                 f"window, or drop {timed[0]}")  # fmt: skip
    values["NSYSKIT_LAUNCHER"] = env.get("NSYSKIT_LAUNCHER") or launcher_of(env)
    return values


def _check(values: dict[str, str]) -> None:
    """WrapUsageError for a window or a rank selection the wrapper would not take."""
    steps = values["NSYSKIT_PROFILE_STEPS"]
    found = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", steps)
    if steps and not (found and 1 <= int(found[1]) <= int(found[2])):
        raise WrapUsageError(f"--profile-steps {steps!r} is not a step range; fix: use FIRST-LAST with 1 <= FIRST <= LAST, e.g. 10-15")
    ranks = values["NSYSKIT_PROFILE_RANKS"]
    if not re.fullmatch(r"all|local0|none|\d+(,\d+)*", ranks.replace(" ", "")):
        raise WrapUsageError(f"--profile-ranks {ranks!r} is not a rank selection; fix: use all, local0 or a list like 0,3")
    for flag, variable in TIME_WINDOW:
        if not values[variable].isdigit():
            raise WrapUsageError(f"{flag} {values[variable]!r} is not a whole number of seconds; fix: e.g. {flag} 30")
    if values["NSYSKIT_STEP_HOOK"] not in ("0", "1"):
        raise WrapUsageError(f"--step-hook {values['NSYSKIT_STEP_HOOK']!r} is not 0 or 1; fix: use 1 (count steps) or 0")


def launcher_of(env: dict[str, str]) -> str:
    """Who started this rank, from its variables: torchrun, mpirun, srun, or pmi."""
    for variable, launcher in (("TORCHELASTIC_RUN_ID", "torchrun"), ("OMPI_COMM_WORLD_RANK", "mpirun"),
                               ("SLURM_PROCID", "srun"), ("PMI_RANK", "pmi"), ("PMIX_RANK", "pmix")):  # fmt: skip
        if env.get(variable):
            return launcher
    return "none"


def wrapper_path() -> str:
    """The kit's wrapper: the checkout's or the package's copy, else the image's."""
    return str(CHECKOUT_WRAPPER) if CHECKOUT_WRAPPER.is_file() else IMAGE_WRAPPER


def load_wrapper(path: str):
    """The wrapper script (no .py suffix) as a module, so this process runs its main and then writes run.json."""
    loader = importlib.machinery.SourceFileLoader("nsys_profile", path)
    spec = importlib.util.spec_from_loader("nsys_profile", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def record_run(run_dir: str, env: dict[str, str], command: list[str]) -> None:
    """Rewrite RUN_DIR/run.json from the ranks' status files found there (atomic: the last rank to end writes the
    fullest); a rank that cannot write it leaves its status file, which the analysis reads anyway."""
    statuses = runrecord.read_statuses(run_dir)
    world = max([int(env.get("WORLD_SIZE") or 0), *(s.rank + 1 for s in statuses)])
    record = runrecord.RunRecord(
        run_id=env["NSYSKIT_JOB_ID"], target="wrap", launcher=env.get("NSYSKIT_LAUNCHER", ""), world_size=world or None,
        profiler="nsys", profile_ranks=env.get("NSYSKIT_PROFILE_RANKS", "all"), workload="command", command=command,
        ranks=statuses, files=_files(run_dir),
    )  # fmt: skip
    times = [(s.started, s.ended) for s in statuses if s.started and s.ended]
    if times:
        record.started, record.ended = min(t[0] for t in times), max(t[1] for t in times)
        record.duration_s = round(record.ended - record.started, 3)
    record.exit_code = max((s.exit_code for s in statuses), default=0)
    try:
        record.write(run_dir)
    except OSError as exc:
        sys.stderr.write(f"nsyskit wrap: could not write {run_dir}/{runrecord.RUN_JSON} ({exc.strerror}); the ranks' "
                         f"status files in {runrecord.LOGS}/ stay\n")  # fmt: skip


def _files(run_dir: str) -> dict[str, list[str]]:
    """The reports and exports in the folder, by kind (as run.json lists them for the kit's runs)."""
    names = sorted(os.listdir(run_dir))
    return {"reports": [n for n in names if n.endswith(".nsys-rep")], "sqlite": [n for n in names if n.endswith(".sqlite")]}


def main(argv: list[str]) -> int:
    """Run one rank of COMMAND under the wrapper; its exit code (1: a bad wrap line, nothing run)."""
    try:
        flag_words, command = split_argv(argv)
        flags = parser().parse_args(flag_words)
        values = settings(flags, dict(os.environ))
    except WrapUsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    os.environ.update(values)
    Path(values["NSYSKIT_REPORT_DIR"]).mkdir(parents=True, exist_ok=True)
    code = load_wrapper(wrapper_path()).main(command)
    record_run(values["NSYSKIT_REPORT_DIR"], dict(os.environ), command)
    return code
