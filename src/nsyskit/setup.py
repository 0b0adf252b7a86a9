"""Idempotent preparation of this machine: a Docker engine and the base image the chosen profile needs."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import docker
from docker.errors import ImageNotFound

from nsyskit import console, engine, hostpkgs
from nsyskit.config import Config
from nsyskit.errors import CommandError


@dataclass
class SetupReport:
    """What setup found already in place and what it had to do."""

    done: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.done)


def _has_image(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.images.get(ref)
        return True
    except ImageNotFound:
        return False


def make_debian_base(client: docker.DockerClient, ref: str, suite: str, mirror: str) -> None:
    """debootstrap a minimal Debian `suite` from `mirror` and import it as image `ref` (no registry needed)."""
    if not shutil.which("debootstrap"):
        console.info("installing debootstrap (apt-get)…")
        hostpkgs.install("debootstrap")
    with tempfile.TemporaryDirectory(prefix="nsyskit-rootfs-") as tmp:
        rootfs, tarball = Path(tmp) / "rootfs", Path(tmp) / "rootfs.tar"
        cmd = ["debootstrap", "--variant=minbase", suite, str(rootfs), mirror]
        console.info(f"debootstrap {suite} from {mirror} (about 30 s)…")
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            log = (rootfs / "debootstrap" / "debootstrap.log")
            detail = log.read_text(errors="replace") if log.exists() else result.stderr or result.stdout
            raise CommandError(f"making the base image {ref}", cmd, result.returncode, detail)
        # apt caches and lists only bloat the image; builds run apt-get update themselves.
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tarball), "."], check=True)
        repository, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
        client.api.import_image_from_file(
            str(tarball), repository=repository, tag=tag,
            changes=["ENV LANG=C.UTF-8", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 'CMD ["bash"]'],
        )


def run_setup(cfg: Config) -> SetupReport:
    """Make sure the engine runs and BASE_IMAGE exists when this machine must make it; do nothing twice."""
    report = SetupReport()
    client, did = engine.ensure_engine()
    version = client.version().get("Version", "?")
    (report.done if did else report.present).append(did or f"Docker engine {version} is running")
    if cfg.base_image_source == "debootstrap":
        if _has_image(client, cfg.base_image):
            report.present.append(f"base image {cfg.base_image} exists")
        else:
            make_debian_base(client, cfg.base_image, cfg.debian_suite, cfg.debian_mirror)
            report.done.append(f"made base image {cfg.base_image} (debootstrap {cfg.debian_suite})")
    return report
