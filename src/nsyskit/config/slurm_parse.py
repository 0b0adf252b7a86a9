"""Parsers for the Slurm settings: time limits, Pyxis mounts, container images, node paths and command prefixes."""

from __future__ import annotations

import re

from nsyskit.config.parse import Problem, word_list

# Slurm's --time forms: MIN, MIN:SEC, H:MIN:SEC, D-H, D-H:MIN, D-H:MIN:SEC (sbatch(1)).
_TIME = re.compile(r"[0-9]+(:[0-9]{1,2}){0,2}|[0-9]+-[0-9]+(:[0-9]{1,2}){0,2}")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_MOUNT = re.compile(r"/[^,:\s]*:/[^,:\s]*(:[a-z+]+)?")


def slurm_time(raw: str) -> str:
    """A Slurm time limit such as 30, 01:00:00 or 2-00:00:00 (empty: the partition's default)."""
    value = raw.strip()
    if value and value not in ("infinite", "unlimited") and not _TIME.fullmatch(value):
        raise Problem(
            "is not a Slurm time limit", "use minutes, HH:MM:SS or D-HH:MM:SS, e.g. 01:00:00 (empty: partition default)"
        )
    return value


def slurm_name(raw: str) -> str:
    """Empty or one Slurm name (partition, account, MPI plugin): letters, digits, '_', '.', '-'."""
    value = raw.strip()
    if value and not _WORD.fullmatch(value):
        raise Problem(
            "is not a Slurm name", "use a single name of letters, digits, '_', '.' or '-', starting with a letter or digit (empty: cluster default)"
        )
    return value


def container_mounts(raw: str) -> str:
    """Empty or Pyxis --container-mounts entries SRC:DST[:FLAGS] with absolute paths, comma-separated."""
    items = [item.strip() for item in raw.split(",") if item.strip()]
    bad = [item for item in items if not _MOUNT.fullmatch(item)]
    if bad:
        comma = " (a comma separates mounts, so no path can contain one)" if any(":" not in b for b in bad) else ""
        raise Problem(
            f"has malformed mount(s) {', '.join(bad)}{comma}",
            "use SRC:DST[:FLAGS] with absolute paths without commas, separated by commas, e.g. /fsx:/fsx,/data:/data:ro",
        )
    return ",".join(items)


def node_folder(raw: str) -> str:
    """An absolute folder on every node, such as /fsx (no spaces, commas or colons: Pyxis mount syntax)."""
    value = raw.strip().rstrip("/")
    if "," in value:
        raise Problem("contains a comma, which separates Pyxis mounts", "use a folder path without commas, e.g. /fsx")
    if not value.startswith("/") or re.search(r"[\s:]", value):
        raise Problem("is not an absolute folder", "use an absolute path without spaces, commas or colons, e.g. /fsx")
    return value


# What Pyxis' --container-image takes (srun --help with Pyxis; enroot import's schemes): a squashfs file, or an
# enroot URI: docker://[USER@][REGISTRY#]IMAGE[:TAG] (the scheme may be left out), dockerd://IMAGE[:TAG] (the
# node's Docker daemon: a locally built image), podman://IMAGE[:TAG].
_IMAGE = r"[a-z0-9][\w./-]*(:[\w.-]+)?(@sha256:[0-9a-f]{64})?"
_REGISTRY_URI = re.compile(rf"(docker://)?([\w.!~*'()%;:&=+$,-]+@)?([\w.:-]+#)?{_IMAGE}", re.ASCII)
_LOCAL_URI = re.compile(rf"(dockerd|podman)://{_IMAGE}", re.ASCII)
IMAGE_FORMS = (
    "registry (the pushed image), sqsh (the file of 'invoke enroot-import'), an absolute .sqsh path, "
    "docker://[USER@][REGISTRY#]IMAGE[:TAG] (or without docker://), dockerd://IMAGE[:TAG] (the nodes' Docker "
    "daemon) or podman://IMAGE[:TAG]"
)


def container_image(raw: str) -> str:
    """registry, sqsh, a squashfs path or any enroot URI Pyxis takes (docker://, dockerd://, podman://, none)."""
    value = raw.strip()
    if value in ("registry", "sqsh") or (value.startswith("/") and not re.search(r"[\s,]", value)):
        return value
    if not (_REGISTRY_URI.fullmatch(value) or _LOCAL_URI.fullmatch(value)):
        raise Problem("is not a container image for Pyxis", f"use {IMAGE_FORMS}")
    return value


def image_file(value: str) -> str | None:
    """The squashfs file a SLURM_CONTAINER_IMAGE value names (an absolute path), or None for a URI or keyword."""
    return value if value.startswith("/") else None


def command_prefix(raw: str) -> str:
    """Empty or a shell-quoted command prefix such as 'ssh login-node' (checked for balanced quotes)."""
    return word_list(raw, "is not a valid command prefix", "ssh login-node")


def nsyskit_command(raw: str) -> str:
    """The nsyskit command of the compute nodes: a program (and its arguments), not empty."""
    value = word_list(raw, "is not a command", "/fsx/venv/bin/nsyskit")
    if not value:
        raise Problem("is empty", "leave it out (nsyskit on the nodes' PATH) or give its path, e.g. /fsx/venv/bin/nsyskit")
    return value


def sqsh_path(raw: str) -> str:
    """Empty (SLURM_SHARED_DIR/enroot/IMAGE+TAG.sqsh) or an absolute path ending in .sqsh."""
    value = raw.strip()
    if value and not (value.startswith("/") and value.endswith(".sqsh") and not re.search(r"[\s,:]", value)):
        raise Problem("is not an absolute .sqsh path", "use e.g. /fsx/enroot/nsyskit.sqsh, or leave it empty")
    return value
