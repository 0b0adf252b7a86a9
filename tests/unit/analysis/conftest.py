"""Fixtures shared by the analysis tests: the real exports of ../shared/real-data."""

from real_exports import real_export, real_exports_dir  # noqa: F401  (fixtures)
