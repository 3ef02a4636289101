"""The `strategy` command: validate and resolve, with exit codes 0 / 1 / 2 and located errors on stderr."""

from __future__ import annotations

import subprocess
import sys

from conftest import PADDLE_FIXTURES


def strategy_cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "strategy", *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_validate_accepts_paddles_files():
    files = sorted(str(p) for p in PADDLE_FIXTURES.iterdir() if p.suffix in (".prototxt", ".json", ".binpb"))
    result = strategy_cli("validate", *files)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": ok") == 9


def test_validate_reports_every_bad_file_and_exits_1(write):
    bad1 = write("a.prototxt", "hybrid_configs { mp_degre: 2 }")
    bad2 = write("b.yaml", "hybrid_configs: {mp_configs: {mp_skip_c_identity: true}}")
    good = write("c.json", '{"hybrid_configs": {"mp_degree": 2}}')
    result = strategy_cli("validate", str(bad1), str(good), str(bad2), "--world-size", "2")
    assert result.returncode == 1
    assert f"{bad1}:1:18: unknown field hybrid_configs.mp_degre; did you mean 'mp_degree'?" in result.stderr
    assert f"{bad2}:1:31: hybrid_configs.mp_configs.mp_skip_c_identity requires" in result.stderr
    assert f"{good}: ok" in result.stdout
    assert "Traceback" not in result.stderr


def test_validate_checks_the_degrees_against_the_world_size(write):
    path = write("a.prototxt", "hybrid_configs { dp_degree: 1 mp_degree: 2 }")
    assert strategy_cli("validate", str(path), "--world-size", "2").returncode == 0
    result = strategy_cli("validate", str(path), "--world-size", "4")
    assert result.returncode == 1
    assert "multiply to 2, but the world size is 4" in result.stderr


def test_usage_errors_exit_2():
    assert strategy_cli("validate").returncode == 2
    assert strategy_cli("frobnicate").returncode == 2


def test_resolve_prints_effective_settings_and_notes(write):
    path = write("a.prototxt", "hybrid_configs { mp_degree: 2 mp_configs { mp_skip_c_identity: true } }")
    result = strategy_cli("resolve", str(path), "--world-size", "2", "--policy", "warn")
    assert result.returncode == 0, result.stderr
    assert "mp.skip_c_identity: False" in result.stdout
    assert "note: hybrid_configs.mp_configs.mp_skip_c_identity is set but has no effect: requires" in result.stdout
    assert "StrategyWarning" in result.stderr


def test_field_comments_from_the_proto_reach_the_cli_help():
    result = strategy_cli("resolve", "--help")
    assert result.returncode == 0
    assert "hybrid_configs.mp_configs.mp_skip_c_identity (default false)" in result.stdout
    assert "Requires mp_async_allreduce" in result.stdout
