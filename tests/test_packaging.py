"""Packaging: the installed distribution is self-contained, and `strategy` never imports torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_import_strategy_does_not_import_torch(tmp_path):
    code = "import sys, strategy; strategy.resolve(strategy.loads('')); print('torch' in sys.modules)"
    result = run("-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_python_dash_m_strategy_runs(tmp_path):
    result = run("-m", "strategy", "--help", cwd=tmp_path)
    assert result.returncode == 0
    assert "validate" in result.stdout


@pytest.mark.timeout(300)
def test_a_plain_install_ships_the_generated_code_in_our_namespace(tmp_path):
    target = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(target), str(ROOT)],
        capture_output=True, text=True, timeout=280,
    )
    assert build.returncode == 0, build.stderr
    files = {p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()}
    for expected in ["strategy/py.typed", "parallel/py.typed", "strategy/_generated/distributed_strategy_pb2.pyi",
                     "strategy/_generated/distributed_strategy.desc"]:
        assert expected in files
    assert not any(f.startswith(("generated/", "distributed_strategy_pb2")) for f in files)
    sources = {p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src").rglob("*.py")}
    assert sources <= files, f"pyproject's packages leave out {sorted(sources - files)}"
    code = (
        "import strategy, sys; from strategy import schema; "
        "assert strategy.__file__.startswith(sys.argv[1]), strategy.__file__; "
        "print(schema.doc(strategy.MpConfig.DESCRIPTOR.fields_by_name['mp_async_allreduce'])[:14])"
    )
    result = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); " + code, str(target)],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Column-paralle"


def test_the_strategy_cli_imports_torch_only_for_the_checkpoint_command(tmp_path):
    path = tmp_path / "a.prototxt"
    path.write_text("hybrid_configs { mp_degree: 2 }\n")
    code = ("import sys; from strategy.cli import main; code = main(['validate', sys.argv[1]]); "
            "print(code, 'torch' in sys.modules, 'parallel' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip().splitlines()[-1] == "0 False False"
    listed = subprocess.run([sys.executable, "-m", "strategy", "--help"], capture_output=True, text=True, timeout=60)
    assert "checkpoint" in listed.stdout  # registered by parallel through the strategy.commands entry point
