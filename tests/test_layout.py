"""The runtime's layout: each subpackage imports only those below it, and no two modules import each other."""

from __future__ import annotations

import ast
from pathlib import Path

import parallel

ROOT = Path(parallel.__file__).parent
# Lowest first: a subpackage may import from those before it, never from those after.
LAYERS = ("topology", "tensor", "sharding", "pipeline", "sep", "training", "checkpoint", "compose")
LEAVES = ("blocks", "introspect")  # plain modules with no import of the package


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The package modules `path` imports (relative imports resolved), at any depth of the file."""
    here = _module(path).split(".") if _module(path) else []
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            target = base + (node.module.split(".") if node.module else [])
            for alias in node.names:
                candidate = ".".join(target + [alias.name])
                found.add(candidate if (ROOT / Path(*candidate.split("."))).with_suffix(".py").exists() else ".".join(target))
    return {m for m in found if m}


def _graph() -> dict[str, set[str]]:
    return {_module(p): _imports(p) for p in ROOT.rglob("*.py") if _module(p)}


def test_every_runtime_module_lives_in_a_subpackage_or_is_a_leaf():
    loose = sorted(p.stem for p in ROOT.glob("*.py") if p.stem != "__init__")
    assert set(loose) <= set(LEAVES), f"modules outside a subpackage: {sorted(set(loose) - set(LEAVES))}"
    assert {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()} == set(LAYERS)


def test_subpackages_import_only_downwards():
    for module, imported in _graph().items():
        layer = module.split(".")[0]
        if layer not in LAYERS:
            continue
        for target in imported:
            other = target.split(".")[0]
            if other in LAYERS:
                assert LAYERS.index(other) <= LAYERS.index(layer), f"{module} imports {target}, which is above it"


def test_no_import_cycles():
    graph = {m: {t for t in ts if t in _graph_keys()} - {m} for m, ts in _graph().items()}
    # Package __init__ files re-export their modules; a cycle through one is not a cycle between files.
    graph = {m: {t for t in ts if not _is_package(t)} for m, ts in graph.items() if not _is_package(m)}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def _graph_keys() -> set[str]:
    return {_module(p) for p in ROOT.rglob("*.py") if _module(p)}


def _is_package(module: str) -> bool:
    return (ROOT / Path(*module.split(".")) / "__init__.py").exists()
