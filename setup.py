"""Build hook: the C helpers of src/nsyskit/native compiled into the (platform) wheel, so an installed nsyskit gets
its fast paths with no compiler and no writable home at run time. Each is optional: where one cannot be built (no
compiler, no sqlite3ext.h), the install goes on and that helper is compiled on first use or its Python path runs.
The project's metadata is in pyproject.toml."""

import hashlib
import importlib.util
import json
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NATIVE = Path("src/nsyskit/native")
HELPERS = ("pagescan", "sweep", "linescan", "int64s", "launches", "groups", "texts", "rowscan", "jsonvals",
           "counterstats")  # fmt: skip
HEADERS = [str(path) for path in sorted(NATIVE.glob("*.h"))]  # included by helpers (launchprefix.h)


def _source(path: Path) -> str:
    """The text nsyskit.native.source() gives for the helper at PATH (its headers written in): what is digested."""
    spec = importlib.util.spec_from_file_location("_nsyskit_native", NATIVE / "__init__.py")
    native = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(native)
    return native.with_headers(path.read_text(), NATIVE)


class BuildHelpers(build_ext):
    """build_ext that records, beside the libraries, the sha256 of each source they were built from (a library whose
    source changed since, as in an editable install, is not used)."""

    def run(self) -> None:
        super().run()
        built = {}
        for ext in self.extensions:
            if Path(self.get_ext_fullpath(ext.name)).exists():
                built[ext.name.rpartition("._")[2]] = hashlib.sha256(_source(Path(ext.sources[0])).encode()).hexdigest()
        if self.extensions:
            record = Path(self.get_ext_fullpath(self.extensions[0].name)).parent / "_built.json"
            record.write_text(json.dumps(built, indent=1, sort_keys=True) + "\n")


setup(
    ext_modules=[
        Extension(f"nsyskit.native._{name}", [str(NATIVE / f"{name}.c")], depends=HEADERS, optional=True)
        for name in HELPERS
    ],
    cmdclass={"build_ext": BuildHelpers},
)
