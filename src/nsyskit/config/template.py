"""The documented .env, rendered from the schema: every setting commented out with its default and help, grouped."""

from __future__ import annotations

import re
from pathlib import Path

from nsyskit.config.schema import SECTION_TITLES, key_of, settings
from nsyskit.errors import ConfigFileError

HEADER = """\
# nsyskit settings, written by 'invoke config --template': every setting with its default and help.
# Uncomment a line and change its value to set it; keep in .env only what differs from the default.
# Precedence: built-in defaults < .env < profiles/<name>.env (--profile or $NSYSKIT_PROFILE)
#             < environment (NSYSKIT_<KEY>, e.g. NSYSKIT_NODES=4) < task flags.
# 'invoke config' shows each value and its source.
# Booleans: true/false (also 1/0, yes/no). Empty value = the documented 'empty' meaning.
"""
_PLAIN = re.compile(r"[^\s'\"#\\$`]*")  # values python-dotenv reads back unchanged without quotes


def env_value(raw: str) -> str:
    """The value as .env text: as is when plain, else single-quoted (python-dotenv keeps it literally)."""
    if _PLAIN.fullmatch(raw):
        return raw
    return "'" + raw.replace("\\", "\\\\").replace("'", "\\'") + "'"


def render_template() -> str:
    """The documented .env: per group a heading, then per setting its help and its commented-out default."""
    parts = [HEADER]
    for section, title in SECTION_TITLES.items():
        parts.append(f"\n# ---- {title} ----\n")
        for f in settings():
            if f.metadata["section"] != section:
                continue
            parts.append(f"# {f.metadata['help']}\n")
            parts.append(f"# {key_of(f)}={env_value(f.metadata['raw_default'])}\n")
    return "".join(parts)


def write_template(path: Path, force: bool = False) -> None:
    """Write the documented .env to PATH; an existing file is kept unless `force`."""
    if path.is_dir():
        raise ConfigFileError(path, "is a folder", "give the path of a file with --output")
    if (path.exists() or path.is_symlink()) and not force:
        raise ConfigFileError(path, "exists already", "pass --force to overwrite it, or give another --output")
    path.write_text(render_template())
