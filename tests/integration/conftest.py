"""Fixtures of the integration tests (tests/integration is on sys.path: rootdir-relative imports)."""

from fixtures.unprivileged import world_dir  # noqa: F401  (a fixture: a folder an unprivileged user can use)
