"""Test helper: a C helper's tests run with it built, the C compiler installed first on a machine without one."""

from __future__ import annotations

from nsyskit import hostpkgs


def require_built(module, looked_up, name: str) -> None:
    """Assert the C helper `looked_up()` (cached in `module._loaded`) is built; on a machine without a C compiler the
    host step sqlite-ext installs one first, so CI never skips a helper's tests."""
    if looked_up() is None and hostpkgs.can_install():
        hostpkgs.install("sqlite-ext")
        module._loaded.clear()
    assert looked_up() is not None, f"{name} could not be built: install a C compiler (cc)"


def do_without(monkeypatch, module, looked_up) -> None:
    """The C helper `looked_up()` absent, as on a machine without a compiler (the module's DISABLE_VARIABLE=0)."""
    monkeypatch.setattr(module, "_loaded", [])
    monkeypatch.setenv(module.DISABLE_VARIABLE, "0")
    assert looked_up() is None
