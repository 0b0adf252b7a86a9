"""Raw Amazon ECR calls through boto3 (repository, authorization token, tag lookup); botocore errors become NsyskitErrors."""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlsplit

import boto3
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
)

from nsyskit.errors import AwsAccessDenied, AwsCredentialsMissing, AwsEndpointUnreachable, AwsError, ConfigError

HOW_TO_GIVE_CREDENTIALS = (
    "set AWS_PROFILE (after 'aws configure' or 'aws sso login'), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
    "or run where an IAM role is attached (EC2 instance profile, EKS pod identity)"
)
_DENIED_CODES = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException"}
_REJECTED_CREDENTIAL_CODES = {
    "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException", "ExpiredToken",
    "InvalidClientTokenId", "SignatureDoesNotMatch", "AuthFailure", "InvalidAccessKeyId",
}  # fmt: skip
_PERFORM = re.compile(r"not authorized to perform:? ([a-z0-9-]+:[A-Za-z0-9]+)")
_MANIFEST_TYPES = [
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
]


@dataclass(frozen=True)
class RegistryCredentials:
    """A user name and password for a registry, where they came from and (for tokens) when they expire."""

    username: str
    password: str = field(repr=False)  # never in repr, so never in a log line or a traceback of this object
    source: str = ""
    expires_at: datetime | None = None


@dataclass(frozen=True)
class Repository:
    """An ECR repository as the API describes it, and whether this call created it."""

    name: str
    uri: str
    scan_on_push: bool
    immutable: bool
    created: bool


ENDPOINT_VARS = ("AWS_ENDPOINT_URL_ECR", "AWS_ENDPOINT_URL")  # boto3's own variables, the service's first


def _endpoint_problem(environ) -> ConfigError | None:
    """The error for an endpoint variable that is not an http(s) URL with a host (botocore would raise ValueError)."""
    for name in ENDPOINT_VARS:
        value = environ.get(name)
        if not value:
            continue
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:
            ok = False
        if not ok:
            return ConfigError(name, value, "is not an endpoint URL", "use http(s)://HOST[:PORT], or unset it", "environment")
        return None  # the first one set is the one boto3 uses
    return None


def client(region: str, environ=None):
    """A boto3 ECR client for `region`; the endpoint follows boto3's AWS_ENDPOINT_URL_ECR / AWS_ENDPOINT_URL."""
    environ = os.environ if environ is None else environ
    if problem := _endpoint_problem(environ):
        raise problem
    try:
        return boto3.session.Session(region_name=region).client("ecr")
    except ProfileNotFound:
        name = environ.get("AWS_PROFILE") or environ.get("AWS_DEFAULT_PROFILE", "")
        raise ConfigError(
            "AWS_PROFILE", name, "is not a profile in the AWS config files (~/.aws/config, ~/.aws/credentials)",
            f"create it with 'aws configure --profile {name}' (or 'aws configure sso'), or set AWS_PROFILE to an existing one",
            "environment",
        ) from None  # fmt: skip
    except ValueError as exc:  # an endpoint from the AWS config file that botocore cannot parse
        raise AwsError(f"cannot make an ECR client: {exc}", fix="check endpoint_url in your AWS config file") from None
    except (NoRegionError, BotoCoreError) as exc:
        raise AwsError(f"cannot make an ECR client for region {region!r}: {exc}",
                       fix="check AWS_REGION and the AWS configuration") from exc  # fmt: skip


def endpoint_of(ecr) -> str:
    """The URL the client sends ECR API calls to."""
    return ecr.meta.endpoint_url


