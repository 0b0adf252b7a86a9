"""The friendly registry layer: log in to, push the kit image to and pull it from the registry the config names."""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import docker
import docker.auth
import docker.utils.config
from docker.errors import ImageNotFound

from nsyskit import console, engine
from nsyskit.config import Config
from nsyskit.errors import ConfigError, ImageNotBuilt, RegistryAuthError, TagImmutable, UsageError
from nsyskit.registry import ecr, transfer
from nsyskit.registry.ecr import RegistryCredentials
from nsyskit.registry.progress import LayerProgress
from nsyskit.registry.transfer import Endpoint

USERNAME_ENV = "NSYSKIT_REGISTRY_USERNAME"
PASSWORD_ENV = "NSYSKIT_REGISTRY_PASSWORD"


@dataclass(frozen=True)
class Target:
    """Where the image goes: REGISTRY (names the ECR account/region) and the host Docker transfers to."""

    registry: str
    host: str
    image: str
    tag: str
    ecr: dict[str, str] | None

    @property
    def repository(self) -> str:
        """HOST/IMAGE as Docker pushes it."""
        return f"{self.host}/{self.image}"

    @property
    def reference(self) -> str:
        """HOST/IMAGE:TAG."""
        return f"{self.repository}:{self.tag}"


@dataclass(frozen=True)
class LoginResult:
    """Who logged in where, with what, and until when the credentials hold."""

    host: str
    username: str
    source: str
    expiry: str


@dataclass(frozen=True)
class PushResult:
    """What a push did: the reference, the manifest digest, whether anything moved, and how long it took."""

    reference: str
    digest: str
    image_id: str
    noop: bool
    layers: str
    seconds: float
    repository_created: bool


@dataclass(frozen=True)
class PullResult:
    """What a pull got: the reference pulled, its digest and the local image ID (also tagged as the config's IMAGE_REF)."""

    reference: str
    digest: str
    image_id: str
    local_tag: str
    seconds: float


def target_of(cfg: Config) -> Target:
    """The push/pull target of the config, or a ConfigError when REGISTRY is empty."""
    if not cfg.registry:
        raise ConfigError(
            "REGISTRY", "", "is empty, so there is no registry to log in to, push to or pull from",
            "set REGISTRY=ACCOUNT.dkr.ecr.REGION.amazonaws.com (or host[:port] of another registry) in .env or the environment",
            cfg.sources.get("REGISTRY", ""),
        )  # fmt: skip
    return Target(cfg.registry, cfg.registry_endpoint or cfg.registry, cfg.image, cfg.tag, cfg.ecr)


def _ecr_client(target: Target):
    assert target.ecr is not None
    return ecr.client(target.ecr["region"])


def credentials(target: Target, ecr_client=None) -> RegistryCredentials | None:
    """Credentials for the target: an ECR token, the NSYSKIT_REGISTRY_* variables, the Docker config, or None (anonymous)."""
    if target.ecr:
        return ecr.authorization(ecr_client or _ecr_client(target), target.ecr["account"])
    username, password = os.environ.get(USERNAME_ENV, ""), os.environ.get(PASSWORD_ENV, "")
    if username and password:
        return RegistryCredentials(username, password, source=f"{USERNAME_ENV}/{PASSWORD_ENV}")
    if username or password:
        missing = PASSWORD_ENV if username else USERNAME_ENV
        raise RegistryAuthError(
            f"{missing} is not set while its partner is: set both, or neither to use the Docker config",
            target.host,
            "login",
        )
    _check_docker_config(target.host)
    found = docker.auth.load_config().resolve_authconfig(target.host) or {}
    # 'auths' entries come back as username/password, credential helpers as Username/Secret-derived Password.
    username, password = found.get("username") or found.get("Username"), found.get("password") or found.get("Password")
    if username and password:
        return RegistryCredentials(username, password, source="Docker config")
    return None


