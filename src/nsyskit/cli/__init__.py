"""Conventions shared by every Invoke task: error handling, config loading, the project root."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import invoke
from invoke import Exit
from invoke.exceptions import Failure

from nsyskit import console
from nsyskit.errors import NsyskitError

if TYPE_CHECKING:
    from nsyskit.config import Config

PROFILE_HELP = "Profile overlay from profiles/ (e.g. local-cpu); default: $NSYSKIT_PROFILE, else none."
COMMAND_HELP = "Override COMMAND: what one rank runs with --workload command, e.g. \"python3 /code/train.py --lr 3e-4\"."
MOUNT_HELP = "Bind mount HOST:CONTAINER[:ro] for your code and data (repeatable; replaces MOUNTS)."


DEBUG_ENV = "NSYSKIT_DEBUG"  # set (to anything) to see the traceback of an unexpected error


def _unexpected(exc: Exception) -> Exit:
    """One line for an error no check foresaw: the machine's own complaint (disk, permissions, engine) or a bug."""
    from docker.errors import DockerException  # imported on error only: `invoke --list` stays fast

    if isinstance(exc, OSError) and exc.strerror:
        where = f" {exc.filename}" if exc.filename else ""
        return Exit(f"error:{where}: {exc.strerror}; fix: check that path, its permissions and the free space", code=1)
    if isinstance(exc, DockerException):
        text = " ".join(str(exc).split())[:300]
        return Exit(f"error: the Docker engine refused: {text}; fix: act on the engine's message", code=1)
    text = " ".join(str(exc).split())[:300]
    return Exit(f"error: unexpected {type(exc).__name__}: {text}; fix: rerun with {DEBUG_ENV}=1 for the "
                "traceback and report it", code=70)  # fmt: skip


HELP_FLAGS = ("-h", "--help")


def _asks_for_help(args: tuple, kwargs: dict) -> bool:
    """True when a positional argument took '--help': Invoke gives a positional the next word, even a flag."""
    return any(isinstance(value, str) and value in HELP_FLAGS for value in (*args, *kwargs.values()))


def _show_help(c: invoke.Context, function_name: str) -> None:
    """Print the task's help as '<program> --help TASK' does (invoke in a checkout, nsyskit installed), then stop."""
    import subprocess
    import sys

    name = function_name.rstrip("_").replace("_", "-")
    module = "nsyskit" if c.config.get("nsyskit", {}).get("program") == "nsyskit" else "invoke"
    raise Exit(code=subprocess.call([sys.executable, "-m", module, "--help", name]))


# Short flags only where every command-line tool has them; every other flag is long only (Invoke would otherwise
# give each flag its first free letter: -h was --html, not help).
SHORT_FLAGS = {"output": "o", "json": "j"}


class KitTask(invoke.Task):
    """An Invoke task without automatic short flags, with the conventional ones of SHORT_FLAGS, whose arguments can be
    asked for more than once (the help of each flag is kept)."""

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[invoke.Argument]:
        saved = dict(self.help)  # Invoke pops each flag's help as it reads it: a second call would have none
        try:
            arguments = super().get_arguments(ignore_unknown_help)
        finally:
            self.help = saved
        for argument in arguments:
            short = SHORT_FLAGS.get(argument.names[0])
            if short:
                argument.names = (*argument.names, short)
        return arguments


def number_flag(flag: str, value: object, default: float | None, integer: bool = False, low: float = 0.0):
    """A flag's value as a finite number >= low (an int when `integer`), or ConfigError naming the flag and value.

    Number flags are declared as text (default None), so a bad value reaches this one-line error instead of
    failing in Invoke's parser with a traceback.
    """
    import math

    from nsyskit.errors import ConfigError

    if value is None:
        return default
    kind = "a whole number" if integer else "a number"
    try:
        number = int(str(value)) if integer else float(str(value))
    except ValueError:
        number = None
    if number is None or not math.isfinite(number) or number < low:
        example = int(low) + 5 if integer else 5
        raise ConfigError(flag, value, f"must be {kind} >= {low:g}", f"e.g. {flag} {example}")
    return number


def task(*args: Any, **kwargs: Any):
    """invoke.task whose errors become a one-line message on stderr and a non-zero exit (never a traceback).

    NsyskitErrors carry their own message and fix; anything else (a full disk, a refusing engine, a bug) gets
    one line too, and the traceback only with NSYSKIT_DEBUG=1.
    """

    def decorate(body):
        @functools.wraps(body)
        def run(c, *a, **kw):
            if _asks_for_help(a, kw):
                _show_help(c, body.__name__)
            try:
                return body(c, *a, **kw)
            except NsyskitError as exc:
                raise Exit(f"error: {exc.one_line()}", code=exc.exit_code) from None
            except KeyboardInterrupt:
                raise Exit("interrupted", code=130) from None
            except (Exit, Failure):  # invoke's own ways out (a command run by c.run failing keeps its exit code)
                raise
            except BrokenPipeError:  # the reader of our output went away (| head): nothing to say
                raise Exit(code=141) from None
            except Exception as exc:  # noqa: BLE001 - the promise: one line, never a traceback
                if os.environ.get(DEBUG_ENV):
                    raise
                raise _unexpected(exc) from None

        kwargs.setdefault("klass", KitTask)
        kwargs.setdefault("auto_shortflags", False)
        return invoke.task(*args, **kwargs)(run)

    return decorate


def project_root(c: invoke.Context) -> Path:
    """The folder of tasks.py (set by tasks.py in the collection's config), else the current folder."""
    root = c.config.get("nsyskit", {}).get("root")
    return Path(root) if root else Path.cwd()


def env_file(c: invoke.Context) -> Path | None:
    """The settings file given with `nsyskit --env-file FILE` (None: the project's .env)."""
    given = c.config.get("nsyskit", {}).get("env_file")
    return Path(given) if given else None


def mount_setting(mounts: list[str] | None) -> str | None:
    """MOUNTS from the repeated --mount flag (None: not given, so MOUNTS of .env and the profile stays)."""
    return ",".join(mounts) if mounts else None


def load(c: invoke.Context, profile: str | None = None, **flags: Any) -> Config:
    """Load the config for a task; `flags` maps setting names (lower case) to flag values (None: not given)."""
    from nsyskit.config import load_config  # imported per task: `invoke --list` stays fast

    overrides = {key.upper(): value for key, value in flags.items() if value is not None}
    cfg = load_config(project_root(c), profile=profile, overrides=overrides, env_file=env_file(c))
    for warning in cfg.warnings:
        console.warn(warning)
    return cfg
