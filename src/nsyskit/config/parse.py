"""Value parsers for .env settings: each turns a raw string into a typed value or raises ValueError(fix)."""

from __future__ import annotations

import re
import shlex
import unicodedata
from ipaddress import IPv4Address, IPv6Address
from urllib.parse import urlsplit

from nsyskit.ranks import mounts as mount_rules
from nsyskit.ranks import workloads

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


INT32_MAX = 2**31 - 1  # Kubernetes (replicas, slotsPerWorker, backoffLimit...) and Slurm counts are 32-bit
_WHOLE = re.compile(r"\+?[0-9]+")  # ASCII digits only: Python's \d also matches other scripts' digits


def whole_number(raw: str, least: int, fix: str) -> int:
    """A whole number in ASCII digits from LEAST to INT32_MAX; else Problem(..., FIX)."""
    text = raw.strip()
    if not _WHOLE.fullmatch(text):
        raise Problem("is not a positive integer" if least == 1 else "is not a whole number", fix)
    number = int(text)
    if number < least:
        raise Problem("is not a positive integer" if least == 1 else f"is less than {least}", fix)
    if number > INT32_MAX:
        raise Problem(f"is more than {INT32_MAX} (the 32-bit limit of Kubernetes and Slurm counts)", fix)
    return number


def positive_int(raw: str) -> int:
    """A whole number from 1 to 2147483647."""
    return whole_number(raw, 1, f"use a whole number of 1 or more (at most {INT32_MAX}), e.g. 2")


def non_negative_int(raw: str) -> int:
    """A whole number from 0 to 2147483647 (0 usually means 'off')."""
    return whole_number(raw, 0, f"use a whole number of 0 or more (at most {INT32_MAX}; 0 turns it off)")


def plain_text(raw: str) -> str:
    """RAW unchanged when it is printable UTF-8 text (every value may land in YAML, a script or a build arg)."""
    if any("\udc80" <= ch <= "\udcff" for ch in raw):
        raise Problem("is not UTF-8 text", "use UTF-8 text (the environment or file holds bytes of another encoding)")
    bad = sorted({ch for ch in raw if unicodedata.category(ch) == "Cc"})
    if bad:
        shown = " ".join(repr(ch) for ch in bad)
        raise Problem(f"contains control character(s) {shown}", "remove the control characters (newlines, tabs, escapes)")
    return raw


def word_list(raw: str, what: str = "does not split into words", example: str = "--flag 'a b'") -> str:
    """Arguments as a shell would split them (quotes balanced), surrounding blanks removed."""
    value = raw.strip()
    try:
        shlex.split(value)
    except ValueError as exc:
        raise Problem(f"{what} ({exc})", f"balance the quotes, e.g. {example}") from None
    return value


def source(raw: str) -> str:
    """Empty (the pinned default), an http(s):// URL, a file:// URL or an absolute path of a host file."""
    value = raw.strip()
    if not value or value.startswith("/"):
        return value
    parts = urlsplit(value) if " " not in value else None
    ok = parts and ((parts.scheme in ("http", "https") and parts.netloc) or (parts.scheme == "file" and parts.path.startswith("/")))
    if not ok:
        raise Problem("is not an http(s) URL, a file:// URL or an absolute path",
                      "use e.g. https://mirror.example.com/x.tar.gz, file:///srv/x.tar.gz or /srv/x.tar.gz (empty: the pinned download)")  # fmt: skip
    return value


def folder(raw: str) -> str:
    """A non-empty folder path (relative to the project root or absolute), without commas."""
    value = raw.strip()
    if not value:
        raise Problem("is empty", "name a folder, e.g. reports (relative to the project root) or an absolute path")
    if "," in value:
        raise Problem("contains a comma, but commas separate paths (invoke analyze RUN[,RUN...])",
                      "use a folder path without commas")  # fmt: skip
    return value


