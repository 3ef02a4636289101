"""Shared test helpers: the Paddle fixtures and a writer for small strategy files."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import Phase, settings

# Hypothesis's explain phase traces every line it runs (sys.settrace, on Python < 3.12): a failure found late in
# a property test was cut off mid-trace by the test's timeout, with the tracer left on for the tests after it.
# Without it a failure is still shrunk and reported with its example.
settings.register_profile("suite", phases=tuple(p for p in Phase if p is not Phase.explain))
settings.load_profile("suite")

ROOT = Path(__file__).resolve().parent.parent
# The packages under test from src/ on the path, found before tests/strategy/ and tests/parallel/, which would
# otherwise be taken for namespace packages of those names (the editable install's finder comes after the path's).
sys.path.insert(0, str(ROOT / "src"))
# tests/ mirrors src/ (tests/strategy/<package>/, tests/parallel/<axis>/, tests/examples/): the shared helpers here
# (distributed, rank_helpers, ...) and each feature's rank-side cases module are imported by name from any folder,
# and by the spawned ranks, which inherit this path.
for _folder in sorted({p.parent for p in Path(__file__).parent.rglob("*.py")} - {Path(__file__).parent / "fixtures"}):
    if "fixtures" not in _folder.parts and str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
# `make test-long` (STRATEGY_TESTS_LONG=1): the tests marked `long` too (the same check at more layouts), and every
# property test at its full number of examples (tests/strategies.py's `examples`); `make test` runs the rest.
LONG = os.environ.get("STRATEGY_TESTS_LONG") == "1"


def pytest_collection_modifyitems(config, items):
    if LONG:
        return
    kept = [item for item in items if item.get_closest_marker("long") is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("long") is not None])
        items[:] = kept


PADDLE_FIXTURES = ROOT.parent / "shared" / "fixtures" / "paddle"
PADDLE_CASES = sorted(p.stem for p in PADDLE_FIXTURES.glob("*.prototxt"))
PADDLE_SCHEMA = PADDLE_FIXTURES / "paddle-3.3.1-schema.json"  # schema facts, not a strategy file
# Every strategy file Paddle wrote, in its three encodings.
PADDLE_FILES = sorted(p for p in PADDLE_FIXTURES.iterdir() if p.suffix in (".prototxt", ".json", ".binpb") and p != PADDLE_SCHEMA)
# The cases that set only what this project implements: they resolve under the strict policy.
PADDLE_IMPLEMENTED_CASES = ["dp2_tp2_sync_average", "tp2_async_skip", "tp2_defaults"]


def assert_parity(result: dict, *, attention: str | None = None) -> None:
    """A rank-side parity case's losses and clipped norms against one process's (`ref_losses`, `ref_norms`), and the
    attention the model ran through (sep's, cp's) when `attention` names it."""
    assert result["losses"] == pytest.approx(result["ref_losses"], rel=1e-5)  # (sep, cp: the shares sum to the loss)
    assert result["norms"] == pytest.approx(result["ref_norms"], rel=1e-5)
    if attention is not None:
        assert result["attention"] == attention


def explain_rows(text: str) -> dict[str, list[str]]:
    """`strategy explain`'s field table: path -> [value, source, effect], an effect folded onto the lines below its row
    joined back (a value folded under its column is not)."""
    rows: dict[str, list[str]] = {}
    row: list[str] = []
    for line in text.split("\n\n", 1)[0].splitlines()[1:]:
        if line.startswith(" "):
            row[2] = f"{row[2]} {line.strip()}".lstrip()
        else:
            row = rows[line.split()[0]] = (line.split(None, 3)[1:] + [""])[:3]
    return rows


@pytest.fixture
def write(tmp_path: Path):
    """write(name, text_or_bytes) -> path of a new file in a temporary folder."""

    def _write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path

    return _write


@pytest.fixture(scope="session")
def pools():
    """pools(n) -> a RankPool of n gloo ranks; `.run(fn, *args)` runs fn on every rank."""
    from distributed import Pools

    session_pools = Pools()
    yield session_pools
    session_pools.close()
