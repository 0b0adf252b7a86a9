"""Test helper: the real nsys SQLite exports of ../shared/real-data, decompressed once per session into tmp."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest
from fixtures.realdata import REAL_DATA, need

# ../shared/real-data (recorded by others), then the exports this project recorded on real GPUs (tests/data/real)
SHARED = REAL_DATA / "nsys-exports"
FOLDERS = (SHARED, Path(__file__).resolve().parents[2] / "data" / "real" / "nsys-exports")
PACKED = {p.name.removesuffix(".xz"): p for folder in FOLDERS for p in folder.glob("*.sqlite.xz")}
# Without ../shared its exports are one name, whose tests skip with the reason (fail where the data is required).
MISSING = "shared-real-exports"
NAMES = sorted(PACKED) + ([] if any(SHARED.glob("*.sqlite.xz")) else [MISSING])


def decompress(name: str, folder: Path) -> Path:
    """The export `name` decompressed into `folder` (reused when already there)."""
    if name not in PACKED:  # an export of ../shared that this checkout lacks (or the name standing for them)
        need(SHARED)
    target = folder / name
    if not target.exists():
        target.write_bytes(lzma.decompress(PACKED[name].read_bytes()))
    return target


@pytest.fixture(scope="session")
def real_exports_dir(tmp_path_factory) -> Path:
    """A session folder the real exports are decompressed into."""
    return tmp_path_factory.mktemp("real-exports")


@pytest.fixture(params=NAMES)
def real_export(request, real_exports_dir) -> Path:
    """Each real export in turn (decompressed)."""
    return decompress(request.param, real_exports_dir)