def wheelhouse(raw: str) -> str:
    """Empty (PyPI), a folder path, or the http(s)/file URL of a wheel listing."""
    value = raw.strip()
    if "://" in value:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https", "file") or not (parts.netloc or parts.path.startswith("/")):
            raise Problem("is not a URL of a wheel listing", "use https://HOST/PATH/, a folder path, or leave it empty for PyPI")
    return value


def debian_suite(raw: str) -> str:
    """A Debian suite or code name such as bookworm, trixie or stable."""
    value = raw.strip()
    if not re.fullmatch(r"[a-z][a-z0-9.-]{0,39}", value):
        raise Problem("is not a Debian suite name", "use a suite or code name such as bookworm, trixie or stable")
    return value


def url(raw: str) -> str:
    """An http(s) or file URL such as http://deb.debian.org/debian."""
    value = raw.strip()
    parts = urlsplit(value) if " " not in value else None
    if not parts or parts.scheme not in ("http", "https", "file") or not (parts.netloc or parts.scheme == "file"):
        raise Problem("is not an http(s) or file URL", "use a URL such as http://deb.debian.org/debian")
    return value


def label_value(raw: str) -> str:
    """Empty or a Kubernetes label value such as p5.48xlarge (at most 63 letters, digits, '-', '_', '.')."""
    value = raw.strip()
    if value and not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?", value):
        raise Problem("is not a Kubernetes label value", "use e.g. p5.48xlarge (letters, digits, '-', '_', '.'), or leave it empty")
    return value


def nccl_subsystems(raw: str) -> str:
    """Empty or NCCL_DEBUG_SUBSYS: comma-separated subsystem names, each optionally prefixed by ^ (exclude)."""
    value = raw.strip().replace(" ", "")
    if value and not re.fullmatch(r"\^?[A-Za-z0-9_]+(,\^?[A-Za-z0-9_]+)*", value):
        raise Problem("is not a list of NCCL subsystems", "use names separated by commas, e.g. INIT,COLL,NET (^NAME excludes)")
    return value


def text(raw: str) -> str:
    """Any string, surrounding blanks removed."""
    return raw.strip()


_VERSION = re.compile(r"v?[0-9]+(\.[0-9]+){1,3}([-+._][0-9A-Za-z]+)*")


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
_REGISTRY = re.compile(rf"(?P<host>localhost|{_HOST_LABEL}(\.{_HOST_LABEL})*|\[(?P<ipv6>[0-9a-fA-F:.]+)\])(:(?P<port>[0-9]{{1,5}}))?")
ECR_HOST = re.compile(
    r"(?P<account>[0-9]{12})\.dkr\.ecr(-fips)?\.(?P<region>[a-z]{2}(-gov)?-[a-z]+-[0-9])\.amazonaws\.com(\.cn)?"
)
_REGISTRY_FIX = ("use a host name or IP address with an optional port 1-65535 and no scheme or path, "
                 "e.g. 123456789012.dkr.ecr.us-west-2.amazonaws.com or 127.0.0.1:5000")  # fmt: skip


def host_problem(value: str) -> str | None:
    """What is wrong with a host[:port] (a name, IPv4 or [IPv6] address, port 1-65535), or None."""
    match = _REGISTRY.fullmatch(value)
    if not match:
        return "is not a registry host"
    if match["port"] and not 1 <= int(match["port"]) <= 65535:
        return f"has the port {match['port']}, outside 1-65535"
    try:
        if match["ipv6"] is not None:
            IPv6Address(match["ipv6"])
        elif re.fullmatch(r"[0-9.]+", match["host"]):
            IPv4Address(match["host"])
    except ValueError:
        return f"has the invalid IP address {match['host']}"
    return None


def registry_host(raw: str) -> str:
    """Empty (local images only) or a registry host[:port], with no scheme and no path."""
    value = raw.strip()
    problem = host_problem(value) if value else None
    if problem:
        raise Problem(problem, _REGISTRY_FIX)
    return value


_AWS_REGION = re.compile(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]")


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


