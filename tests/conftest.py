"""Shared test helpers: the Paddle fixtures and a writer for small strategy files."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PADDLE_FIXTURES = ROOT.parent / "shared" / "fixtures" / "paddle"
PADDLE_CASES = sorted(p.stem for p in PADDLE_FIXTURES.glob("*.prototxt"))


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