@contextmanager
def translated(operation: str, ecr) -> Iterator[None]:
    """Turn botocore's exceptions raised by ECR `operation` into one-line NsyskitErrors that say the fix."""
    action = f"ecr:{operation}"
    try:
        yield
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise AwsCredentialsMissing(
            f"no AWS credentials found for {action}: {HOW_TO_GIVE_CREDENTIALS}", operation, "NoCredentials"
        ) from exc
    except (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError) as exc:
        raise AwsEndpointUnreachable(
            f"cannot reach the ECR API at {endpoint_of(ecr)} for {action}: {exc}", operation,
            fix="check the network or proxy, AWS_REGION, or AWS_ENDPOINT_URL_ECR / AWS_ENDPOINT_URL",
        ) from exc
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "?"), _plain(error.get("Message", str(exc)))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in _DENIED_CODES or (status == 403 and code not in _REJECTED_CREDENTIAL_CODES):
            named = _PERFORM.search(message)
            action = named[1] if named else action  # AWS names the exact action it checked
            raise AwsAccessDenied(
                f"AWS denied {action}: grant the IAM action {action} to these credentials; AWS said: {message}",
                action, operation, code,
            ) from exc  # fmt: skip
        if code in _REJECTED_CREDENTIAL_CODES:
            raise AwsCredentialsMissing(
                f"AWS rejected the credentials for {action} ({code}: {message})", operation, code,
                fix="refresh them, " + HOW_TO_GIVE_CREDENTIALS,
            ) from exc  # fmt: skip
        if not message or code.isdigit():  # an HTTP error without an AWS error body: not the ECR API answering
            raise AwsError(
                f"{action} failed: {endpoint_of(ecr)} answered HTTP {status or code} without an AWS error, "
                "so it is not the ECR API", operation, code,
                fix="check AWS_ENDPOINT_URL_ECR / AWS_ENDPOINT_URL and AWS_REGION",
            ) from exc  # fmt: skip
        raise AwsError(f"{action} failed ({code}): {message}", operation, code) from exc
    except ParamValidationError as exc:
        raise AwsError(f"{action} rejected the request: {' '.join(str(exc).split())}", operation) from exc
    except BotoCoreError as exc:
        if re.search(r"credential|token|sso", type(exc).__name__, re.I):  # e.g. an expired SSO token
            raise AwsCredentialsMissing(f"AWS credentials unusable for {action}: {exc}", operation) from exc
        raise AwsError(f"{action} failed: {exc}", operation) from exc


def _plain(message: str) -> str:
    """The human part of an AWS error message (some endpoints answer JSON services with an XML body)."""
    inner = re.search(r"<Message>(.*?)</Message>", message, re.S)
    return " ".join((inner[1] if inner else message).split())


def ensure_repository(ecr, account: str, name: str, scan_on_push: bool, immutable: bool) -> Repository:
    """Describe repository `name`, creating it with the given scan/immutability settings when it is missing."""
    try:
        with translated("DescribeRepositories", ecr):
            found = ecr.describe_repositories(registryId=account, repositoryNames=[name])["repositories"][0]
        return _repository(found, created=False)
    except AwsError as exc:
        if exc.code != "RepositoryNotFoundException":
            raise
    with translated("CreateRepository", ecr):
        made = ecr.create_repository(
            registryId=account,
            repositoryName=name,
            imageScanningConfiguration={"scanOnPush": scan_on_push},
            imageTagMutability="IMMUTABLE" if immutable else "MUTABLE",
        )["repository"]
    return _repository(made, created=True)


def _repository(described: dict, created: bool) -> Repository:
    return Repository(
        name=described["repositoryName"],
        uri=described.get("repositoryUri", ""),
        scan_on_push=bool(described.get("imageScanningConfiguration", {}).get("scanOnPush", False)),
        immutable=described.get("imageTagMutability", "MUTABLE").startswith("IMMUTABLE"),
        created=created,
    )


def authorization(ecr, account: str) -> RegistryCredentials:
    """A Docker user name and password for the account's registry, decoded from GetAuthorizationToken."""
    with translated("GetAuthorizationToken", ecr):
        data = ecr.get_authorization_token(registryIds=[account])["authorizationData"][0]
    try:
        username, password = base64.b64decode(data["authorizationToken"]).decode().split(":", 1)
    except (ValueError, KeyError) as exc:
        raise AwsError("ecr:GetAuthorizationToken returned a token that is not base64 'user:password'",
                       "GetAuthorizationToken") from exc  # fmt: skip
    return RegistryCredentials(
        username, password, source=f"ECR token of account {account}", expires_at=data.get("expiresAt")
    )


def image_config_digest(ecr, account: str, name: str, tag: str) -> str | None:
    """The config digest (= Docker image ID) of the manifest ECR holds for `tag`, or None when unknown."""
    with translated("BatchGetImage", ecr):
        images = ecr.batch_get_image(
            registryId=account, repositoryName=name, imageIds=[{"imageTag": tag}], acceptedMediaTypes=_MANIFEST_TYPES
        ).get("images", [])
    if not images:
        return None
    try:
        return json.loads(images[0]["imageManifest"])["config"]["digest"]
    except (KeyError, ValueError, TypeError):
        return None  # a manifest list or an unexpected shape: cannot compare
