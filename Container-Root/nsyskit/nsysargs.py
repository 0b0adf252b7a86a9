"""Which ranks are profiled and with which 'nsys profile' arguments: one decision for the wrapper and the k8s injectors.

The single source, shared like runrecord.py: the wrapper in the image imports it from /nsyskit, the host as
nsyskit.ranks.nsysargs (src/nsyskit/ranks/nsysargs.py links here). Standard library only, Python 3.8+. Settings come as the
NSYSKIT_* environment that nsyskit.ranks.launch.wrapper_env renders from the config.
"""

from __future__ import annotations

import glob
import os
import re
import shlex

EFA_MIN_NSYS = (2024, 4)  # first nsys with the efa_metrics plugin
WINDOW_RANGE = "profile_window"  # the NVTX range the example opens around --profile-steps
DEFAULT_TRACE = "cuda,nvtx,osrt"
CAPTURES = ("none", "cudaProfilerApi", "nvtx")
# Where QdstrmImporter (what turns the .qdstrm nsys spools into a .nsys-rep) lives besides next to nsys itself:
# Debian's layout, NVIDIA's installers and CUDA toolkits, and the nsys that ships inside Nsight Compute.
IMPORTER_GLOBS = (
    "/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter",
    "/opt/nvidia/nsight-systems*/*/host-linux-x64/QdstrmImporter",
    "/opt/nvidia/nsight-systems*/host-linux-x64/QdstrmImporter",
    "/usr/local/cuda*/nsight-systems*/host-linux-x64/QdstrmImporter",
    "/opt/nvidia/nsight-compute/*/host/*/QdstrmImporter",
)


def should_profile(selection: str, rank: int, local_rank: int) -> bool:
    """Whether this rank runs under the profiler: all, none, local0 (local rank 0 of each node) or a list like 0,3."""
    selection = selection.strip().lower().replace(" ", "") or "all"
    if selection == "all":
        return True
    if selection == "none":
        return False
    if selection == "local0":
        return local_rank == 0
    if re.fullmatch(r"\d+(,\d+)*", selection):
        return rank in {int(n) for n in selection.split(",")}
    raise ValueError(f"NSYSKIT_PROFILE_RANKS={selection!r}: use all, none, local0 or a list of ranks like 0,3")


def flag_int(env: dict, key: str) -> int:
    """A non-negative integer setting (empty: 0)."""
    value = env.get(key, "").strip() or "0"
    if not value.isdigit():
        raise ValueError(f"{key}={value!r}: needs a whole number (seconds, launches)")
    return int(value)


def efa_requested(env: dict) -> bool:
    """Whether the settings ask for the EFA NIC counters."""
    return env.get("NSYSKIT_EFA_METRICS", "0").strip().lower() in ("1", "true", "yes")


def efa_decision(env: dict, local_rank: int, nsys_version: tuple | None) -> tuple[bool, str]:
    """Whether to add '--enable efa_metrics', and why (recorded in the rank's status file)."""
    if not efa_requested(env):
        return False, "not requested"
    if local_rank != 0:
        return False, "skipped: only local rank 0 samples the node's NICs"
    if nsys_version is not None and tuple(nsys_version[:2]) < EFA_MIN_NSYS:
        have = ".".join(map(str, nsys_version))
        return False, f"skipped: nsys {have} has no efa_metrics plugin (needs >= {EFA_MIN_NSYS[0]}.{EFA_MIN_NSYS[1]})"
    return True, "applied"


def capture_mode(workload: str, profile_range: str, window: bool, gpu: bool, step_hook: bool) -> str:
    """NSYSKIT_CAPTURE for the settings: where nsys starts and stops recording (profile_args turns it into flags).

    On GPU the example (and a command's step hook) bracket PROFILE_STEPS (`window`) with cudaProfilerStart/Stop; on
    CPU they mark it with NVTX and the whole run is recorded. PROFILE_RANGE=nvtx:NAME records the program's own range.
    The NCCL tests open no capture range: they are recorded whole.
    """
    if workload == "command" and profile_range:
        return "nvtx"
    hook = workload == "ddp" or (workload == "command" and step_hook)
    return "cudaProfilerApi" if window and gpu and hook else "none"


