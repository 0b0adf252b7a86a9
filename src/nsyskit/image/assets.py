"""Host files a build uses but no layer may keep (extra CA bundle, wheelhouse, local sources), served over HTTP.

The classic builder has no build secrets or mounts, and a COPY would leave the file in a layer. So the
kit serves these files from the host on the engine's bridge gateway while the build runs; each install
step fetches what it needs and deletes it before the step ends. The address is fixed (one build at a
time per machine, see build_lock) so that it does not change the build args and break the layer cache.
"""

from __future__ import annotations

import fcntl
import hashlib
import html
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

from nsyskit.config import Config
from nsyskit.config.environ import assets_port
from nsyskit.errors import BuildError, ConfigError, ConfigErrors

DEFAULT_GATEWAY = "172.17.0.1"
LOCK_ENV, DEFAULT_LOCK = "NSYSKIT_BUILD_LOCK", "/tmp/nsyskit-build.lock"
# Settings whose value may name a host file instead of a URL: URL key -> the sha256 key that verifies it.
SOURCE_KEYS = {"NSYS_URL": "NSYS_SHA256", "NCU_URL": "NCU_SHA256", "OPENMPI_URL": "OPENMPI_SHA256",
               "EFA_INSTALLER_URL": "EFA_INSTALLER_SHA256", "NCCL_TESTS_URL": "NCCL_TESTS_SHA256"}  # fmt: skip


@dataclass(frozen=True)
class Assets:
    """What the build needs from the host: URL path (under the assets address) -> host file."""

    files: dict[str, Path] = field(default_factory=dict)
    wheelhouse: Path | None = None
    # Setting key -> the URL path its local file is served at (e.g. EFA_INSTALLER_URL -> /sources/<sha>/x.tar.gz).
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def needed(self) -> bool:
        """True when the build needs the assets server (host files or a local wheelhouse)."""
        return bool(self.files or self.wheelhouse)

    def wheel_names(self) -> list[str]:
        """The wheels of the local wheelhouse, sorted (what pip in the build may install)."""
        return sorted(p.name for p in self.wheelhouse.glob("*.whl")) if self.wheelhouse else []

    def wheelhouse_digest(self) -> str:
        """Names and sizes of the wheels: a new or replaced wheel changes it (and so rebuilds the Python layer)."""
        if not self.wheelhouse:
            return ""
        listing = "\n".join(f"{name} {(self.wheelhouse / name).stat().st_size}" for name in self.wheel_names())
        return hashlib.sha256(listing.encode()).hexdigest()[:16]


def _unusable(key: str, value: str, path: Path, want_dir: bool = False) -> ConfigError | None:
    """The error for a host file (or folder) setting the build cannot read, or None when it can."""
    kind = "folder" if want_dir else "file"
    try:
        path.stat()
    except PermissionError:
        return ConfigError(key, value, f"{path} cannot be reached by this user (a folder on its way is closed to it)",
                           "make the folders on its way searchable (chmod a+x), or run as their owner")  # fmt: skip
    except OSError:
        return ConfigError(key, value, f"no such {kind} {path}", f"give an existing {kind}, or leave it empty")
    if path.is_dir() != want_dir:
        found = "a folder" if path.is_dir() else "not a folder"
        return ConfigError(key, value, f"{path} is {found}, not a {kind}", f"give a {kind}, or leave it empty")
    if not os.access(path, os.R_OK | (os.X_OK if want_dir else 0)):
        return ConfigError(key, value, f"{path} cannot be read by this user (permission denied)",
                           f"make it readable (chmod a+r{'X' if want_dir else ''}), or run as its owner")  # fmt: skip
    return None


