"""Unit tests of the registry layer that need no engine: error classification, retries, credentials, expiry, progress."""

from __future__ import annotations

import base64
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from botocore.exceptions import ClientError, NoCredentialsError
from rich.console import Console

from nsyskit.config import load_config
from nsyskit.errors import (
    AwsAccessDenied,
    AwsCredentialsMissing,
    AwsError,
    ConfigError,
    RegistryAuthError,
    RegistryError,
    RegistryUnreachable,
    TagImmutable,
)
from nsyskit.registry import api, ecr, transfer
from nsyskit.registry.ecr import RegistryCredentials
from nsyskit.registry.progress import LayerProgress
from nsyskit.registry.transfer import Endpoint, Transient

ROOT = Path(__file__).resolve().parents[2]
ECR_HOST = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
SECRET = "s3cr3t-password-value"
ENDPOINT = Endpoint("127.0.0.1:5000", RegistryCredentials("AWS", SECRET, source="ECR token of account 123456789012"))


def cfg(**env: str):
    """The project's config with these environment values on top (no real environment read)."""
    return load_config(ROOT, environ={f"NSYSKIT_{key}": value for key, value in env.items()})


# --- error classification: the engine's and the registries' real message texts ---
@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("login attempt to http://127.0.0.1:5000/v2/ failed with status: 401 Unauthorized", RegistryAuthError),
        ("unauthorized: authentication required", RegistryAuthError),
        ("denied: Your authorization token has expired. Reauthenticate and try again.", RegistryAuthError),
        ("no basic auth credentials", RegistryAuthError),
        ('Get "http://127.0.0.1:5000/v2/": dial tcp 127.0.0.1:5000: connect: connection refused', Transient),
        ("received unexpected HTTP status: 503 Service Unavailable", Transient),
        ("net/http: TLS handshake timeout", Transient),
        ("toomanyrequests: Rate exceeded", Transient),
        (
            "tag invalid: The image tag 'latest' already exists in the 'nsyskit' repository and cannot be "
            "overwritten because the repository is immutable.",
            TagImmutable,
        ),
        (
            "denied: User: arn:aws:iam::123456789012:user/ci is not authorized to perform: ecr:InitiateLayerUpload "
            "on resource: arn:aws:ecr:us-west-2:123456789012:repository/nsyskit",
            AwsAccessDenied,
        ),
        ("manifest unknown: manifest unknown", RegistryError),
        ("blob upload unknown sha256:ab401cd5035e", RegistryError),  # digits inside a digest are not a status
    ],
)
def test_classify_maps_registry_messages(message, kind):
    error = transfer.classify(message, ENDPOINT, "push")
    assert type(error) is kind
    if isinstance(error, AwsAccessDenied):
        assert error.action == "ecr:InitiateLayerUpload"
        assert "ecr:InitiateLayerUpload" in error.one_line()


def test_auth_error_names_registry_source_and_user_but_not_the_password():
    error = transfer.classify("unauthorized: authentication required", ENDPOINT, "login")
    line = error.one_line()
    assert "127.0.0.1:5000" in line and "ECR token" in line and "user AWS" in line
    assert SECRET not in line and SECRET not in repr(ENDPOINT) and SECRET not in repr(ENDPOINT.credentials)


def test_retries_back_off_then_succeed():
    calls, sleeps = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise Transient("connection reset by peer")
        return "sha256:abc"

    assert transfer.with_retries(flaky, ENDPOINT, "push", sleep=sleeps.append) == "sha256:abc"
    assert sleeps == [1.0, 2.0]  # exponential backoff


def test_retries_give_up_with_registry_unreachable():
    sleeps = []

    def down():
        raise Transient("dial tcp 127.0.0.1:5000: connect: connection refused")

    with pytest.raises(RegistryUnreachable) as caught:
        transfer.with_retries(down, ENDPOINT, "push", sleep=sleeps.append)
    assert len(sleeps) == transfer.RETRY_ATTEMPTS - 1
    assert "unreachable" in caught.value.one_line() and "connection refused" in caught.value.one_line()


def test_permanent_errors_are_not_retried():
    sleeps = []

    def rejected():
        raise transfer.classify("unauthorized: authentication required", ENDPOINT, "push")

    with pytest.raises(RegistryAuthError):
        transfer.with_retries(rejected, ENDPOINT, "push", sleep=sleeps.append)
    assert sleeps == []


# --- AWS error translation ---
def _client_error(code: str, message: str, operation: str, status: int = 400) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}, operation
    )


class _FakeMeta:
    endpoint_url = "https://api.ecr.us-west-2.amazonaws.com"


class _EcrStandIn:
    """Only what translated() reads from a client: where it sends calls."""

    meta = _FakeMeta()


def test_no_credentials_says_how_to_provide_them():
    with pytest.raises(AwsCredentialsMissing) as caught, ecr.translated("GetAuthorizationToken", _EcrStandIn()):
        raise NoCredentialsError()
    line = caught.value.one_line()
    assert "no AWS credentials" in line and "AWS_PROFILE" in line and "AWS_ACCESS_KEY_ID" in line


