"""Conventions shared by every Invoke task: error handling, config loading, the project root."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import invoke
from invoke import Exit

from nsyskit import console
from nsyskit.errors import NsyskitError

if TYPE_CHECKING:
    from nsyskit.config import Config

PROFILE_HELP = "Profile overlay from profiles/ (e.g. local-cpu); default: $NSYSKIT_PROFILE, else none."


def task(*args: Any, **kwargs: Any):
    """invoke.task whose NsyskitErrors become a one-line message on stderr and a non-zero exit."""

    def decorate(body):
        @functools.wraps(body)
        def run(c, *a, **kw):
            try:
                return body(c, *a, **kw)
            except NsyskitError as exc:
                raise Exit(f"error: {exc.one_line()}", code=exc.exit_code) from None
            except KeyboardInterrupt:
                raise Exit("interrupted", code=130) from None

        return invoke.task(*args, **kwargs)(run)

    return decorate


def project_root(c: invoke.Context) -> Path:
    """The folder of tasks.py (set by tasks.py in the collection's config), else the current folder."""
    root = c.config.get("nsyskit", {}).get("root")
    return Path(root) if root else Path.cwd()


def load(c: invoke.Context, profile: str | None = None, **flags: Any) -> Config:
    """Load the config for a task; `flags` maps setting names (lower case) to flag values (None: not given)."""
    from nsyskit.config import load_config  # imported per task: `invoke --list` stays fast

    overrides = {key.upper(): value for key, value in flags.items() if value is not None}
    cfg = load_config(project_root(c), profile=profile, overrides=overrides)
    for warning in cfg.warnings:
        console.warn(warning)
    return cfg
