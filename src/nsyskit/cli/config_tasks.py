"""Tasks that show and check the configuration and prepare this machine."""

from __future__ import annotations

import json

from invoke import Exit

from nsyskit import console
from nsyskit.cli import PROFILE_HELP, env_file, load, project_root, task


def _shown(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "-".join(str(v) for v in value)
    return "" if value is None else str(value)


@task(
    name="config",
    help={
        "check": "Only validate: list every problem at once (settings, and the host files the build needs: CA bundle, wheelhouse, local *_SOURCE files) and exit non-zero if there is any.",
        "profile": PROFILE_HELP,
        "json": "Print the resolved settings as JSON (key: value, source).",
        "template": "Print the documented .env (every setting commented out, with its default and help, grouped).",
        "output": "With --template: write it to this file instead of stdout (an existing file needs --force).",
        "force": "With --template --output: overwrite an existing file.",
        "k8s": "With --check: also run the Kubernetes target's checks (what 'invoke deploy --k8s' would reject).",
        "slurm": "With --check: also run the Slurm target's checks (what 'invoke deploy --slurm' would reject).",
    },
)
def show_config(c, check=False, profile=None, json_=False, template=False, output=None, force=False, k8s=False,
                slurm=False):  # fmt: skip
    """Print the resolved configuration and where each value came from (defaults < .env < profile < env < flags)."""
    from rich.markup import escape
    from rich.table import Table

    from nsyskit.config import SECTIONS, available_profiles, key_of, load_config, settings
    from nsyskit.errors import ConfigErrors, UsageError

    if (output or force) and not template:
        raise UsageError(f"{'--output' if output else '--force'} goes with --template only", fix="add --template")
    if template:
        _template(output, force)
        return
    if (k8s or slurm) and not check:
        raise UsageError(f"{'--k8s' if k8s else '--slurm'} goes with --check only", fix="add --check")
    root = project_root(c)
    try:
        cfg = load_config(root, profile=profile, env_file=env_file(c))
        if check:
            check_deployable(cfg, root, k8s=k8s, slurm=slurm)
    except ConfigErrors as problems:
        for problem in problems.errors:
            console.err.print(f"[red]✗[/] {escape(str(problem))}", markup=True)
        raise Exit(f"{len(problems.errors)} configuration problem(s)", code=1) from None
    for warning in cfg.warnings:
        console.warn(warning)
    if check:
        console.done(f"configuration is valid ({len(settings())} settings, profile: {cfg.profile or 'none'})")
        return
    rows = {key_of(f): (_shown(getattr(cfg, f.name)), cfg.sources[key_of(f)], f.metadata["section"]) for f in settings()}
    if json_:
        console.out.print_json(json.dumps({k: {"value": v, "source": s} for k, (v, s, _) in rows.items()}))
        return
    table = Table(title="nsyskit configuration  (defaults < .env < profile < environment < flags)", title_justify="left")
    for column in ("setting", "value", "from"):
        table.add_column(column)
    for section in SECTIONS:
        table.add_section()
        for key, (value, source, sect) in rows.items():
            if sect == section:
                style = "dim" if source == "default" else ""
                table.add_row(key, value, source, style=style)
    console.out.print(table)
    console.out.print(f"image: {cfg.image_ref}   world size: {cfg.world_size}   profiles: {', '.join(available_profiles(root))}")


def check_deployable(cfg, root, k8s: bool, slurm: bool) -> None:
    """What 'invoke build' (host files) and the chosen targets' deploy would reject, found now, all at once."""
    from nsyskit.errors import ConfigErrors
    from nsyskit.image.assets import build_problems
    from nsyskit.targets import validate_targets

    problems = build_problems(cfg, root)
    try:
        validate_targets(cfg, root, k8s=k8s, slurm=slurm)
    except ConfigErrors as found:
        problems += found.errors
    if problems:
        raise ConfigErrors(problems)


def _template(output: str | None, force: bool) -> None:
    from pathlib import Path

    from nsyskit.config.template import render_template, write_template

    if not output:
        console.out.file.write(render_template())  # plain text: no rich markup or wrapping
        return
    write_template(Path(output), force)
    console.done(f"wrote the documented settings to {output}")


@task(
    help={
        "output": "Write to this file instead of .env in the current folder (or the --env-file given).",
        "force": "Overwrite an existing file.",
    }
)
def init(c, output=None, force=False):
    """Write a commented .env to start from: every setting commented out, with its default and help (never overwrites)."""
    from pathlib import Path

    from nsyskit.config.template import write_template

    target = Path(output) if output else env_file(c) or project_root(c) / ".env"
    write_template(target, force)
    console.done(f"wrote {target}: uncomment and set what differs from the defaults, then 'nsyskit config --check'")


@task(help={"profile": PROFILE_HELP})
def setup(c, profile=None):
    """Prepare this machine: a running Docker engine and the base image the profile needs (idempotent)."""
    from nsyskit.setup import run_setup

    report = run_setup(load(c, profile))
    for line in report.present:
        console.done(line)
    for line in report.done:
        console.done(line)
    if not report.changed:
        console.out.print("setup: nothing to do, everything was already in place")
