"""Build the kit image: a friendly layer (plan, build) over the raw build context (context.py), the
build args (args.py), the host files served to the build (assets.py) and the Docker build (builder.py)."""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import docker
from docker.errors import ImageNotFound

from nsyskit import console, engine
from nsyskit.config import Config
from nsyskit.errors import BuildError, EngineUnavailable
from nsyskit.image import args as build_args_mod
from nsyskit.image.assets import Assets, assets_url, build_lock, collect_assets, gateway_address, serve
from nsyskit.image.builder import BuildProgress, run_build
from nsyskit.image.context import context_files, context_tar, inputs_digest

__all__ = ["BuildPlan", "BuildResult", "plan_build", "build_image", "content_tag"]


@dataclass(frozen=True)
class BuildPlan:
    """Everything a build will use, computed without building: tags, build args, context files, digest."""

    tags: list[str]
    build_args: dict[str, str]
    proxy_args: dict[str, str]
    context_files: list[str]
    digest: str
    assets: Assets
    assets_host: str
    base_image_id: str = ""
    layer_steps: int = 0  # RUN/COPY/ADD instructions: the steps a fully cached build reports as cached

    @property
    def image_ref(self) -> str:
        return self.tags[0]

    @property
    def content_ref(self) -> str:
        return self.tags[1]

    def docker_command(self) -> str:
        """The equivalent docker CLI command (proxy values redacted), for --dry-run and bug reports."""
        shown = {**self.build_args, **build_args_mod.redact(self.proxy_args)}
        # shlex.quote: the printed command is safe to paste, whatever quotes or blanks a value holds.
        parts = ["docker build"] + [f"--build-arg {k}={shlex.quote(v)}" for k, v in shown.items()]
        parts += [f"-t {shlex.quote(t)}" for t in self.tags] + ["."]
        return " \\\n  ".join(parts)


@dataclass(frozen=True)
class BuildResult:
    """A finished build: references, image ID, timings, cache use and sizes."""

    plan: BuildPlan
    image_id: str
    seconds: float
    steps: int
    cached_steps: int
    size_bytes: int
    base_size_bytes: int
    step_seconds: dict[int, float] = field(default_factory=dict)
    rebuilt: list[str] = field(default_factory=list)  # instructions of the steps that ran (not from the cache)

    @property
    def fully_cached(self) -> bool:
        """True when no step ran (every step after FROM came from the layer cache)."""
        return self.steps > 0 and not self.rebuilt


def content_tag(digest: str) -> str:
    """The content tag of a build: 'content-' + the first 12 hex digits of the inputs digest."""
    return f"content-{digest[:12]}"


def _image_id(client: docker.DockerClient | None, ref: str) -> str:
    if client is None:
        return ""
    try:
        return client.images.get(ref).id
    except ImageNotFound:
        return ""


def plan_build(
    cfg: Config, root: Path, client: docker.DockerClient | None = None, environ: Mapping[str, str] | None = None
) -> BuildPlan:
    """Tags, build args and inputs digest of the build this config asks for (no engine needed without `client`)."""
    environ = os.environ if environ is None else environ
    files = context_files(root)
    assets = collect_assets(cfg, root)
    host = gateway_address(client) if (client is not None and assets.needed) else "172.17.0.1"
    args = build_args_mod.build_args(cfg, assets, assets_url(host))
    proxies = build_args_mod.proxy_args(environ, host if assets.needed else "")
    base_id = _image_id(client, cfg.base_image)
    digest = inputs_digest(files, args, {"base_image_id": base_id})
    name = cfg.image_ref.rsplit(":", 1)[0]
    dockerfile = next((f.data.decode() for f in files if f.name == "Dockerfile"), "")
    layer_steps = sum(1 for line in dockerfile.splitlines() if line.split(" ", 1)[0] in ("RUN", "COPY", "ADD"))
    tags = [cfg.image_ref, f"{name}:{content_tag(digest)}"]
    return BuildPlan(tags, args, proxies, [f.name for f in files], digest, assets, host, base_id, layer_steps)


def _base_fix(cfg: Config) -> str:
    if cfg.base_image_source == "debootstrap":
        return "run 'invoke setup' with the same profile to make it locally"
    return f"check BASE_IMAGE={cfg.base_image} (spelling, tag, registry login) or 'docker pull' it first"


class _Reporter:
    """Live progress: a rich bar with 'step N/M' and the current output line on a terminal, plain step lines otherwise."""

    def __init__(self, show: bool) -> None:
        self.show = show
        self.live = None
        if show and console.err.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.live = Progress(TextColumn("[cyan]build[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("{task.description}"), console=console.err, transient=True)  # fmt: skip
            self.task = self.live.add_task("starting", total=None)

    def __enter__(self) -> _Reporter:
        if self.live:
            self.live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.live:
            self.live.stop()

    def __call__(self, progress: BuildProgress, line: str, new_step: bool) -> None:
        if not self.show:
            return
        if self.live:
            text = progress.instruction if new_step else line.strip()
            self.live.update(self.task, completed=progress.step - 1 if new_step else progress.step - 1,
                             total=progress.total or None, description=text[:90])  # fmt: skip
        elif new_step and progress.instruction.split(" ", 1)[0].upper() in ("FROM", "RUN", "COPY", "ADD"):
            console.info(f"step {progress.step}/{progress.total}: {progress.instruction[:100]}")


def build_image(
    cfg: Config,
    root: Path,
    show_progress: bool = True,
    environ: Mapping[str, str] | None = None,
    no_cache: bool = False,
) -> BuildResult:
    """Build the image for `cfg` from `root` and tag it REGISTRY/IMAGE:TAG and IMAGE:content-<digest>."""
    client = engine.connect()
    if cfg.base_image_source == "debootstrap" and not _image_id(client, cfg.base_image):
        raise BuildError(
            f"base image {cfg.base_image} is not in the local engine (BASE_IMAGE_SOURCE=debootstrap)",
            fix=_base_fix(cfg),
        )
    plan = plan_build(cfg, root, client, environ)
    context = context_tar(context_files(root))
    started = time.monotonic()
    with build_lock(), _Reporter(show_progress) as report:
        all_args = {**plan.build_args, **plan.proxy_args}
        if plan.assets.needed:
            with serve(plan.assets, plan.assets_host):
                progress = run_build(client, context, plan.tags[0], all_args, report, _base_fix(cfg), no_cache)
        else:
            progress = run_build(client, context, plan.tags[0], all_args, report, _base_fix(cfg), no_cache)
    try:
        for ref in plan.tags[1:]:
            repository, tag = ref.rsplit(":", 1)
            client.api.tag(progress.image_id, repository, tag)
        image = client.images.get(progress.image_id)
    except docker.errors.DockerException as exc:
        raise EngineUnavailable(f"tagging the built image failed: {exc}") from exc
    base_size = client.images.get(cfg.base_image).attrs.get("Size", 0) if _image_id(client, cfg.base_image) else 0
    return BuildResult(plan, image.id, time.monotonic() - started, progress.total, progress.cached,
                       image.attrs.get("Size", 0), base_size, dict(progress.step_seconds),
                       [progress.instructions[n] for n in progress.rebuilt_steps])  # fmt: skip
