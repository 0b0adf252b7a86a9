"""Pure rendering of the Dockerfile's build args from the config, and of the proxy passthrough."""

from __future__ import annotations

from collections.abc import Mapping

from nsyskit.config import Config
from nsyskit.image.assets import Assets

# Docker's predefined proxy args: usable by RUN steps without an ARG line, and then kept out of the
# image's history and of the layer cache key, so credentials in a proxy URL never reach the image.
PROXY_KEYS = ("http_proxy", "https_proxy", "ftp_proxy", "all_proxy", "no_proxy",
              "HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "ALL_PROXY", "NO_PROXY")  # fmt: skip

# Settings passed to the Dockerfile as they are (the .env key is the build-arg name).
PLAIN_KEYS = (
    "BASE_IMAGE", "DEBIAN_MIRROR", "TORCH_VERSION",
    "NSYS_SOURCE", "NSYS_VERSION", "NSYS_URL", "NSYS_SHA256",
    "INSTALL_NCU", "NCU_SOURCE", "NCU_VERSION", "NCU_URL", "NCU_SHA256",
    "INSTALL_MPI", "OPENMPI_SOURCE", "OPENMPI_VERSION", "OPENMPI_URL", "OPENMPI_SHA256",
    "INSTALL_EFA", "EFA_INSTALLER_VERSION", "EFA_INSTALLER_URL", "EFA_INSTALLER_SHA256",
    "INSTALL_TESTS", "NCCL_VERSION", "NCCL_TESTS_VERSION", "NCCL_TESTS_URL", "NCCL_TESTS_SHA256", "NCCL_TESTS_GENCODE",
)  # fmt: skip


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def build_args(cfg: Config, assets: Assets, base_url: str) -> dict[str, str]:
    """Every ARG of the Dockerfile, rendered from the config; host files become URLs under base_url."""
    args = {key: _text(getattr(cfg, key.lower())) for key in PLAIN_KEYS}
    for key, url_path in assets.sources.items():
        args[key] = base_url + url_path
    args["NSYSKIT_ASSETS"] = base_url if assets.needed else ""
    if assets.wheelhouse:
        args["PIP_WHEELHOUSE"] = f"{base_url}/wheels/"
    else:
        args["PIP_WHEELHOUSE"] = cfg.pip_wheelhouse  # empty (PyPI) or a URL the build reaches itself
    args["PIP_WHEELHOUSE_DIGEST"] = assets.wheelhouse_digest()
    return args


def proxy_args(environ: Mapping[str, str], assets_host: str = "") -> dict[str, str]:
    """The proxy variables set in `environ`; the assets host is added to no_proxy so the build reaches it directly."""
    args = {key: environ[key] for key in PROXY_KEYS if environ.get(key)}
    if assets_host and any(key.lower() in ("http_proxy", "https_proxy", "all_proxy") for key in args):
        for key in ("no_proxy", "NO_PROXY"):
            current = args.get(key) or environ.get("no_proxy") or environ.get("NO_PROXY") or ""
            hosts = [h for h in current.split(",") if h]
            args[key] = ",".join([*hosts, assets_host] if assets_host not in hosts else hosts)
    return args


def redact(args: Mapping[str, str]) -> dict[str, str]:
    """Build args for printing: credentials in proxy URLs (user:password@) replaced by ***."""
    from nsyskit.redact import HIDDEN, hide_url_credentials

    shown = {}
    for key, value in args.items():
        if key in PROXY_KEYS and "@" in value:
            # A proxy may be given without a scheme (user:pw@host:3128): hide what stands before the last '@'.
            value = hide_url_credentials(value) if "://" in value else f"{HIDDEN}@{value.rsplit('@', 1)[1]}"
        shown[key] = value
    return shown
