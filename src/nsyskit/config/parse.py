"""Value parsers for .env settings: each turns a raw string into a typed value or raises ValueError(fix)."""

from __future__ import annotations

import re

# Each parser raises Problem(problem, fix); the loader adds key, value and source.


class Problem(ValueError):
    """What is wrong with one value and how to fix it (the loader adds the key and the source)."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.problem, self.fix = problem, fix


_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def boolean(raw: str) -> bool:
    """true/false/1/0/yes/no in any case."""
    word = raw.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise Problem("is not a boolean", "use true or false (also accepted: 1/0, yes/no)")


def positive_int(raw: str) -> int:
    """A whole number >= 1."""
    text = raw.strip()
    if not re.fullmatch(r"\+?\d+", text) or int(text) < 1:
        raise Problem("is not a positive integer", "use a whole number of 1 or more, e.g. 2")
    return int(text)


def non_negative_int(raw: str) -> int:
    """A whole number >= 0 (0 usually means 'off')."""
    text = raw.strip()
    if not re.fullmatch(r"\+?\d+", text):
        raise Problem("is not a whole number", "use a whole number of 0 or more (0 turns it off)")
    return int(text)


def text(raw: str) -> str:
    """Any string, surrounding blanks removed."""
    return raw.strip()


_VERSION = re.compile(r"v?\d+(\.\d+){1,3}([-+._][0-9A-Za-z]+)*")


def version(raw: str) -> str:
    """A dotted release version such as 2024.6.1, 4.1.7, v2.13.11 or 2.23.4-1."""
    value = raw.strip()
    if not _VERSION.fullmatch(value):
        raise Problem("is not a version", "use a dotted release number such as 2024.6.1 or v2.13.11")
    return value


def sha256(raw: str) -> str:
    """Empty, or 64 hexadecimal digits (lower-cased)."""
    value = raw.strip().lower()
    if value and not re.fullmatch(r"[0-9a-f]{64}", value):
        raise Problem(
            "is not a sha256 digest",
            "use the 64 hex digits printed by 'sha256sum FILE', or leave it empty for the pinned default",
        )
    return value


_HOST_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
_REGISTRY = re.compile(rf"(localhost|{_HOST_LABEL}(\.{_HOST_LABEL})*|\[[0-9a-fA-F:]+\])(:\d{{1,5}})?")
ECR_HOST = re.compile(
    r"(?P<account>\d{12})\.dkr\.ecr(-fips)?\.(?P<region>[a-z]{2}(-gov)?-[a-z]+-\d)\.amazonaws\.com(\.cn)?"
)


def registry_host(raw: str) -> str:
    """Empty (local images only) or a registry host[:port], with no scheme and no path."""
    value = raw.strip()
    if value and not _REGISTRY.fullmatch(value):
        raise Problem(
            "is not a registry host",
            "use a host name with an optional port and no scheme or path, "
            "e.g. 123456789012.dkr.ecr.us-west-2.amazonaws.com or 127.0.0.1:5000",
        )
    return value


_AWS_REGION = re.compile(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d")


def aws_region(raw: str) -> str:
    """An AWS region name such as us-west-2."""
    value = raw.strip()
    if not _AWS_REGION.fullmatch(value):
        raise Problem("is not an AWS region", "use a region name such as us-west-2 or eu-central-1")
    return value


def image_name(raw: str) -> str:
    """A repository name as Docker accepts it (lower case, slashes allowed)."""
    value = raw.strip()
    if not re.fullmatch(r"[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*", value):
        raise Problem("is not a valid image name", "use lower-case letters, digits, '.', '_', '-' and '/', e.g. nsyskit")
    return value


def image_tag(raw: str) -> str:
    """A Docker tag: up to 128 of letters, digits, '_', '.', '-', not starting with '.' or '-'."""
    value = raw.strip()
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", value):
        raise Problem("is not a valid image tag", "use letters, digits, '_', '.' and '-', e.g. latest or 2024-11")
    return value


def image_reference(raw: str) -> str:
    """A full image reference [registry/]name[:tag|@digest]."""
    value = raw.strip()
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:/\[\]-]*(@sha256:[0-9a-f]{64})?", value) or value.endswith((":", "/")):
        raise Problem("is not an image reference", "use [registry/]name[:tag], e.g. nvcr.io/nvidia/pytorch:25.01-py3")
    return value


def choice(*allowed: str):
    """A parser accepting one of `allowed` (case-insensitive, returned lower-case)."""

    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in allowed:
            raise Problem("is not one of the allowed values", "use one of: " + ", ".join(allowed))
        return value

    parse.__doc__ = "One of: " + ", ".join(allowed) + "."
    parse.allowed = allowed  # type: ignore[attr-defined]
    return parse


NSYS_TRACE_APIS = (
    "cuda", "nvtx", "osrt", "cublas", "cublas-verbose", "cudnn", "cusparse", "cusparse-verbose",
    "cudla", "cudla-verbose", "mpi", "oshmem", "ucx", "openacc", "openmp", "opengl", "opengl-annotations",
    "vulkan", "vulkan-annotations", "dx11", "dx12", "nvvideo", "python-gil", "syscall", "cuda-hw", "none",
)  # fmt: skip


def trace_set(raw: str) -> str:
    """A comma-separated nsys --trace list such as cuda,nvtx,osrt."""
    items = [item.strip().lower() for item in raw.split(",") if item.strip()]
    unknown = [item for item in items if item not in NSYS_TRACE_APIS]
    if not items or unknown:
        bad = ", ".join(unknown) or "(empty)"
        raise Problem(f"has unknown trace API(s) {bad}", "use a comma-separated list of nsys trace APIs such as cuda,nvtx,osrt")
    return ",".join(items)


def step_range(raw: str) -> tuple[int, int] | None:
    """Empty (the whole run) or A-B with 1 <= A <= B: the training steps to profile."""
    value = raw.strip()
    if not value:
        return None
    match = re.fullmatch(r"(\d+)\s*-\s*(\d+)", value)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise Problem("is not a step range", "use FIRST-LAST with 1 <= FIRST <= LAST, e.g. 10-15, or leave it empty")
    return int(match[1]), int(match[2])


def rank_selection(raw: str) -> str:
    """Which ranks to profile: all, local0 (local rank 0 of each node) or a list like 0,3,5."""
    value = raw.strip().lower().replace(" ", "")
    if value in ("all", "local0"):
        return value
    if re.fullmatch(r"\d+(,\d+)*", value):
        return ",".join(str(n) for n in sorted({int(n) for n in value.split(",")}))
    raise Problem("is not a rank selection", "use all, local0 (local rank 0 of each node) or a list of ranks like 0,3")
