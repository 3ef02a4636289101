"""The packages' layout: each subpackage imports only those below it, and no two modules import each other."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

import parallel
import strategy


class Package(NamedTuple):
    root: Path
    layers: tuple[str, ...]  # lowest first: a subpackage may import from those before it, never from those after
    leaves: tuple[str, ...]  # plain modules beside the subpackages, importing none of them
    top: tuple[str, ...] = ()  # plain modules that may import any of them


PACKAGES = {
    "parallel": Package(Path(parallel.__file__).parent,
                        ("topology", "tensor", "sharding", "pipeline", "sep", "cp", "experts", "training", "checkpoint",
                         "compose", "metrics", "tune"),
                        ("blocks", "introspect")),
    # formats above resolution: a loaded file is resolved, resolution never reads a file.
    "strategy": Package(Path(strategy.__file__).parent, ("schema", "resolution", "planning", "formats", "importers",
                                                         "tuning", "cli"),
                        ("errors", "atomic", "notes"), ("__main__",)),
}
ROOT = PACKAGES["parallel"].root  # what the helpers below read; each test sets it to the package it checks


@pytest.fixture(params=sorted(PACKAGES))
def package(request) -> Package:
    global ROOT
    ROOT = PACKAGES[request.param].root
    yield PACKAGES[request.param]
    ROOT = PACKAGES["parallel"].root


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


def test_every_module_lives_in_a_subpackage_or_is_a_leaf(package):
    loose = sorted(p.stem for p in ROOT.glob("*.py") if p.stem != "__init__")
    allowed = set(package.leaves) | set(package.top)
    assert set(loose) <= allowed, f"modules outside a subpackage: {sorted(set(loose) - allowed)}"
    assert {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()} == set(package.layers)


def test_subpackages_import_only_downwards_and_leaves_import_none(package):
    layers = package.layers
    for module, imported in _graph().items():
        layer = module.split(".")[0]
        if module in package.leaves:
            assert not {t for t in imported if t.split(".")[0] in layers}, f"{module} is a leaf but imports {imported}"
        if layer not in layers:
            continue
        for target in imported:
            other = target.split(".")[0]
            if other in layers:
                assert layers.index(other) <= layers.index(layer), f"{module} imports {target}, which is above it"
            assert other not in package.top, f"{module} imports {target}, which is above it"


def test_every_subpackage_says_what_it_is_for(package):
    for init in ROOT.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.splitlines()[0]) > 20, f"{init.relative_to(ROOT)} has no docstring saying what it is for"


def test_no_import_cycles(package):
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


def test_nothing_outside_training_reads_the_optimizer_wrappers_privates():
    """Checkpoints call HybridParallelOptimizer's own methods (stepped, master_weight, masters_restored, extra_state):
    a rename inside training/ cannot silently break resume."""
    import re

    for path in PACKAGES["parallel"].root.rglob("*.py"):
        if "training" in path.parts:
            continue
        text = path.read_text()
        assert not re.search(r"\._master\b|\._synced_version\b|\"_master\"|getattr\(\w+, \"optimizer\"", text), path


TESTS = Path(__file__).resolve().parent


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_a_features_tests_import_only_their_own_case_modules_and_the_shared_ones():
    """tests/ is laid out like the code: each folder's rank-side case modules serve that folder's tests; what several
    features share (spawning ranks, one-process parity, the small models, the examples' loops, the split-sequence
    cases) is a module at tests/ itself."""
    shared = {p.stem for p in TESTS.glob("*.py")}
    owner = {p.stem: p.parent for p in TESTS.rglob("*_cases.py") if p.parent != TESTS}
    wrong = [f"{path.relative_to(TESTS)} imports {name} ({owner[name].relative_to(TESTS)})"
             for path in TESTS.rglob("*.py") if path.parent != TESTS
             for name in _imported_modules(path) if name in owner and owner[name] != path.parent and name not in shared]
    assert not wrong, "\n".join(sorted(wrong))


def test_no_function_in_src_is_longer_than_60_lines():
    """A function a reader can hold at once (the house's limit); the generated code is protoc's."""
    src = TESTS.parent / "src"
    long = [f"{path.relative_to(src)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in src.rglob("*.py") if "_generated" not in path.parts
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60]
    assert not long, "\n".join(long)