def _check_docker_config(host: str) -> None:
    """A Docker config file that is not JSON is an error (docker-py would silently read it as having no logins)."""
    path = docker.utils.config.find_config_file()
    if not path:
        return
    try:
        with open(path, encoding="utf-8") as handle:
            json.load(handle)
    except (OSError, ValueError) as exc:
        raise RegistryAuthError(
            f"the Docker config {path} cannot be read as JSON ({exc})", host, "login",
            fix=f"repair it, or move it away and run 'docker login {host}'",
        ) from None  # fmt: skip


def expiry_note(creds: RegistryCredentials, now: datetime | None = None) -> str:
    """How long the credentials hold; an expiry already past (test endpoints, clock skew) is reported, not trusted."""
    if creds.expires_at is None:
        return "no expiry"
    now = now or datetime.now(UTC)
    expires = creds.expires_at if creds.expires_at.tzinfo else creds.expires_at.replace(tzinfo=UTC)
    left = expires - now
    if left.total_seconds() > 0:
        hours, minutes = divmod(int(left.total_seconds()) // 60, 60)
        return f"valid until {expires:%Y-%m-%d %H:%M} UTC ({hours} h {minutes} min left)"
    # The kit asks for a new token on every command and never stores one, so a stale expiry cannot bite.
    return f"reported expiry {expires:%Y-%m-%d} is past; ignored, every command gets a fresh token"


def _endpoint(target: Target, client: docker.DockerClient, ecr_client=None) -> Endpoint:
    """Resolve credentials and, when there are any, log the engine in (checks them before any upload)."""
    endpoint = Endpoint(target.host, credentials(target, ecr_client))
    if endpoint.credentials is not None:
        transfer.login(client, endpoint)
    return endpoint


def _describe_target(target: Target) -> str:
    via = f" via {target.host} (REGISTRY_ENDPOINT)" if target.host != target.registry else ""
    return f"{target.registry}{via}"


def login(cfg: Config) -> LoginResult:
    """Check that the registry accepts our credentials by logging the engine in (nothing is written to disk)."""
    target = target_of(cfg)
    client = engine.connect()
    ecr_client = _ecr_client(target) if target.ecr else None
    # A non-default ECR API endpoint is named in the result line (and in any error), not on a line of its own.
    via = ""
    if ecr_client is not None and ecr.endpoint_of(ecr_client) != f"https://api.ecr.{target.ecr['region']}.amazonaws.com":
        via = f" from the ECR API at {ecr.endpoint_of(ecr_client)}"
    endpoint = Endpoint(target.host, credentials(target, ecr_client))
    if endpoint.credentials is None:
        raise RegistryAuthError(
            f"no credentials for registry {target.host}: set {USERNAME_ENV} and {PASSWORD_ENV}, or run 'docker login {target.host}' once",
            target.host, "login",
        )  # fmt: skip
    transfer.login(client, endpoint)
    creds = endpoint.credentials
    return LoginResult(target.host, creds.username, creds.source + via, expiry_note(creds))


def local_image(client: docker.DockerClient, cfg: Config):
    """The image to push: IMAGE_REF (REGISTRY/IMAGE:TAG), else IMAGE:TAG as a local build names it; ImageNotBuilt if neither."""
    candidates = list(dict.fromkeys([cfg.image_ref, f"{cfg.image}:{cfg.tag}"]))
    found = {}
    for ref in candidates:
        try:
            found[ref] = client.images.get(ref)
        except ImageNotFound:
            continue
    if found:
        # Both names can exist (a build without REGISTRY after an older pull): the newer one is what was just built.
        ref, image = max(found.items(), key=lambda item: item[1].attrs.get("Created", ""))
        if len({i.id for i in found.values()}) > 1:
            console.warn(f"{' and '.join(found)} are different images; pushing the newer one, {ref}")
        return image
    raise ImageNotBuilt(
        f"image {' or '.join(candidates)} is not in the local Docker engine",
        candidates,
        fix="build it first ('invoke build', or 'invoke build push')",
    )


def _digests_in(image, repository: str) -> set[str]:
    """Manifest digests the engine recorded for `image` in `repository` (from earlier pushes or pulls)."""
    return {
        entry.split("@", 1)[1] for entry in image.attrs.get("RepoDigests") or [] if entry.split("@", 1)[0] == repository
    }


def push(cfg: Config, show_progress: bool = True) -> PushResult:
    """Create the ECR repository when missing, log in, push IMAGE:TAG with live per-layer progress, return the digest."""
    started = time.monotonic()
    target = target_of(cfg)
    client = engine.connect()
    image = local_image(client, cfg)
    repository = None
    ecr_client = None
    if target.ecr:
        ecr_client = _ecr_client(target)
        repository = ecr.ensure_repository(
            ecr_client, target.ecr["account"], target.image, cfg.ecr_scan_on_push, cfg.ecr_tag_immutability
        )
        _report_repository(repository, cfg)
    endpoint = _endpoint(target, client, ecr_client)
    if target.reference not in image.tags:
        image.tag(target.repository, target.tag)
    console.info(f"pushing {target.image}:{target.tag} ({image.short_id}) to {_describe_target(target)}")

    remote = transfer.remote_digest(client, endpoint, target.reference)
    if remote and remote in _digests_in(image, target.repository):
        return PushResult(target.reference, remote, image.id, True, "nothing to send: the registry already has this image",
                          time.monotonic() - started, bool(repository and repository.created))  # fmt: skip
    if remote and repository is not None and repository.immutable:
        same = ecr.image_config_digest(ecr_client, target.ecr["account"], target.image, target.tag) == image.id
        if same:
            return PushResult(target.reference, remote, image.id, True, "nothing to send: the registry already has this image",
                              time.monotonic() - started, False)  # fmt: skip
        raise TagImmutable(
            f"tag {target.tag} already names another image ({remote}) in ECR repository {target.image}, whose tags are "
            "immutable", target.host, "push", remote,
            fix="push under a new TAG (e.g. --tag $(git rev-parse --short HEAD))",
        )  # fmt: skip
    with LayerProgress(console.err, enabled=show_progress) as progress:
        digest = transfer.push(client, endpoint, target.repository, target.tag, progress.update)
    noop = progress.moved_layers == 0 and remote == digest
    return PushResult(target.reference, digest, image.id, noop, progress.summary(), time.monotonic() - started,
                      bool(repository and repository.created))  # fmt: skip


def _report_repository(repository: ecr.Repository, cfg: Config) -> None:
    settings = f"scan on push: {'on' if repository.scan_on_push else 'off'}, tags: {'immutable' if repository.immutable else 'mutable'}"
    if repository.created:
        console.done(f"created ECR repository {repository.name} ({settings})")
        return
    if (repository.scan_on_push, repository.immutable) != (cfg.ecr_scan_on_push, cfg.ecr_tag_immutability):
        console.warn(
            f"ECR repository {repository.name} exists with {settings}; ECR_SCAN_ON_PUSH / ECR_TAG_IMMUTABILITY only apply "
            "when the kit creates it (left as it is)"
        )


def pull(cfg: Config, digest: str | None = None, show_progress: bool = True) -> PullResult:
    """Pull IMAGE:TAG (or IMAGE@DIGEST) from the registry and tag it locally as IMAGE_REF for the run tasks."""
    started = time.monotonic()
    if digest is not None and not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise UsageError(f"--digest {digest!r} is not a manifest digest", fix="give sha256: and 64 hex digits, as 'invoke push' prints")
    target = target_of(cfg)
    client = engine.connect()
    endpoint = _endpoint(target, client)
    reference = f"{target.repository}@{digest}" if digest else target.reference
    console.info(f"pulling {reference.rsplit('/', 1)[-1]} from {_describe_target(target)}")
    with LayerProgress(console.err, enabled=show_progress) as progress:
        transfer.pull(client, endpoint, reference, progress.update)
    image = client.images.get(reference)
    pulled_digest = digest or next(iter(sorted(_digests_in(image, target.repository))), "")
    if cfg.image_ref not in image.tags:
        image.tag(*cfg.image_ref.rsplit(":", 1))
    return PullResult(reference, pulled_digest, image.id, cfg.image_ref, time.monotonic() - started)
