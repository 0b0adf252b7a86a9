"""Host packages on Debian/Ubuntu: apt components and apt-get installs (stdlib only, so it runs on a bare machine).

Every host-side install of the kit and its tests goes through here, so one test can check them all in a fresh
container of the base image (only `main` enabled), as a fresh machine starts:

    python3 -m nsyskit.hostpkgs all      # or some of: nsys ncu docker debootstrap registry shellcheck kubectl sqlite-ext
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from nsyskit.errors import CommandError, NsyskitError

# What each host-side step installs. nsight-systems-target depends on libcuda1 (non-free), whose own
# dependencies live in contrib: both components must be enabled (a fresh bookworm lists only main).
HOST_PACKAGES: dict[str, tuple[str, ...]] = {
    "nsys": ("nsight-systems", "nsight-systems-target", "libnvtoolsext1"),
    "ncu": ("nsight-compute", "nsight-compute-target"),  # 'invoke analyze' of PROFILER=ncu runs (ncu --import)
    "docker": ("docker.io",),
    "debootstrap": ("debootstrap",),
    "registry": ("docker-registry", "apache2-utils"),
    "shellcheck": ("shellcheck",),
    "kubectl": ("kubernetes-client",),
    # the analysis's faster column reads (analysis/blobagg.py): a C compiler and SQLite's extension header
    "sqlite-ext": ("gcc", "libc6-dev", "libsqlite3-dev"),
}
NEEDS_COMPONENTS: dict[str, tuple[str, ...]] = {"nsys": ("contrib", "non-free"), "ncu": ("contrib", "non-free")}
EXTRA_SOURCES = Path("/etc/apt/sources.list.d/nsyskit.sources")
DEBIAN_MIRROR = "http://deb.debian.org/debian"
LOCK_TIMEOUT_S = 600


def is_debian_like() -> bool:
    """Debian or a derivative (apt-get is the way to install)."""
    try:
        release = Path("/etc/os-release").read_text()
    except OSError:
        return False
    return any(word in release for word in ("ID=debian", "ID=ubuntu", "ID_LIKE=debian", 'ID_LIKE="debian'))


def can_install() -> bool:
    """Whether this process may install host packages: root on Debian/Ubuntu."""
    return os.geteuid() == 0 and is_debian_like()


def apt_install(*packages: str) -> None:
    """apt-get install the packages (updating the lists once if they are missing), or CommandError."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Wait for another apt/dpkg (unattended upgrades, a parallel install) instead of failing on its lock.
    cmd = [
        "apt-get",
        "-o",
        f"DPkg::Lock::Timeout={LOCK_TIMEOUT_S}",
        "install",
        "-y",
        "--no-install-recommends",
        *packages,
    ]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        subprocess.run(
            ["apt-get", "-o", f"DPkg::Lock::Timeout={LOCK_TIMEOUT_S}", "update"],
            env=env,
            capture_output=True,
            text=True,
        )
        result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise CommandError(f"installing {' '.join(packages)}", cmd, result.returncode, result.stderr)


def install(step: str) -> None:
    """Install what a host-side step needs (see HOST_PACKAGES), enabling the apt components it needs first."""
    components = NEEDS_COMPONENTS.get(step, ())
    if components and _is_debian_proper():
        enable_components(*components)
    apt_install(*HOST_PACKAGES[step])


def enable_components(*components: str) -> list[str]:
    """Add the Debian components that no active apt source lists yet (one deb822 file); returns those added."""
    sources = _apt_sources()
    missing = [c for c in components if not _lists_component(sources, c)]
    if missing:
        EXTRA_SOURCES.write_text(
            f"Types: deb\nURIs: {_mirror(sources)}\nSuites: {_suite()}\nComponents: {' '.join(missing)}\n"
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        )
        update = ["apt-get", "-o", f"DPkg::Lock::Timeout={LOCK_TIMEOUT_S}", "update"]
        result = subprocess.run(update, capture_output=True, text=True)
        if result.returncode != 0:
            raise CommandError(f"enabling Debian {' '.join(missing)}", update, result.returncode, result.stderr)
    return missing


def _is_debian_proper() -> bool:
    # Ubuntu has no contrib/non-free (its nsys comes from NVIDIA's repository).
    return Path("/etc/debian_version").exists() and "ID=debian" in _read(Path("/etc/os-release"))


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _apt_sources() -> str:
    listed = sorted(Path("/etc/apt/sources.list.d").glob("*"))
    # apt reads only *.list and *.sources there: a '.disabled' copy is not a source.
    files = [Path("/etc/apt/sources.list"), *(p for p in listed if p.suffix in (".list", ".sources"))]
    return "\n".join(_read(path) for path in files)


def _lists_component(sources: str, component: str) -> bool:
    """An active line (one-line or deb822) names the component; 'non-free' is not 'non-free-firmware'."""
    pattern = rf"^(?!\s*#).*(?<![\w-]){re.escape(component)}(?![\w-])"
    return re.search(pattern, sources, re.MULTILINE) is not None


def _mirror(sources: str) -> str:
    """The archive the machine already uses (so a local mirror keeps working), else Debian's."""
    uris = re.findall(r"^(?:deb\s+(?:\[[^]]*\]\s+)?|URIs:\s*)(\S+)", sources, re.MULTILINE)
    archives = [uri for uri in uris if "security" not in uri]
    return archives[0] if archives else DEBIAN_MIRROR


def _suite() -> str:
    match = re.search(r"^VERSION_CODENAME=\"?([\w-]+)", _read(Path("/etc/os-release")), re.MULTILINE)
    return match.group(1) if match else "bookworm"


def main(argv: list[str]) -> int:
    """`python3 -m nsyskit.hostpkgs STEP…|all`: install the steps' packages, print what each step got."""
    steps = list(HOST_PACKAGES) if argv in ([], ["all"]) else argv
    unknown = [s for s in steps if s not in HOST_PACKAGES]
    if unknown:
        print(
            f"error: unknown step(s) {', '.join(unknown)}; fix: use one of {', '.join(HOST_PACKAGES)} or all",
            file=sys.stderr,
        )
        return 2
    try:
        for step in steps:
            install(step)
            print(f"{step}: {' '.join(HOST_PACKAGES[step])}")
    except NsyskitError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
