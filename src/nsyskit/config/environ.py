"""Settings from the process environment: NSYSKIT_<KEY>, the deprecated bare <KEY>, and Slurm's own SLURM_* left alone."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from nsyskit.config.schema import RENAMED_KEYS, renamed_key_problem
from nsyskit.errors import ConfigError

PREFIX = "NSYSKIT_"
# NSYSKIT_* variables of the kit itself that are no setting but look like one to did-you-mean:
# the profile overlay (not PROFILER) and the node index the rank wrapper exports (not NODES).
KIT_VARIABLES = frozenset({"NSYSKIT_PROFILE", "NSYSKIT_NODE", "NSYSKIT_ASSETS_PORT"})
ASSETS_PORT_ENV, DEFAULT_ASSETS_PORT = "NSYSKIT_ASSETS_PORT", 7489  # where 'invoke build' serves host files
# Bare names that are the standard variable of other tools with the very same meaning: honoured without a
# deprecation warning (a user sets AWS_REGION for the AWS CLI and SDKs; nsyskit's AWS calls mean the same region).
SHARED_NAMES = frozenset({"AWS_REGION"})


def env_name(key: str) -> str:
    """The environment variable of a setting: NSYSKIT_<KEY>."""
    return PREFIX + key


def slurm_owned(key: str) -> bool:
    """True for settings whose bare name Slurm reads itself (SLURM_*): only NSYSKIT_<KEY> sets them."""
    return key.startswith("SLURM_")


@dataclass
class EnvironmentLayer:
    """What the environment sets, the deprecation warnings it earned, and the bare SLURM_* values it ignored."""

    values: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    ignored: dict[str, str] = field(default_factory=dict)
    errors: list[ConfigError] = field(default_factory=list)  # variables of renamed keys

    def ignored_notes(self, resolved_raw: Mapping[str, str]) -> list[str]:
        """A note for each ignored bare SLURM_* variable whose value differs from what nsyskit resolved."""
        return [
            f"{key}={value!r} in the environment is Slurm's own variable and does not set nsyskit's {key} "
            f"(resolved: {resolved_raw[key]!r}); set {env_name(key)} for that"
            for key, value in sorted(self.ignored.items())
            if resolved_raw.get(key) != value
        ]


def environment_layer(environ: Mapping[str, str], known: set[str]) -> EnvironmentLayer:
    """The settings the environment gives: NSYSKIT_<KEY> wins; a bare <KEY> still works (deprecated) except SLURM_*;
    a renamed key's variable is an error naming the new key."""
    layer = EnvironmentLayer()
    for key in sorted(known):
        if env_name(key) in environ:
            layer.values[key] = environ[env_name(key)]
        elif key in environ and slurm_owned(key):
            # srun/sbatch read SLURM_PARTITION, SLURM_ACCOUNT... themselves: one variable cannot mean both.
            layer.ignored[key] = environ[key]
        elif key in environ:
            layer.values[key] = environ[key]
            if key not in SHARED_NAMES:
                layer.warnings.append(f"environment variable {key} is deprecated; use {env_name(key)}")
    for old in sorted(RENAMED_KEYS):
        for name in (env_name(old), old):
            if name in environ:
                layer.errors.append(renamed_key_problem(old, environ[name], "environment", name,
                                                        env_name(RENAMED_KEYS[old])))  # fmt: skip
    layer.warnings += _misspellings(environ, known)
    return layer


def _misspellings(environ: Mapping[str, str], known: set[str]) -> list[str]:
    """Did-you-mean warnings for environment variables that look like a misspelt setting (prefixed or bare)."""
    keys = sorted(known)
    bare_prefixes = tuple({key.split("_", 1)[0] + "_" for key in known})
    warnings = []
    for name in sorted(environ):
        if name.startswith(PREFIX):
            bare = name[len(PREFIX):]
            if bare in known or bare in RENAMED_KEYS or name in KIT_VARIABLES:
                continue
        elif name in known or not name.startswith(bare_prefixes) or name.startswith("SLURM_"):
            # Slurm sets dozens of SLURM_* variables inside an allocation; they are Slurm's, not misspellings of ours.
            continue
        else:
            bare = name
        guess = difflib.get_close_matches(bare, keys, n=1, cutoff=0.85)
        if guess:
            warnings.append(f"unknown environment variable {name}: did you mean {env_name(guess[0])}?")
    return warnings


def assets_port(environ: Mapping[str, str] | None = None) -> int:
    """The port the build's host files are served at: NSYSKIT_ASSETS_PORT (1-65535), default 7489."""
    raw = (os.environ if environ is None else environ).get(ASSETS_PORT_ENV, "")
    if not raw:
        return DEFAULT_ASSETS_PORT
    if not (raw.isascii() and raw.strip().isdigit() and 1 <= int(raw) <= 65535):
        raise ConfigError(ASSETS_PORT_ENV, raw, "is not a port number 1-65535",
                          f"set it to a free port from 1-65535, or unset it (default {DEFAULT_ASSETS_PORT})", "environment")  # fmt: skip
    return int(raw)


def environment_checks(environ: Mapping[str, str]) -> list:
    """The problems of the kit's own variables that are no setting (NSYSKIT_ASSETS_PORT), checked on every load."""
    try:
        assets_port(environ)
    except ConfigError as exc:
        return [exc]
    return []
