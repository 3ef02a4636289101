"""`strategy convert` and `strategy diff`, driven as a real command: lossless, atomic, diff(1) exit codes."""

from __future__ import annotations

import os

import pytest

import strategy
from conftest import PADDLE_FIXTURES
from test_cli_check import strategy_cli

FIXTURE = PADDLE_FIXTURES / "dp2_tp2_sync_average.prototxt"


@pytest.mark.parametrize("ext", ["json", "yaml", "binpb", "txtpb"])
def test_convert_is_lossless_through_every_format(tmp_path, ext):
    out = tmp_path / f"s.{ext}"
    result = strategy_cli("convert", str(FIXTURE), str(out))
    assert result.returncode == 0, result.stderr
    back = tmp_path / "back.prototxt"
    assert strategy_cli("convert", str(out), str(back)).returncode == 0
    assert back.read_text() == FIXTURE.read_text()
    assert sorted(os.listdir(tmp_path)) == sorted([out.name, back.name])


def test_convert_to_binary_reproduces_paddles_bytes(tmp_path):
    out = tmp_path / "s.pb"
    assert strategy_cli("convert", str(PADDLE_FIXTURES / "tp2_async_skip.json"), str(out)).returncode == 0
    assert out.read_bytes() == (PADDLE_FIXTURES / "tp2_async_skip.binpb").read_bytes()


def test_convert_between_stdin_and_stdout_with_flags():
    result = strategy_cli("convert", "-", "-", "--from", "yaml", "--to", "json", stdin="hybrid_configs: {mp_degree: 2}\n")
    assert result.returncode == 0, result.stderr
    assert strategy.loads(result.stdout, format="json").hybrid_configs.mp_degree == 2


def test_a_failed_convert_leaves_the_existing_output_untouched_and_no_debris(write, tmp_path):
    bad = write("bad.prototxt", "hybrid_configs {\n  mp_degre: 2\n}\n")
    out = write("out.json", '{"keep": "me"}')
    result = strategy_cli("convert", str(bad), str(out))
    assert result.returncode == 1
    assert result.stderr.strip() == f"{bad}:2:3: unknown field hybrid_configs.mp_degre; did you mean 'mp_degree'?"
    assert out.read_text() == '{"keep": "me"}'
    assert sorted(os.listdir(tmp_path)) == ["bad.prototxt", "out.json"]


def test_convert_to_an_unwritable_place_is_exit_1(tmp_path):
    result = strategy_cli("convert", str(FIXTURE), str(tmp_path / "missing-dir" / "s.json"))
    assert result.returncode == 1
    assert "cannot write the file" in result.stderr


def test_convert_usage_errors_exit_2(tmp_path):
    assert strategy_cli("convert", str(FIXTURE)).returncode == 2
    assert strategy_cli("convert", str(FIXTURE), str(tmp_path / "x.json"), "--to", "toml").returncode == 2


def test_convert_unknown_extension_is_exit_1(tmp_path):
    result = strategy_cli("convert", str(FIXTURE), str(tmp_path / "x.toml"))
    assert result.returncode == 1
    assert "unknown extension '.toml'" in result.stderr


def test_diff_of_the_same_strategy_in_two_formats_is_empty_and_exit_0():
    result = strategy_cli("diff", str(PADDLE_FIXTURES / "tp2_defaults.prototxt"), str(PADDLE_FIXTURES / "tp2_defaults.binpb"))
    assert (result.returncode, result.stdout) == (0, "")


def test_diff_treats_a_field_set_to_its_default_as_unset(write):
    a = write("a.prototxt", "hybrid_configs { mp_degree: 2 pp_degree: 1 mp_configs { sync_param: true } }")
    b = write("b.yaml", "hybrid_configs: {mp_degree: 2}")
    assert strategy_cli("diff", str(a), str(b)).returncode == 0


def test_diff_lists_differences_by_path_and_exits_1(write):
    a = write("a.prototxt", "hybrid_configs { mp_degree: 2 }")
    b = write("b.json", '{"hybrid_configs": {"mp_degree": 4, "mp_configs": {"sync_mode": "average"}}}')
    result = strategy_cli("diff", str(a), str(b))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "hybrid_configs.mp_degree: 2 -> 4",
        'hybrid_configs.mp_configs.sync_mode: "broadcast" -> "average"',
    ]


def test_diff_compares_files_that_break_a_requires_rule_and_says_so(write):
    a = write("a.prototxt", "hybrid_configs { mp_configs { mp_skip_c_identity: true } }")
    b = write("b.prototxt", "")
    result = strategy_cli("diff", str(a), str(b))
    assert result.returncode == 1
    assert "mp_skip_c_identity requires hybrid_configs.mp_configs.mp_async_allreduce: true (compared anyway)" in result.stderr


def test_diff_of_an_invalid_file_exits_2(write):
    a = write("a.prototxt", "hybrid_configs { nope: 1 }")
    result = strategy_cli("diff", str(a), str(FIXTURE))
    assert result.returncode == 2
    assert "unknown field hybrid_configs.nope" in result.stderr
