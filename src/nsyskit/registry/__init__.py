"""Registries for the kit image: a friendly layer (login, push, pull) over raw boto3 ECR calls and the Docker SDK.

ECR registries (REGISTRY=ACCOUNT.dkr.ecr.REGION.amazonaws.com) get a fresh authorization token from the ECR API
for every command; other registries take NSYSKIT_REGISTRY_USERNAME / NSYSKIT_REGISTRY_PASSWORD from the
environment, else whatever the Docker config (~/.docker/config.json, credential helpers) holds for the host.
"""

from nsyskit.registry.api import (
    PASSWORD_ENV,
    USERNAME_ENV,
    LoginResult,
    PullResult,
    PushResult,
    Target,
    login,
    pull,
    push,
    target_of,
)

__all__ = [
    "PASSWORD_ENV", "USERNAME_ENV", "LoginResult", "PullResult", "PushResult", "Target",
    "login", "pull", "push", "target_of",
]  # fmt: skip