@pytest.mark.parametrize(
    ("error", "action"),
    [
        (
            _client_error(
                "AccessDeniedException",
                "User: arn:aws:iam::1:user/x is not authorized to perform: ecr:CreateRepository on resource: *",
                "CreateRepository",
            ),
            "ecr:CreateRepository",
        ),  # fmt: skip
        (
            _client_error(
                "403",
                '<?xml version="1.0"?><ErrorResponse><Errors><Error><Code>AccessDenied</Code><Message>'
                "User: u is not authorized to perform: ecr:DescribeRepositories</Message></Error></Errors>"
                "</ErrorResponse>",
                "DescribeRepositories",
                status=403,
            ),
            "ecr:DescribeRepositories",
        ),  # fmt: skip
        (_client_error("AccessDeniedException", "no message", "GetAuthorizationToken"), "ecr:GetAuthorizationToken"),
    ],
)
def test_access_denied_names_the_iam_action(error, action):
    with pytest.raises(AwsAccessDenied) as caught, ecr.translated(error.operation_name, _EcrStandIn()):
        raise error
    assert caught.value.action == action
    line = caught.value.one_line()
    assert f"grant the IAM action {action}" in line and "<?xml" not in line


def test_rejected_credentials_and_other_errors():
    with pytest.raises(AwsCredentialsMissing), ecr.translated("GetAuthorizationToken", _EcrStandIn()):
        raise _client_error(
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
            "GetAuthorizationToken",
        )
    with pytest.raises(AwsError) as caught, ecr.translated("CreateRepository", _EcrStandIn()):
        raise _client_error("LimitExceededException", "too many repositories", "CreateRepository")
    assert "ecr:CreateRepository failed (LimitExceededException)" in caught.value.one_line()


# --- target and credentials ---
def test_target_needs_a_registry():
    with pytest.raises(ConfigError) as caught:
        api.target_of(cfg())
    assert "REGISTRY" in caught.value.one_line() and "fix:" in caught.value.one_line()


def test_target_uses_the_endpoint_override_for_docker_only():
    target = api.target_of(cfg(REGISTRY=ECR_HOST, REGISTRY_ENDPOINT="127.0.0.1:5000", IMAGE="kit", TAG="v1"))
    assert target.ecr == {"account": "123456789012", "region": "us-west-2"}
    assert target.reference == "127.0.0.1:5000/kit:v1"
    plain = api.target_of(cfg(REGISTRY=ECR_HOST, IMAGE="kit", TAG="v1"))
    assert plain.reference == f"{ECR_HOST}/kit:v1"


def test_other_registry_credentials_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    target = api.target_of(cfg(REGISTRY="registry.example.com:5000"))
    monkeypatch.delenv(api.USERNAME_ENV, raising=False)
    monkeypatch.delenv(api.PASSWORD_ENV, raising=False)
    assert api.credentials(target) is None  # anonymous: nothing configured anywhere
    monkeypatch.setenv(api.USERNAME_ENV, "ci")
    with pytest.raises(RegistryAuthError) as caught:
        api.credentials(target)
    assert api.PASSWORD_ENV in caught.value.one_line()
    monkeypatch.setenv(api.PASSWORD_ENV, SECRET)
    creds = api.credentials(target)
    assert (creds.username, creds.password) == ("ci", SECRET)


def test_other_registry_credentials_from_docker_config(monkeypatch, tmp_path):
    monkeypatch.delenv(api.USERNAME_ENV, raising=False)
    monkeypatch.delenv(api.PASSWORD_ENV, raising=False)
    auth = base64.b64encode(f"robot:{SECRET}".encode()).decode()
    (tmp_path / "config.json").write_text(json.dumps({"auths": {"registry.example.com:5000": {"auth": auth}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    creds = api.credentials(api.target_of(cfg(REGISTRY="registry.example.com:5000")))
    assert (creds.username, creds.password, creds.source) == ("robot", SECRET, "Docker config")


# --- token expiry: moto reports 2015, real ECR 12 h ahead ---
def test_expiry_in_the_past_is_reported_not_trusted():
    stale = RegistryCredentials("AWS", SECRET, expires_at=datetime(2015, 1, 1, tzinfo=UTC))
    note = api.expiry_note(stale)
    assert "2015-01-01" in note and "ignored" in note


def test_expiry_in_the_future_shows_time_left():
    now = datetime(2025, 1, 1, 8, 0, tzinfo=UTC)
    fresh = RegistryCredentials("AWS", SECRET, expires_at=now + timedelta(hours=12))
    assert api.expiry_note(fresh, now=now) == "valid until 2025-01-01 20:00 UTC (12 h 0 min left)"
    naive = RegistryCredentials("AWS", SECRET, expires_at=(now + timedelta(minutes=5)).replace(tzinfo=None))
    assert "0 h 5 min left" in api.expiry_note(naive, now=now)


# --- progress: the engine's push and pull event shapes ---
def test_layer_progress_counts_outcomes():
    output = io.StringIO()
    console = Console(file=output, force_terminal=False, width=200)
    events = [
        {"status": "The push refers to repository [127.0.0.1:5000/kit]"},
        {"status": "Preparing", "progressDetail": {}, "id": "aaa"},
        {"status": "Preparing", "progressDetail": {}, "id": "bbb"},
        {"status": "Pushing", "progressDetail": {"current": 512, "total": 2048}, "id": "aaa"},
        {"status": "Pushed", "progressDetail": {}, "id": "aaa"},
        {"status": "Layer already exists", "progressDetail": {}, "id": "bbb"},
        {"status": "latest: digest: sha256:1234 size: 736"},
        {"progressDetail": {}, "aux": {"Tag": "latest", "Digest": "sha256:1234", "Size": 736}},
    ]
    with LayerProgress(console) as progress:
        for event in events:
            progress.update(event)
    assert progress.moved_layers == 1
    assert progress.summary() == "1 pushed, 1 already in the registry"
    assert progress.sizes == {"aaa": 2048}
    assert output.getvalue().splitlines() == ["  layer aaa pushed (2.0 kB)", "  layer bbb already in the registry"]
