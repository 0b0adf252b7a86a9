"""Raw Docker SDK side of registries: login, push, pull and tag lookup, with error classification and retries."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import docker
from docker.errors import APIError
from requests.exceptions import ConnectionError as RequestsConnectionError

from nsyskit import console
from nsyskit.errors import (
    AwsAccessDenied,
    EngineUnavailable,
    RegistryAuthError,
    RegistryError,
    RegistryUnreachable,
    TagImmutable,
)
from nsyskit.registry.ecr import RegistryCredentials

RETRY_ATTEMPTS = 3  # per login/push/pull: transient registry errors are retried this many times in all
RETRY_BASE_DELAY_S = 1.0  # then 2 s, 4 s, ...: exponential backoff

_IMMUTABLE = re.compile(r"cannot be overwritten because the (?:repository|tag) is immutable|tag invalid", re.I)
_IAM_ACTION = re.compile(r"not authorized to perform:? (ecr:\w+)", re.I)
_AUTH = re.compile(
    r"unauthorized|authentication required|\b401\b|no basic auth credentials|incorrect username or password|"
    r"denied|authorization token has expired|forbidden|\b403\b",
    re.I,
)
_TRANSIENT = re.compile(
    r"connection refused|connection reset|no route to host|network is unreachable|i/o timeout|timeout|"
    r"tls handshake|\bEOF\b|broken pipe|\b50[0234]\b|service unavailable|bad gateway|toomanyrequests|"
    r"too many requests|temporary failure|no such host",
    re.I,
)


class Transient(Exception):
    """A registry error worth retrying (network, 5xx, throttling); the message is the registry's own."""


@dataclass(frozen=True)
class Endpoint:
    """A registry host as Docker reaches it, and the credentials to use there (None: Docker's own config)."""

    host: str
    credentials: RegistryCredentials | None

    @property
    def auth_config(self) -> dict | None:
        """The X-Registry-Auth payload the SDK sends over the engine socket (never argv or environment)."""
        if self.credentials is None:
            return None  # the SDK then resolves ~/.docker/config.json and credential helpers itself
        return {
            "username": self.credentials.username,
            "password": self.credentials.password,
            "serveraddress": self.host,
        }


def classify(message: str, endpoint: Endpoint, operation: str) -> Exception:
    """The NsyskitError (or Transient) that a registry/engine error message stands for."""
    text = message.strip().splitlines()[0] if message.strip() else "no message"
    where = f"registry {endpoint.host}"
    if _IMMUTABLE.search(text):
        return TagImmutable(
            f"{where} refused to overwrite an existing tag ({text})", endpoint.host, operation, text,
            fix="push under a new TAG, or create the repository with ECR_TAG_IMMUTABILITY=false",
        )  # fmt: skip
    action = _IAM_ACTION.search(text)
    if action:
        return AwsAccessDenied(
            f"{where} denied {operation}: grant the IAM action {action[1]}; registry said: {text}", action[1], operation
        )
    if _AUTH.search(text):
        who = f" ({endpoint.credentials.source}, user {endpoint.credentials.username})" if endpoint.credentials else ""
        return RegistryAuthError(
            f"{where} rejected the credentials{who} for {operation}: {text}", endpoint.host, operation, text,
            fix=("check the AWS account/region of REGISTRY" if endpoint.credentials and "ECR" in endpoint.credentials.source
                 else "set NSYSKIT_REGISTRY_USERNAME/NSYSKIT_REGISTRY_PASSWORD or run 'docker login' for this host"),
        )  # fmt: skip
    if _TRANSIENT.search(text):
        return Transient(text)
    return RegistryError(f"{operation} at {where} failed: {text}", endpoint.host, operation, text)


