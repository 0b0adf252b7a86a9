"""The C helpers' one home: their sources (*.c, and *.h they share), built into the wheel, else compiled on first use.

A wheel carries each helper built (setup.py: `_<name>` libraries and `_built.json`, the sha256 of the source each
was built from), so an install needs no compiler and no writable home. Without one (an sdist built where no
compiler was, a source edited since the build, NSYSKIT_NATIVE_PREBUILT=0) the helper is compiled with `cc` once per
machine and cached in ~/.cache/nsyskit. Each caller keeps a pure-Python path that gives the same results: when
neither works, build() returns None and the caller uses it. The host step `sqlite-ext` (hostpkgs.py) installs the
compiler.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

COMPILE_TIMEOUT_S = 60


def source(name: str) -> str:
    """The C source `name`.c shipped in this package, the package's own headers written in (see with_headers)."""
    from importlib import resources

    folder = resources.files(__name__)
    return with_headers(folder.joinpath(f"{name}.c").read_text(), folder)


def with_headers(text: str, folder) -> str:
    """TEXT with each line '#include "x.h"' naming a header of FOLDER (a Path or a package's files) replaced by it:
    one self-contained source, compiled anywhere (a temporary folder), whose digest covers the headers too (setup.py
    records the same digest). Other includes stay."""
    import re

    def header(include: re.Match) -> str:
        path = folder.joinpath(include.group(1))
        return path.read_text().rstrip("\n") if path.is_file() else include.group(0)

    return re.sub(r'^#include "([\w.]+\.h)"$', header, text, flags=re.M)


PREBUILT_VARIABLE = "NSYSKIT_NATIVE_PREBUILT"  # 0: ignore the libraries built into the package (tests of the others)


def prebuilt(name: str, source: str) -> str | None:
    """The library built into the package from exactly this source, or None."""
    import hashlib
    import json
    import sysconfig

    if os.environ.get(PREBUILT_VARIABLE) == "0":
        return None
    folder = Path(__file__).resolve().parent
    library = folder / f"_{name}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    try:
        built = json.loads((folder / "_built.json").read_text())
    except (OSError, ValueError):
        return None
    if not library.exists() or built.get(name) != hashlib.sha256(source.encode()).hexdigest():
        return None
    return str(library)


def cache_folder(kind: str) -> Path:
    """Where compiled helpers of one kind are kept ($XDG_CACHE_HOME or ~/.cache, then nsyskit/<kind>)."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nsyskit" / kind


def build(name: str, source: str, kind: str, flags: tuple[str, ...] = ("-O2",)) -> str | None:
    """The shared library compiled from C `source` (built on first use, cached under a digest of the source, the
    flags and the platform; built atomically, as concurrent processes may build it at once), or None when it cannot
    be built here (no compiler, a missing header, an unwritable cache)."""
    shipped = prebuilt(name, source)
    if shipped:
        return shipped
    import hashlib  # here, not at the top: every start-up pays for the imports of its modules

    digest = hashlib.sha256((source + " ".join(flags) + sys.platform + os.uname().machine).encode()).hexdigest()[:16]
    cache = cache_folder(kind)
    target = cache / f"{name}-{digest}.so"
    if target.exists():
        return str(target)
    import shutil
    import subprocess
    import tempfile

    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not compiler:
        return None
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as work:
            source_file, built = Path(work) / f"{name}.c", Path(work) / f"{name}.so"
            source_file.write_text(source)
            done = subprocess.run(
                [compiler, *flags, "-shared", "-fPIC", "-o", str(built), str(source_file)],
                capture_output=True,
                timeout=COMPILE_TIMEOUT_S,
            )
            if done.returncode != 0 or not built.exists():
                return None
            os.replace(built, target)
    except (OSError, subprocess.SubprocessError):
        return None
    return str(target)


def load(loaded: list, name: str, disable_variable: str, signatures: dict[str, tuple]) -> tuple | None:
    """The functions of helper `name` (symbol -> (restype, argtypes)), typed, in that order; None when
    `disable_variable` is 0 or the helper cannot be built here. Looked for once: the answer is kept in `loaded`, the
    calling module's list (tests empty it to look again, or set [None] to do without)."""
    if not loaded:
        import ctypes

        found = None
        if os.environ.get(disable_variable) != "0":
            path = build(name, source(name), name)
            try:
                library = ctypes.CDLL(path) if path else None  # CDLL: the GIL is released during each call
                found = library and tuple(getattr(library, symbol) for symbol in signatures)
            except (OSError, AttributeError):
                found = None
        for function, (restype, argtypes) in zip(found or (), signatures.values(), strict=False):
            function.restype, function.argtypes = restype, argtypes
        loaded.append(found or None)
    return loaded[0]
