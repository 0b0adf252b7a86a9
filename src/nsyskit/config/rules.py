"""Rules that tie several settings together, or a setting to this machine's files; every broken rule is reported."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from nsyskit.config import parse as p
from nsyskit.errors import ConfigError
from nsyskit.ranks import nsysargs

# The versions Container-Root/nsyskit/install/nsys.sh has a pinned URL and sha256 for (pinned_deb); a unit test keeps them equal.
NSYS_PINNED = ("2025.2.1",)


def _nearest_existing(path: Path) -> Path:
    """PATH itself or its closest ancestor that exists."""
    while not os.path.exists(path) and path != path.parent:  # os.path: False (not an error) where we may not look
        path = path.parent
    return path


def report_dir_problem(report_dir: str, root: Path) -> tuple[str, str] | None:
    """(problem, fix) when REPORT_DIR can never hold run folders here: it, or a folder on its way, is a file."""
    folder = Path(report_dir) if Path(report_dir).is_absolute() else Path(root) / report_dir
    existing = _nearest_existing(folder)
    if not os.path.isdir(existing):
        shown = "names a file" if existing == folder else f"goes through the file {existing}"
        return f"{shown}, not a folder", "remove or rename that file, or set REPORT_DIR to a folder (default: reports)"
    return None  # whether we may write there is checked when a run makes its folder (only runs write there)


def manifest_problem(manifest: str, root: Path) -> tuple[str, str] | None:
    """(problem, fix) when K8S_MPI_OPERATOR_MANIFEST names a local file (not a URL) that kubectl could not read."""
    if not manifest:
        return None
    if "://" in manifest:
        parts = urlsplit(manifest)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return "is not an http(s) URL", "use https://HOST/PATH.yaml or a local file, or leave it empty for the pinned release"
        return None
    path = Path(manifest) if Path(manifest).is_absolute() else Path(root) / manifest
    if not os.path.isfile(path):
        return f"names no file ({path})", "give a manifest file or an https:// URL, or leave it empty for the pinned release"
    if not os.access(path, os.R_OK):
        return f"{path} cannot be read by this user", "make it readable (chmod a+r), or run as its owner"
    return None


def submit_prefix_problem(prefix: str) -> tuple[str, str] | None:
    """(problem, fix) when the program SLURM_SUBMIT_PREFIX starts with is a path that cannot run."""
    words = shlex.split(prefix) if prefix else []
    program = words[0] if words else ""
    if "/" not in program:
        return None  # looked up in PATH when it runs (it may be there only on the submit host)
    if os.path.isdir(program):
        return f"starts with the folder {program}, not a program", "start it with a command such as ssh login-node"
    if not os.path.isfile(program):
        return f"starts with {program}, which does not exist", "give an existing program, e.g. ssh login-node"
    if not os.access(program, os.X_OK):
        return f"starts with {program}, which is not executable", "chmod +x it, or give another program"
    return None


def cross_checks(v: dict[str, Any], sources: dict[str, str], root: Path) -> list[ConfigError]:
    """Every broken rule among the settings in V (those that parsed: a rule with a bad input is skipped)."""
    errors: list[ConfigError] = []

    def have(*names: str) -> bool:
        return all(name in v for name in names)

    def err(key: str, problem: str, fix: str) -> None:
        value = v[key.lower()]
        shown = ("true" if value else "false") if isinstance(value, bool) else value
        errors.append(ConfigError(key, shown, problem, fix, sources[key]))

    if have("install_efa", "install_mpi") and v["install_efa"] and not v["install_mpi"]:
        err("INSTALL_EFA", "EFA needs MPI but INSTALL_MPI=false", "set INSTALL_MPI=true, or INSTALL_EFA=false")
    if have("install_tests", "install_efa") and v["install_tests"] and not v["install_efa"]:
        err("INSTALL_TESTS", "the NCCL tests need EFA but INSTALL_EFA=false", "set INSTALL_EFA=true, or INSTALL_TESTS=false")
    if have("openmpi_source", "install_mpi", "install_efa") and v["openmpi_source"] == "efa" and v["install_mpi"] and not v["install_efa"]:
        err("OPENMPI_SOURCE", "OpenMPI from the EFA installer needs INSTALL_EFA=true", "set OPENMPI_SOURCE=distro or release, or INSTALL_EFA=true")

    ecr = p.ECR_HOST.fullmatch(v.get("registry", ""))
    if ecr and have("aws_region") and ecr["region"] != v["aws_region"]:
        err("AWS_REGION", f"conflicts with the region {ecr['region']} of REGISTRY {v['registry']}",
            f"set AWS_REGION={ecr['region']}, or use a registry in {v['aws_region']}")
    if have("registry", "registry_endpoint") and v["registry_endpoint"] and not v["registry"]:
        err("REGISTRY_ENDPOINT", "is used only to reach REGISTRY, which is empty",
            "set REGISTRY too (the name images are tagged with), or leave REGISTRY_ENDPOINT empty")
    if have("nsys_source", "nsys_version", "nsys_url") and v["nsys_source"] == "nvidia" and not v["nsys_url"] \
            and v["nsys_version"] not in NSYS_PINNED:
        err("NSYS_VERSION", f"has no pinned download (pinned: {', '.join(NSYS_PINNED)})",
            f"set NSYS_URL (and NSYS_SHA256) to that version's CLI .deb, or use NSYS_VERSION={NSYS_PINNED[0]}")
    if have("install_ncu", "ncu_source", "ncu_url", "ncu_sha256") and v["install_ncu"] and v["ncu_source"] == "nvidia" \
            and not (v["ncu_url"] and v["ncu_sha256"]):
        missing = " and ".join(k for k in ("NCU_URL", "NCU_SHA256") if not v[k.lower()])
        err("NCU_SOURCE", f"needs NVIDIA's Nsight Compute .deb, but {missing} {'are' if ' and ' in missing else 'is'} empty",
            "set NCU_URL and NCU_SHA256, or use NCU_SOURCE=nvidia-apt, debian or base")
    if have("registry", "image", "tag"):
        name = f"{v['registry']}/{v['image']}" if v["registry"] else v["image"]
        if len(name) > p.IMAGE_NAME_MAX:
            err("IMAGE", f"makes the image name {name[:40]}... {len(name)} characters long (Docker allows 255)",
                "use a shorter IMAGE (or REGISTRY)")

    if have("profile_steps", "steps", "workload") and v["workload"] != "command" and v["profile_steps"] \
            and v["profile_steps"][1] > v["steps"]:  # STEPS is the example's; a command's own steps are its business
        err("PROFILE_STEPS", f"ends after the last training step (STEPS={v['steps']})",
            f"use a range within 1-{v['steps']}, or raise STEPS")
    if have("nodes", "procs_per_node"):
        world = v["nodes"] * v["procs_per_node"]
        if world > p.INT32_MAX:
            err("NODES", f"x PROCS_PER_NODE={v['procs_per_node']} makes {world} ranks, more than {p.INT32_MAX}",
                "use fewer nodes or processes per node")
        elif have("profile_ranks") and v["profile_ranks"] not in ("all", "local0") and max(
            int(r) for r in v["profile_ranks"].split(",")
        ) >= world:
            err("PROFILE_RANKS", f"names a rank outside the world of {world} ranks (NODES x PROCS_PER_NODE)",
                f"use ranks 0-{world - 1}, all or local0")
    if have("workload", "profiler") and v["workload"] == "nccl-tests" and v["profiler"] == "torch":
        err("PROFILER", "is the PyTorch profiler inside the DDP example, which WORKLOAD=nccl-tests does not run",
            "set PROFILER=nsys (or ncu), or WORKLOAD=ddp")
    if have("workload", "nccl_tests") and v["workload"] == "nccl-tests" and not v["nccl_tests"]:
        err("NCCL_TESTS", "names no test, but WORKLOAD=nccl-tests runs them",
            "give at least one, e.g. NCCL_TESTS='all_reduce_perf -b 8 -e 2G -f 2 -g 1', or set WORKLOAD=ddp")
    if have("workload", "command") and v["workload"] == "command" and not v["command"].strip():
        err("COMMAND", "is empty, but WORKLOAD=command runs it on every rank",
            "give what one rank runs, e.g. COMMAND='python3 /code/train.py' (or --command), or set WORKLOAD=ddp")
    if have("workload", "profiler") and v["workload"] == "command" and v["profiler"] == "torch":
        err("PROFILER", "is the PyTorch profiler inside the DDP example, which WORKLOAD=command does not run",
            "set PROFILER=nsys (or ncu), or WORKLOAD=ddp")
    if have("workload", "profile_range") and v["profile_range"] and v["workload"] != "command":
        err("PROFILE_RANGE", f"records your program's own NVTX range, but WORKLOAD={v['workload']} runs the kit's",
            "leave PROFILE_RANGE empty (PROFILE_STEPS marks the kit's workloads), or set WORKLOAD=command")
    if have("profile_delay", "profile_duration", "workload", "profile_range", "profile_steps", "gpus_per_node", "step_hook"):
        mode = nsysargs.capture_mode(v["workload"], v["profile_range"], bool(v["profile_steps"]), v["gpus_per_node"] > 0,
                                     v["step_hook"])  # fmt: skip
        ranger = "PROFILE_RANGE" if mode == "nvtx" else "PROFILE_STEPS"
        shown = f"PROFILE_RANGE={v['profile_range']}" if mode == "nvtx" else "PROFILE_STEPS on GPUs"
        for key in ("PROFILE_DELAY", "PROFILE_DURATION"):
            if v[key.lower()] and mode != "none":  # nsys takes a capture range or a time window, never both
                err(key, f"gives a time window, but {shown} opens nsys' capture range, which decides what is recorded",
                    f"for a time window leave {ranger} empty; else set {key}=0")  # fmt: skip
    if have("profiler", "k8s_profiler") and v["profiler"] != "nsys" and v["k8s_profiler"] != "wrapper":
        # NVIDIA's injectors start nsys themselves: ncu and torch need the kit's wrapper in the pods.
        err("PROFILER", f"needs the kit's wrapper but K8S_PROFILER={v['k8s_profiler']} starts nsys itself",
            "set K8S_PROFILER=wrapper, or PROFILER=nsys")
    if have("k8s_profiler", "profile_ranks", "efa_metrics", "efa_per_node") and v["k8s_profiler"] != "wrapper":
        efa = v["efa_metrics"] and v["efa_per_node"] > 0  # as launch.wrapper_env decides it
        settings = {"NSYSKIT_PROFILE_RANKS": v["profile_ranks"], "NSYSKIT_EFA_METRICS": "1" if efa else "0"}
        for key, _value, problem, fix in nsysargs.injector_problems(settings):  # what one nsys for all ranks cannot do
            err(key, f"{problem} (K8S_PROFILER={v['k8s_profiler']})", fix)

    if have("k8s_mpi_operator_manifest") and (problem := manifest_problem(v["k8s_mpi_operator_manifest"], root)):
        err("K8S_MPI_OPERATOR_MANIFEST", *problem)
    if have("report_dir") and (problem := report_dir_problem(v["report_dir"], root)):
        err("REPORT_DIR", *problem)
    if have("slurm_submit_prefix") and (problem := submit_prefix_problem(v["slurm_submit_prefix"])):
        err("SLURM_SUBMIT_PREFIX", *problem)
    return errors