def with_retries(attempt: Callable[[], object], endpoint: Endpoint, operation: str, sleep=time.sleep):
    """Run `attempt`, retrying Transient errors with exponential backoff; RegistryUnreachable when they persist."""
    for number in range(1, RETRY_ATTEMPTS + 1):
        try:
            return attempt()
        except Transient as exc:
            if number == RETRY_ATTEMPTS:
                raise RegistryUnreachable(
                    f"registry {endpoint.host} unreachable for {operation} after {RETRY_ATTEMPTS} attempts: {exc}",
                    endpoint.host, operation, str(exc),
                    fix="check that the registry is up and REGISTRY / REGISTRY_ENDPOINT name it",
                ) from None  # fmt: skip
            delay = RETRY_BASE_DELAY_S * 2 ** (number - 1)
            console.warn(
                f"{operation} at {endpoint.host}: {exc}; retrying in {delay:g} s ({number + 1}/{RETRY_ATTEMPTS})"
            )
            sleep(delay)
    raise AssertionError("unreachable")


def _api_error_text(exc: APIError) -> str:
    return str(exc.explanation or exc)


def _engine_call(call: Callable[[], object], endpoint: Endpoint, operation: str):
    """Run one engine call, turning engine-level failures into classified errors."""
    try:
        return call()
    except RequestsConnectionError as exc:
        raise EngineUnavailable(
            f"the Docker engine stopped answering during {operation}: {exc}; run 'invoke setup'"
        ) from exc
    except APIError as exc:
        raise classify(_api_error_text(exc), endpoint, operation) from None


def login(client: docker.DockerClient, endpoint: Endpoint) -> None:
    """Log the engine in to the endpoint through the SDK (/auth over the engine socket), with retries."""
    creds = endpoint.credentials
    assert creds is not None, "login needs credentials"

    def attempt():
        return _engine_call(
            lambda: client.login(creds.username, creds.password, registry=endpoint.host, reauth=True), endpoint, "login"
        )

    with_retries(attempt, endpoint, "login")


def _stream(events, endpoint: Endpoint, operation: str, on_event: Callable[[dict], None]) -> dict:
    """Consume an engine JSON stream: feed progress, raise on an error event, return the last 'aux' payload."""
    aux: dict = {}
    for event in events:
        if "error" in event or "errorDetail" in event:
            message = (event.get("errorDetail") or {}).get("message") or event.get("error") or ""
            raise classify(str(message), endpoint, operation)
        if "aux" in event:
            aux.update(event["aux"] or {})
        on_event(event)
    return aux


def push(
    client: docker.DockerClient, endpoint: Endpoint, repository: str, tag: str, on_event: Callable[[dict], None]
) -> str:
    """Push repository:tag (retrying transient failures); returns the manifest digest the registry reported."""

    def attempt() -> str:
        def run():
            events = client.api.push(repository, tag=tag, stream=True, decode=True, auth_config=endpoint.auth_config)
            return _stream(events, endpoint, "push", on_event)

        aux = _engine_call(run, endpoint, "push")
        digest = aux.get("Digest", "")
        if not digest:
            raise RegistryError(f"push of {repository}:{tag} ended without a digest", endpoint.host, "push")
        return digest

    return with_retries(attempt, endpoint, "push")


def pull(client: docker.DockerClient, endpoint: Endpoint, reference: str, on_event: Callable[[dict], None]) -> None:
    """Pull `reference` (repo:tag or repo@digest), retrying transient failures."""
    repository, _, version = reference.partition("@") if "@" in reference else reference.rpartition(":")

    def attempt():
        def run():
            events = client.api.pull(
                repository, tag=version, stream=True, decode=True, auth_config=endpoint.auth_config
            )
            return _stream(events, endpoint, "pull", on_event)

        return _engine_call(run, endpoint, "pull")

    with_retries(attempt, endpoint, "pull")


def remote_digest(client: docker.DockerClient, endpoint: Endpoint, reference: str) -> str | None:
    """The manifest digest the registry holds for repo:tag (the engine asks it), None when the tag is absent."""

    def attempt():
        try:
            return _engine_call(
                lambda: client.api.inspect_distribution(reference, auth_config=endpoint.auth_config), endpoint, "push"
            )
        except RegistryError as exc:
            if exc.detail and re.search(r"manifest unknown|not found|name unknown", exc.detail, re.I):
                return None
            raise

    found = with_retries(attempt, endpoint, "push")
    return found["Descriptor"]["digest"] if found else None
