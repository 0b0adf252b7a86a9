"""Read one KEY=value settings file (.env or a profile) strictly: every way it can be unusable is a ConfigFileError."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path

from dotenv.parser import parse_stream

from nsyskit.errors import ConfigFileError

READ_FIX = "make it readable by this user (chmod a+r FILE) or run as its owner"


def read_bytes(path: Path, label: str) -> bytes:
    """The file's bytes; a folder, a missing or unreadable file or an over-long name is a ConfigFileError."""
    try:
        return path.read_bytes()
    except IsADirectoryError:
        raise ConfigFileError(label, "is a folder, not a file", "remove it, or make it a file of KEY=value lines") from None
    except FileNotFoundError:
        raise ConfigFileError(label, "does not exist", "create it, or pick another file") from None
    except PermissionError:
        raise ConfigFileError(label, "cannot be read (permission denied)", READ_FIX.replace("FILE", label)) from None
    except OSError as exc:
        why = "the name is too long" if exc.errno == errno.ENAMETOOLONG else os.strerror(exc.errno or 0) or str(exc)
        raise ConfigFileError(label, f"cannot be read ({why})", "use a shorter name, or check the file") from None


def decode(data: bytes, label: str) -> str:
    """The file as text; a byte that is not UTF-8 is reported with its line and value."""
    try:
        return data.decode("utf-8-sig")  # -sig: a byte-order mark (Windows editors) would glue onto the first key
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigFileError(
            f"{label} line {line}", f"byte 0x{data[exc.start]:02x} is not UTF-8 text", "save the file as UTF-8 text"
        ) from None


def parse(text: str, label: str) -> tuple[dict[str, str], list[ConfigFileError]]:
    """KEY=value pairs of the text (python-dotenv's syntax, no interpolation) and an error for each line that is not one."""
    values: dict[str, str] = {}
    errors: list[ConfigFileError] = []
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            original = binding.original.string
            line = binding.original.line + len(original) - len(original.lstrip("\n"))
            shown = original.strip().splitlines()[0][:80] if original.strip() else original
            errors.append(ConfigFileError(
                f"{label} line {line}",
                f"{shown!r} is not a KEY=value line",
                "write KEY=value (quote values with spaces), or start the line with # for a comment",
            ))  # fmt: skip
        elif binding.key is not None:
            values[binding.key] = "" if binding.value is None else binding.value
    return values, errors


def read_env_file(path: Path, label: str) -> tuple[dict[str, str], list[ConfigFileError]]:
    """Key/value pairs of the settings file at PATH (shown as LABEL) and its bad lines; an unusable file raises."""
    return parse(decode(read_bytes(path, label), label), label)
