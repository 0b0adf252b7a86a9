"""Resolve the layered configuration (defaults < .env < profile < environment < flags) and validate it."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

from nsyskit.config import parse as p
from nsyskit.config.schema import Config, key_of, settings
from nsyskit.errors import ConfigError, ConfigErrors

PROFILE_ENV = "NSYSKIT_PROFILE"


def profile_path(root: Path, profile: str) -> Path:
    """profiles/<name>.env under the project root (a path to a file is taken as is)."""
    candidate = Path(profile)
    if candidate.suffix == ".env" and candidate.exists():
        return candidate
    return root / "profiles" / f"{profile}.env"


def available_profiles(root: Path) -> list[str]:
    """Names of the overlays in profiles/."""
    return sorted(path.stem for path in (root / "profiles").glob("*.env"))


def _read_env_file(path: Path, label: str, known: set[str], warnings: list[str]) -> dict[str, str]:
    """Key/value pairs of one .env file; unknown keys are dropped with a (did-you-mean) warning."""
    values: dict[str, str] = {}
    for key, value in dotenv_values(path, interpolate=False).items():
        if key in known:
            values[key] = "" if value is None else value
            continue
        guess = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
        hint = f": did you mean {guess[0]}?" if guess else " (not a nsyskit setting; ignored)"
        warnings.append(f"unknown key {key} in {label}{hint}")
    return values


def _environment_warnings(environ: Mapping[str, str], known: set[str]) -> list[str]:
    """Did-you-mean warnings for environment variables that look like a misspelt setting."""
    prefixes = {key.split("_", 1)[0] + "_" for key in known}
    warnings = []
    for name in sorted(environ):
        # Slurm sets dozens of SLURM_* variables inside an allocation; they are Slurm's, not misspellings of ours.
        if name in known or not name.startswith(tuple(prefixes)) or name.startswith("SLURM_"):
            continue
        guess = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.85)
        if guess:
            warnings.append(f"unknown environment variable {name}: did you mean {guess[0]}?")
    return warnings


def load_config(
    root: Path | str,
    profile: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Read defaults, ROOT/.env, the profile overlay, the environment and flag overrides; raise ConfigErrors listing every problem."""
    root = Path(root)
    environ = os.environ if environ is None else environ
    fields = settings()
    known = {key_of(f) for f in fields}
    warnings: list[str] = []
    layers: list[tuple[str, dict[str, str]]] = []

    env_file = root / ".env"
    if env_file.is_file():
        layers.append((".env", _read_env_file(env_file, ".env", known, warnings)))

    profile = profile or environ.get(PROFILE_ENV) or None
    if profile:
        path = profile_path(root, profile)
        if not path.is_file():
            names = ", ".join(available_profiles(root)) or "none"
            raise ConfigErrors([ConfigError(PROFILE_ENV, profile, f"no profile file {path}", f"use one of: {names}")])
        label = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        layers.append((label, _read_env_file(path, label, known, warnings)))

    layers.append(("environment", {k: v for k, v in environ.items() if k in known}))
    warnings += _environment_warnings(environ, known)

    flag_values: dict[str, str] = {}
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key not in known:
            raise KeyError(f"override {key} is not a setting")  # a programming error, not a user one
        flag_values[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    layers.append(("flag", flag_values))

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    errors: list[ConfigError] = []
    for f in fields:
        key = key_of(f)
        raw, source = f.metadata["raw_default"], "default"
        for label, layer in layers:
            if key in layer:
                raw, source = layer[key], label
        sources[key] = source
        try:
            values[f.name] = f.metadata["parse"](raw)
        except p.Problem as problem:
            errors.append(ConfigError(key, raw, problem.problem, problem.fix, source))

    if not errors:
        errors += _cross_checks(values, sources)
    if errors:
        raise ConfigErrors(errors)
    return Config(**values, sources=sources, warnings=tuple(warnings))


def _cross_checks(v: dict[str, Any], sources: dict[str, str]) -> list[ConfigError]:
    """Rules that tie several settings together; every broken rule is reported."""
    errors = []

    def err(key: str, problem: str, fix: str) -> None:
        value = v[key.lower()]
        shown = ("true" if value else "false") if isinstance(value, bool) else value
        errors.append(ConfigError(key, shown, problem, fix, sources[key]))

    if v["install_efa"] and not v["install_mpi"]:
        err("INSTALL_EFA", "EFA needs MPI but INSTALL_MPI=false", "set INSTALL_MPI=true, or INSTALL_EFA=false")
    if v["install_tests"] and not v["install_efa"]:
        err("INSTALL_TESTS", "the NCCL tests need EFA but INSTALL_EFA=false", "set INSTALL_EFA=true, or INSTALL_TESTS=false")
    if v["openmpi_source"] == "efa" and v["install_mpi"] and not v["install_efa"]:
        err("OPENMPI_SOURCE", "OpenMPI from the EFA installer needs INSTALL_EFA=true", "set OPENMPI_SOURCE=distro or release, or INSTALL_EFA=true")

    ecr = p.ECR_HOST.fullmatch(v["registry"])
    if ecr and ecr["region"] != v["aws_region"]:
        err("AWS_REGION", f"conflicts with the region {ecr['region']} of REGISTRY {v['registry']}",
            f"set AWS_REGION={ecr['region']}, or use a registry in {v['aws_region']}")

    steps = v["profile_steps"]
    if steps and steps[1] > v["steps"]:
        err("PROFILE_STEPS", f"ends after the last training step (STEPS={v['steps']})",
            f"use a range within 1-{v['steps']}, or raise STEPS")
    ranks = v["profile_ranks"]
    world = v["nodes"] * v["procs_per_node"]
    if ranks not in ("all", "local0") and max(int(r) for r in ranks.split(",")) >= world:
        err("PROFILE_RANKS", f"names a rank outside the world of {world} ranks (NODES x PROCS_PER_NODE)",
            f"use ranks 0-{world - 1}, all or local0")
    if v["profiler"] != "nsys" and v["k8s_profiler"] != "wrapper":  # NVIDIA's injectors start nsys, not ncu/torch
        err("PROFILER", f"needs the kit's wrapper but K8S_PROFILER={v['k8s_profiler']} starts nsys itself",
            "set K8S_PROFILER=wrapper, or PROFILER=nsys")
    return errors
