"""The package's layout holds: no import circles, analysis and nccllog stages import only earlier stages, no module
imports another's underscore names, every C source lives in nsyskit/native."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "nsyskit"
# Stages in the order data flows; a module may import its own stage and the ones before it, never a later one.
STAGES = {"analysis": ("read", "compute", "judge", "present"), "nccllog": ("scan", "tables", "render")}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py") if not p.is_symlink()}


def imports(path: Path, name: str, known: set[str]) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import statement, at any depth (lazy ones too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [alias.name for alias in node.names]
            submodules = [f"{base}.{n}" for n in names if f"{base}.{n}" in known]
            found += [(m, []) for m in submodules] or [(base, names)]
    return [(m, names) for m, names in found if m.split(".")[0] == "nsyskit"]


GRAPH = {name: imports(path, name, set(modules())) for name, path in modules().items()}


def stage_of(module: str) -> tuple[str, int] | None:
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] in STAGES and parts[2] in STAGES[parts[1]]:
        return parts[1], STAGES[parts[1]].index(parts[2])
    return None


def test_no_import_circle():
    known = set(GRAPH)
    edges = {m: {t for t, _ in GRAPH[m] if t in known and t != m} for m in known}
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                pytest.fail("import circle: " + " -> ".join([*path[path.index(target) :], target]))
            if target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(known):
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("package", sorted(STAGES))
def test_stages_import_only_earlier_stages(package):
    wrong = []
    for module, targets in GRAPH.items():
        own = stage_of(module)
        if not module.startswith(f"nsyskit.{package}.") or module.count(".") < 2:
            continue
        for target, _ in targets:
            theirs = stage_of(target)
            later = theirs is not None and theirs[0] == package and theirs[1] > own[1] if own else False
            facade = target == f"nsyskit.{package}" or target.startswith(f"nsyskit.{package}.") and target.count(".") == 2 and theirs is None
            if own and (later or facade):
                wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_no_module_imports_another_modules_private_names():
    private = [
        f"{module} imports {target}.{name}"
        for module, targets in GRAPH.items()
        for target, names in targets
        for name in names
        if name.startswith("_") and not name.startswith("__") and target != module
    ]
    assert private == []


def test_every_c_source_lives_in_native():
    sources = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.c"))
    assert sources and all(s.startswith("native/") for s in sources), sources


def test_cli_uses_only_the_analysis_facade():
    inner = [
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if module.startswith("nsyskit.cli")
        for target, _ in targets
        if stage_of(target) or target.startswith("nsyskit.analysis.profilers")
    ]
    assert inner == []


MAX_MODULE_LINES = 400  # one concern per module: past this, a module holds two


def test_no_module_is_over_400_lines():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these modules (one concern each): {long}"


MAX_ANALYSIS_ROOT_MODULES = 6  # the facade and the process's settings; the rest lives in stage packages or mapreduce/


def test_analysis_root_keeps_a_small_facade():
    root = sorted(p.name for p in (PACKAGE / "analysis").glob("*.py") if p.name != "__init__.py")
    assert len(root) <= MAX_ANALYSIS_ROOT_MODULES, f"move these into a package of analysis/: {root}"