def profile_args(env: dict, output: str, efa: bool = False) -> list[str]:
    """'profile' and every option after it for one rank, up to the application (pure: settings in, argv out)."""
    sample = env.get("NSYSKIT_SAMPLE", "").strip() or "none"
    args = [
        "profile",
        f"--trace={env.get('NSYSKIT_TRACE', '').strip() or DEFAULT_TRACE}",
        f"--sample={sample}",
        f"--output={output}",
        "--force-overwrite=true",
        "--stats=false",
    ]
    if sample == "none":
        args.append("--cpuctxsw=none")  # context-switch tracing needs the same perf access as sampling
    capture = env.get("NSYSKIT_CAPTURE", "").strip() or "none"
    if capture == "cudaProfilerApi":
        args += ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    elif capture == "nvtx":  # record only the example's profile_window range; its ranges are unregistered strings
        args += [
            "--capture-range=nvtx", f"--nvtx-capture={env.get('NSYSKIT_NVTX_CAPTURE') or WINDOW_RANGE}",
            "--capture-range-end=stop", "--env-var=NSYS_NVTX_PROFILER_REGISTER_ONLY=0",
        ]  # fmt: skip
    elif capture != "none":
        raise ValueError(f"NSYSKIT_CAPTURE={capture!r}: use none, cudaProfilerApi or nvtx")
    else:  # delay/duration only make sense without a capture range
        if flag_int(env, "NSYSKIT_PROFILE_DELAY"):
            args.append(f"--delay={flag_int(env, 'NSYSKIT_PROFILE_DELAY')}")
        if flag_int(env, "NSYSKIT_PROFILE_DURATION"):
            args.append(f"--duration={flag_int(env, 'NSYSKIT_PROFILE_DURATION')}")
    if efa:
        args += ["--enable", "efa_metrics"]  # one sampler per node: the NIC counters are node-wide
    return args + shlex.split(env.get("NSYSKIT_EXTRA_ARGS", ""))


def injector_problems(env: dict) -> list[tuple[str, str, str, str]]:
    """(key, value, problem, fix) for each setting an injector (nsys started by NVIDIA's operator) cannot honour.

    The injector starts the same 'nsys profile' in every matched process, so per-rank decisions are out of reach:
    a rank selection, and EFA counters (one sampler per node, on local rank 0, and only where nsys has them).
    """
    problems = []
    selection = env.get("NSYSKIT_PROFILE_RANKS", "all").strip().lower() or "all"
    if selection != "all":
        problems.append(("PROFILE_RANKS", selection, "an injector profiles every rank: it cannot select ranks",
                         "set PROFILE_RANKS=all, or K8S_PROFILER=wrapper"))  # fmt: skip
    if efa_requested(env):
        problems.append(("EFA_METRICS", True, "an injector cannot limit the EFA sampler to local rank 0 of each node",
                         "set EFA_METRICS=false, or K8S_PROFILER=wrapper"))  # fmt: skip
    return problems


def find_importer(nsys: str | None = None) -> str | None:
    """QdstrmImporter for the `nsys` binary (a path or a name on PATH): in a folder beside nsys's own (host-linux-x64,
    or linux-desktop-glibc_*-x64 in Nsight Compute's copy), else in a known install location; None when absent."""
    import shutil  # here: the wrapper imports this module on every rank's start

    candidates = []
    if nsys:
        real = os.path.realpath(shutil.which(nsys) or nsys)
        candidates += sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(real)), "*", "QdstrmImporter")))
    for pattern in IMPORTER_GLOBS:
        candidates += sorted(glob.glob(pattern), reverse=True)  # the newest version first
    return next((path for path in candidates if os.path.isfile(path) and os.access(path, os.X_OK)), None)


PAYLOADS_FLAG = "--include-blobs"  # 'nsys export' writes NVTX extended payloads' values (NCCL's sizes) only with it
_exports_payloads: dict = {}  # nsys binary (its real path) -> whether its export has PAYLOADS_FLAG


def exports_payloads(nsys: str) -> bool:
    """Whether this nsys's export can write the NVTX payload values (PAYLOADS_FLAG): what its 'nsys export --help'
    lists, asked once per binary (never guessed from a version: builds differ)."""
    import shutil
    import subprocess

    key = os.path.realpath(shutil.which(nsys) or nsys)
    if key not in _exports_payloads:
        try:
            done = subprocess.run([nsys, "export", "--help"], capture_output=True, text=True, timeout=120)
            _exports_payloads[key] = PAYLOADS_FLAG in done.stdout + done.stderr
        except (OSError, subprocess.SubprocessError):
            _exports_payloads[key] = False  # no nsys to ask: the export itself then says what is wrong
    return _exports_payloads[key]


def payloads_state(nsys: str) -> str:
    """What a rank's status records about its export's NCCL payload values (runrecord.RankStatus.nccl_payloads)."""
    return "exported" if exports_payloads(nsys) else "not exported"


def export_args(nsys: str, output: str, report: str) -> list:
    """'nsys export' of REPORT into the SQLite file OUTPUT, with the NVTX payload values where this nsys has the flag."""
    payloads = [PAYLOADS_FLAG + "=true"] if exports_payloads(nsys) else []
    return [nsys, "export", "--type=sqlite", *payloads, "--force-overwrite=true", "--output=" + output, report]