IMAGE_NAME_MAX = 255  # Docker's limit on the length of a repository name, registry included
_COMPONENT = r"[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*"
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def image_reference_problem(value: str) -> str | None:
    """Why Docker would refuse the reference [registry/]name[:tag][@sha256:digest], or None."""
    if "://" in value:
        return "has a scheme (://); image references have none"
    name, _, digest = value.partition("@")
    if digest and not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        return f"has the malformed digest {digest}"
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
        if not _TAG.fullmatch(tag):
            return f"has the invalid tag {tag!r}"
    if not name or "//" in name or name.startswith("/") or name.endswith("/"):
        return "has an empty path component (// or a leading or trailing /)"
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        if host_problem(parts[0]):
            return f"has the invalid registry {parts[0]}"
        parts = parts[1:]
    for part in parts:
        if not re.fullmatch(_COMPONENT, part):
            lower = "; repository paths must be lower case" if part.lower() != part else ""
            return f"has the invalid path component {part!r}{lower}"
    if len(name) > IMAGE_NAME_MAX:
        return f"has a name {len(name)} characters long; Docker allows {IMAGE_NAME_MAX}"
    return None


def image_reference(raw: str) -> str:
    """A full image reference [registry/]name[:tag|@digest] as Docker accepts it."""
    value = raw.strip()
    problem = image_reference_problem(value) if value else "is empty"
    if problem:
        raise Problem(problem, "use [registry/]name[:tag] in lower case, e.g. nvcr.io/nvidia/pytorch:25.01-py3")
    return value


def optional_image_reference(raw: str) -> str:
    """Empty or an image reference (see image_reference)."""
    return image_reference(raw) if raw.strip() else ""


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
    match = re.fullmatch(r"([0-9]+)\s*-\s*([0-9]+)", value)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise Problem("is not a step range", "use FIRST-LAST with 1 <= FIRST <= LAST, e.g. 10-15, or leave it empty")
    return int(match[1]), int(match[2])


def rank_selection(raw: str) -> str:
    """Which ranks to profile: all, local0 (local rank 0 of each node) or a list like 0,3,5."""
    value = raw.strip().lower().replace(" ", "")
    if value in ("all", "local0"):
        return value
    if re.fullmatch(r"[0-9]+(,[0-9]+)*", value):
        return ",".join(str(n) for n in sorted({int(n) for n in value.split(",")}))
    raise Problem("is not a rank selection", "use all, local0 (local rank 0 of each node) or a list of ranks like 0,3")


def nccl_tests(raw: str) -> str:
    """NCCL tests separated by ';', each a binary the image installs and nccl-tests' flags; returned as '; '-joined text."""
    try:
        tests = workloads.parse_tests(raw)
    except workloads.NcclTestsProblem as exc:
        raise Problem(exc.problem, exc.fix) from None
    return "; ".join(test.text() for test in tests)


def command_line(raw: str) -> str:
    """COMMAND: what one rank runs, as shell words (quotes balanced; 'env K=V ...' allowed); empty unless WORKLOAD=command."""
    return word_list(plain_text(raw), example="python3 /code/train.py --run-name 'my run'")


def mounts(raw: str) -> str:
    """MOUNTS: HOST:CONTAINER[:ro] bind mounts, comma-separated, absolute paths; returned as the normalized text."""
    try:
        found = mount_rules.parse_mounts(plain_text(raw))
    except mount_rules.MountProblem as exc:
        raise Problem(exc.problem, exc.fix) from None
    return mount_rules.SEPARATOR.join(mount.text() for mount in found)


CAPTURE_RANGE = re.compile(r"nvtx:(\S.*)")  # PROFILE_RANGE=nvtx:NAME (nsys --nvtx-capture NAME, also NAME@DOMAIN)


def capture_range(raw: str) -> str:
    """PROFILE_RANGE: empty (PROFILE_STEPS decides) or nvtx:NAME, the program's own NVTX range to record."""
    value = plain_text(raw).strip()
    if value and not CAPTURE_RANGE.fullmatch(value):
        raise Problem("is not a capture range", "use nvtx:NAME (your program's NVTX range, e.g. nvtx:train_window), or leave it empty")
    return value
