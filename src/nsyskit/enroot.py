"""enroot for Pyxis: the ECR line of enroot's credentials file, and importing the pushed image into a .sqsh."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from nsyskit import console
from nsyskit.config import Config
from nsyskit.errors import CommandError, ConfigError, EnrootMissing
from nsyskit.slurm.render import pull_host, sqsh_path

ECR_LOGIN = "AWS"  # the user name of every ECR authorization token
IMPORT_POLL_S = 2.0


def credentials_file(environ: Mapping[str, str] | None = None) -> Path:
    """enroot's netrc file: $ENROOT_CONFIG_PATH/.credentials, ENROOT_CONFIG_PATH defaulting to $XDG_CONFIG_HOME/enroot."""
    env = os.environ if environ is None else environ
    config = env.get("ENROOT_CONFIG_PATH") or str(
        Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "enroot"
    )
    return Path(config) / ".credentials"


def netrc_entry(host: str, login: str, password: str) -> str:
    """One netrc line for `host` (netrc passwords cannot contain blanks; ECR tokens are base64)."""
    return f"machine {host} login {login} password {password}"


def _machine(words: list[str]) -> str | None:
    """The host a netrc line starts an entry for ('default' for the default entry), else None."""
    if words and words[0] == "default":
        return "default"
    if len(words) >= 2 and words[0] == "machine":
        return words[1]
    return None


def merge_entry(text: str, host: str, entry: str) -> str:
    """`text` with the netrc entry of `host` (one line or continued over several) replaced by `entry`; all else kept."""
    kept: list[str] = []
    placed = False
    in_host_entry = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            in_host_entry = in_host_entry and bool(stripped)  # a blank line ends an entry; comments are kept
            kept.append(line)
            continue
        starts = _machine(stripped.split())
        if starts is not None:
            in_host_entry = starts == host
        if in_host_entry:
            if not placed:
                kept.append(entry)  # where the old entry was
                placed = True
            continue
        kept.append(line)
    if not placed:
        kept.append(entry)
    return "\n".join(kept) + "\n"


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` with mode 0600 atomically (a temporary file in the same folder, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=".credentials.")
    try:
        with os.fdopen(handle, "w") as out:  # mkstemp makes it 0600 already
            out.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def ecr_credentials(cfg: Config) -> tuple[str, str, str]:
    """(host, login, password) for enroot from ECR's authorization token (boto3, AWS_REGION, the usual credentials)."""
    from nsyskit.registry import ecr  # boto3 is only needed here

    if not cfg.ecr:
        raise ConfigError(
            "REGISTRY", cfg.registry, "is not an ECR registry (ACCOUNT.dkr.ecr.REGION.amazonaws.com)",
            "set REGISTRY to your ECR host; for another registry add its netrc line to enroot's .credentials yourself",
            cfg.sources.get("REGISTRY", ""),
        )  # fmt: skip
    creds = ecr.authorization(ecr.client(cfg.ecr["region"]), cfg.ecr["account"])
    return pull_host(cfg), creds.username or ECR_LOGIN, creds.password


def write_credentials(cfg: Config, environ: Mapping[str, str] | None = None) -> Path:
    """Put the ECR line into enroot's credentials file (mode 0600), keeping every other line; return the file."""
    host, login, password = ecr_credentials(cfg)
    return store_entry(credentials_file(environ), host, netrc_entry(host, login, password))


def store_entry(path: Path, host: str, entry: str) -> Path:
    """Put ENTRY for HOST into the netrc file PATH (0600, other lines kept); a file we cannot use is a ConfigError."""
    fix = "point ENROOT_CONFIG_PATH at a folder you can write (default: ~/.config/enroot)"
    try:
        old = path.read_text() if path.is_file() else ""
        if path.exists() and not path.is_file():
            raise IsADirectoryError(21, "is a folder, not a file")
        write_private(path, merge_entry(old, host, entry))
    except UnicodeDecodeError:
        raise ConfigError("ENROOT_CONFIG_PATH", str(path.parent), f"{path} is not UTF-8 text (not a netrc file)",
                          f"repair or remove {path}", "environment") from None  # fmt: skip
    except OSError as exc:
        raise ConfigError("ENROOT_CONFIG_PATH", str(path.parent), f"{path} cannot be written ({exc.strerror})", fix,
                          "environment") from None  # fmt: skip
    return path


def image_uri(cfg: Config) -> str:
    """The image as an enroot URI: the pushed one (docker://REGISTRY#IMAGE:TAG), or without REGISTRY the one
    'invoke build' made here, from this host's Docker daemon (dockerd://IMAGE:TAG)."""
    if not cfg.registry:
        return f"dockerd://{cfg.image}:{cfg.tag}"
    return f"docker://{pull_host(cfg)}#{cfg.image}:{cfg.tag}"


def import_command(cfg: Config) -> list[str]:
    """enroot import of the image (pushed, or local without REGISTRY) into SLURM_SQSH (default
    SLURM_SHARED_DIR/enroot/IMAGE+TAG.sqsh)."""
    return ["enroot", "import", "--output", sqsh_path(cfg), image_uri(cfg)]


def import_image(cfg: Config, force: bool = False) -> tuple[Path, bool]:
    """Run enroot import (needs enroot and the credentials line); an existing .sqsh is kept unless force.

    Returns the .sqsh path and whether it was imported now (False: it was already there).
    """
    command = import_command(cfg)
    target = Path(sqsh_path(cfg))
    if not shutil.which("enroot"):
        raise EnrootMissing(
            "enroot is not installed here",
            fix="run 'invoke enroot-import' on a cluster node that has it "
            "(e.g. srun -N1 .venv/bin/invoke enroot-import); enroot is installed by the cluster's administrators",
        )
    if target.exists():
        if not force:
            return target, False
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    phases = console.Phases(f"enroot import of {image_uri(cfg)}")
    with tempfile.TemporaryFile() as errors:  # a file, not a pipe: enroot's long output never blocks it
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors, stdin=subprocess.DEVNULL)
        while process.poll() is None:
            phases.update("importing")
            time.sleep(IMPORT_POLL_S)
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
    if process.returncode != 0:
        raise CommandError("importing the image with enroot", command, process.returncode, stderr)
    phases.update("done")
    return target, True
