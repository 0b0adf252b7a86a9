"""Resolve the layered configuration (defaults < .env < profile < environment < flags) and validate it."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nsyskit.assets import kit_root
from nsyskit.config import parse as p
from nsyskit.config.envfile import read_env_file
from nsyskit.config.environ import environment_checks, environment_layer
from nsyskit.config.rules import cross_checks
from nsyskit.config.schema import Config, key_of, renamed_key_problem, settings
from nsyskit.errors import ConfigError, ConfigErrors, ConfigFileError, NsyskitError

PROFILE_ENV = "NSYSKIT_PROFILE"
_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def profile_path(root: Path, profile: str, source: str = "flag") -> Path:
    """profiles/<name>.env under the project root (a path to an existing .env file is taken as is)."""
    candidate = Path(profile)
    if candidate.suffix == ".env" and "/" in profile and candidate.is_file():
        return candidate
    if not _PROFILE_NAME.fullmatch(profile) or profile.endswith(".env"):
        names = ", ".join(available_profiles(root)) or "none"
        raise ConfigError(
            PROFILE_ENV, profile, "is not a profile name (letters, digits, '.', '_', '-'; at most 100) "
            "nor the path of an existing .env file", f"use one of: {names}", source,
        )  # fmt: skip
    own = root / "profiles" / f"{profile}.env"
    return own if own.exists() else kit_root(root) / "profiles" / f"{profile}.env"


def available_profiles(root: Path) -> list[str]:
    """Names of the overlays in the project's profiles/ and the kit's own (local-cpu)."""
    folders = {root / "profiles", kit_root(root) / "profiles"}
    return sorted({path.stem for folder in folders for path in folder.glob("*.env")})


def _known_only(values: dict[str, str], label: str, known: set[str], warnings: list[str],
                errors: list[NsyskitError]) -> dict[str, str]:  # fmt: skip
    """The settings of one file; unknown keys are dropped with a (did-you-mean) warning, renamed ones are errors."""
    kept = {}
    for key, value in values.items():
        if key in known:
            kept[key] = value
            continue
        if renamed := renamed_key_problem(key, value, label):
            errors.append(renamed)
            continue
        guess = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
        hint = f": did you mean {guess[0]}?" if guess else " (not a nsyskit setting; ignored)"
        warnings.append(f"unknown key {key} in {label}{hint}")
    return kept


def _label(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _file_layers(root: Path, profile: str | None, source: str, known: set[str], warnings: list[str],
                 errors: list[NsyskitError], env_file: Path | None = None) -> list[tuple[str, dict[str, str]]]:  # fmt: skip
    """The .env (or the `env_file` given) and profile layers; a file that cannot be used adds its error."""
    layers = []
    if env_file is not None:
        if not (env_file.exists() or env_file.is_symlink()):
            errors.append(ConfigFileError(env_file, "does not exist", "give an existing settings file to --env-file, "
                                          "or write one with 'nsyskit init --output FILE'"))  # fmt: skip
        paths = [(env_file, _label(env_file.absolute(), root))] if env_file.exists() or env_file.is_symlink() else []
    else:
        env_file = root / ".env"
        paths = [(env_file, ".env")] if env_file.exists() or env_file.is_symlink() else []
    if profile:
        try:
            path = profile_path(root, profile, source)
        except ConfigError as exc:
            errors.append(exc)
            path = None
        if path is not None and not path.exists():
            names = ", ".join(available_profiles(root)) or "none"
            errors.append(ConfigError(PROFILE_ENV, profile, f"no profile file {path}", f"use one of: {names}", source))
        elif path is not None:
            paths.append((path, _label(path, root)))
    for path, label in paths:
        try:
            values, bad_lines = read_env_file(path, label)
        except NsyskitError as exc:
            errors.append(exc)
            continue
        errors += bad_lines  # the good lines still count, so every other problem is found too
        layers.append((label, _known_only(values, label, known, warnings, errors)))
    return layers


def load_config(
    root: Path | str,
    profile: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    env_file: Path | None = None,
) -> Config:
    """Read defaults, ROOT/.env, the profile overlay, the environment and flag overrides; raise ConfigErrors listing every problem.

    The environment sets a setting KEY as NSYSKIT_KEY; a bare KEY still works with a deprecation warning,
    except SLURM_* (Slurm's own variables), which only the prefixed name sets.
    """
    root = Path(root)
    environ = os.environ if environ is None else environ
    fields = settings()
    known = {key_of(f) for f in fields}
    warnings: list[str] = []
    errors: list[NsyskitError] = []
    source = "flag" if profile else "environment"
    profile = profile or environ.get(PROFILE_ENV) or None
    layers = _file_layers(root, profile, source, known, warnings, errors, env_file)
    from_environment = environment_layer(environ, known)
    layers.append(("environment", from_environment.values))
    warnings += from_environment.warnings
    errors += from_environment.errors

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
    resolved_raw: dict[str, str] = {}
    for f in fields:
        key = key_of(f)
        raw, source = f.metadata["raw_default"], "default"
        for label, layer in layers:
            if key in layer:
                raw, source = layer[key], label
        sources[key], resolved_raw[key] = source, raw
        try:
            values[f.name] = f.metadata["parse"](p.plain_text(raw))
        except p.Problem as problem:
            errors.append(ConfigError(key, raw, problem.problem, problem.fix, source))

    warnings += from_environment.ignored_notes(resolved_raw)
    # Rules tying settings together run even when some value is bad: each skips when one of its inputs is.
    errors += cross_checks(values, sources, root)
    errors += environment_checks(environ)
    if errors:
        raise ConfigErrors(errors)
    return Config(**values, sources=sources, warnings=tuple(warnings), profile=profile)