def _file_sha256(key: str, value: str, path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise ConfigError(key, value, f"{path} cannot be read ({exc.strerror})", "check the file and its permissions") from None
    return digest.hexdigest()


def local_path(value: str) -> Path | None:
    """The host file a source setting names (an absolute path or file:// URL), or None for a URL to download."""
    if value.startswith("file://"):
        return Path(unquote(urlparse(value).path))
    return Path(value) if value.startswith("/") else None


def _in_root(value: str, root: Path) -> Path:
    """A setting's path, relative ones taken from the project root."""
    path = Path(value)
    return path if path.is_absolute() else root / path


def _local_sources(cfg: Config) -> Iterator[tuple[str, str, Path]]:
    """(key, value, host path) of each *_SOURCE setting that names a local file rather than a URL."""
    for key in SOURCE_KEYS:
        value = getattr(cfg, key.lower())
        if value and (path := local_path(value)) is not None:
            yield key, value, path


def build_problems(cfg: Config, root: Path) -> list[ConfigError]:
    """Every host file this config's build needs but cannot use (missing, unreadable, not PEM): 'config --check' too."""
    problems = []
    if cfg.extra_ca_bundle:
        ca = _in_root(cfg.extra_ca_bundle, root)
        if problem := _unusable("EXTRA_CA_BUNDLE", cfg.extra_ca_bundle, ca):
            problems.append(problem)
        elif b"-----BEGIN CERTIFICATE-----" not in ca.read_bytes():
            problems.append(ConfigError("EXTRA_CA_BUNDLE", cfg.extra_ca_bundle, f"{ca} holds no PEM certificate",
                            "point it at a PEM file (-----BEGIN CERTIFICATE-----), e.g. /etc/ssl/certs/ca-certificates.crt"))  # fmt: skip
    if cfg.pip_wheelhouse and "://" not in cfg.pip_wheelhouse:
        wheelhouse = _in_root(cfg.pip_wheelhouse, root)
        if problem := _unusable("PIP_WHEELHOUSE", cfg.pip_wheelhouse, wheelhouse, want_dir=True):
            problems.append(problem)
    for key, value, path in _local_sources(cfg):
        if problem := _unusable(key, value, path):
            problems.append(problem)
    return problems


def collect_assets(cfg: Config, root: Path) -> Assets:
    """The host files this config's build needs; ConfigError naming the key when one is missing."""
    if problems := build_problems(cfg, root):
        raise problems[0] if len(problems) == 1 else ConfigErrors(problems)
    files: dict[str, Path] = {}
    sources: dict[str, str] = {}
    if cfg.extra_ca_bundle:
        files["/ca.pem"] = _in_root(cfg.extra_ca_bundle, root)
    wheelhouse = None
    if cfg.pip_wheelhouse and "://" not in cfg.pip_wheelhouse:
        wheelhouse = _in_root(cfg.pip_wheelhouse, root)
    for key, value, path in _local_sources(cfg):
        # The content hash in the URL: a changed file changes the build arg, so the step rebuilds.
        url_path = f"/sources/{_file_sha256(key, value, path)[:16]}/{quote(path.name)}"
        files[url_path] = path
        sources[key] = url_path
    return Assets(files, wheelhouse, sources)


def gateway_address(client) -> str:
    """The IP build containers reach the host at: the gateway of Docker's default bridge network."""
    try:
        for entry in client.networks.get("bridge").attrs.get("IPAM", {}).get("Config") or []:
            if entry.get("Gateway"):
                return entry["Gateway"]
    except Exception:  # noqa: BLE001 - an engine without a 'bridge' network: fall back to Docker's default
        pass
    return DEFAULT_GATEWAY


def assets_url(host: str) -> str:
    """The base URL the build fetches host files from."""
    return f"http://{host}:{assets_port()}"


class _Handler(BaseHTTPRequestHandler):
    """GET of a served file, or the HTML wheel listing pip's --find-links reads at /wheels/."""

    assets: Assets

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        path = urlparse(self.path).path
        if self.assets.wheelhouse and path.rstrip("/") == "/wheels":
            links = "".join(f'<a href="{quote(n)}">{html.escape(n)}</a><br>\n' for n in self.assets.wheel_names())
            self._send(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode(), "text/html")
            return
        target = self.assets.files.get(unquote(path))
        if target is None and self.assets.wheelhouse and path.startswith("/wheels/"):
            name = unquote(path[len("/wheels/") :])
            if name in self.assets.wheel_names():
                target = self.assets.wheelhouse / name
        if target is None or not target.is_file():
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(target.stat().st_size))
        self.end_headers()
        with target.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                self.wfile.write(chunk)

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - quiet: the build log is what matters
        pass


@contextmanager
def serve(assets: Assets, host: str) -> Iterator[str]:
    """Serve the assets at http://host:ASSETS_PORT while the block runs; yields the base URL."""
    handler = type("AssetsHandler", (_Handler,), {"assets": assets})
    try:
        server = ThreadingHTTPServer((host, assets_port()), handler)
    except OSError as exc:
        raise BuildError(
            f"cannot serve the build's host files (EXTRA_CA_BUNDLE, PIP_WHEELHOUSE, local sources) at {host}:{assets_port()}: {exc.strerror}",
            fix="free that port or set NSYSKIT_ASSETS_PORT; with a remote engine, use https:// URLs for these settings",
        ) from exc
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="nsyskit-assets", daemon=True)
    thread.start()
    try:
        yield assets_url(host)
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def build_lock() -> Iterator[None]:
    """One nsyskit build at a time on this machine (they share the assets address, and the CPU)."""
    lock_file = Path(os.environ.get(LOCK_ENV) or DEFAULT_LOCK)
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        handle = lock_file.open("a")
    except OSError as exc:
        raise ConfigError(LOCK_ENV, str(lock_file), f"cannot be opened as the build lock ({exc.strerror})",
                          "point it at a writable file path, or unset it", "environment") from None  # fmt: skip
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
