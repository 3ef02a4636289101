"""`strategy validate`, `resolve` and `explain`: exit codes 0 / 1 / 2 and located errors on stderr."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import PADDLE_FILES, PADDLE_FIXTURES, PADDLE_IMPLEMENTED_CASES, ROOT, explain_rows


def strategy_cli(*args: str, cwd=None, stdin: str | None = None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "strategy", *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd, input=stdin, env=env)


def test_validate_accepts_paddles_files_that_use_what_is_implemented():
    files = [str(p) for p in PADDLE_FILES if p.stem in PADDLE_IMPLEMENTED_CASES]
    result = strategy_cli("validate", *files)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": ok") == 9


def test_validate_accepts_every_paddle_file_under_the_warn_policy():
    result = strategy_cli("validate", *map(str, PADDLE_FILES), "--policy", "warn")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": ok") == len(PADDLE_FILES) == 18


def test_validate_names_each_not_implemented_setting_on_its_own_line():
    path = PADDLE_FIXTURES / "llama_tp2_sp.prototxt"
    # Paddle picks sequence parallelism by layer class; here the strategy says it, and its two flags require it.
    result = strategy_cli("validate", str(path))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"{path}:16:5: hybrid_configs.mp_configs.recompute_allgather requires hybrid_configs.mp_configs.sequence_parallel: true",
        f"{path}:17:5: hybrid_configs.mp_configs.sp_async_reduce_scatter requires hybrid_configs.mp_configs.sequence_parallel: true",
    ]
    result = strategy_cli("validate", str(path), "--set", "hybrid_configs.mp_configs.sequence_parallel=true")
    assert result.returncode == 0, result.stderr  # with the switch, everything it sets is implemented


def test_validate_names_each_not_implemented_setting_at_its_line(write):
    path = write("legacy.prototxt", "localsgd: true\nsync_batch_norm: true\namp: true\namp_configs { use_optimizer_fp16: true }\n")
    result = strategy_cli("validate", str(path))
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [f"{path}:{n}" for n in ("1:1", "2:1", "4:15")]
    assert lines[1].endswith("sync_batch_norm = true is not implemented by this project; convert the model with "
                             "torch.nn.SyncBatchNorm.convert_sync_batchnorm(model, process_group=hcg.dp_group)")


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


def test_usage_errors_exit_2(capsys):
    from strategy.cli import main

    for argv in (["validate"], ["frobnicate"]):  # (in this process: argparse's usage errors exit 2)
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2, argv
    assert "usage: strategy" in capsys.readouterr().err
    assert strategy_cli("validate").returncode == 2  # and as a command


def test_resolve_prints_effective_settings_and_notes(write):
    path = write("a.prototxt", "hybrid_configs { mp_degree: 2 mp_configs { mp_skip_c_identity: true } }")
    result = strategy_cli("resolve", str(path), "--world-size", "2", "--policy", "warn")
    assert result.returncode == 0, result.stderr
    assert "mp.skip_c_identity: false" in result.stdout
    assert "note: hybrid_configs.mp_configs.mp_skip_c_identity is set but has no effect: requires" in result.stdout
    assert "strategy: warning: " in result.stderr


def test_field_comments_from_the_proto_reach_the_cli_help():
    result = strategy_cli("resolve", "--help")
    assert result.returncode == 0
    assert "hybrid_configs.mp_configs.mp_skip_c_identity (default false)" in result.stdout
    assert "Requires mp_async_allreduce" in result.stdout


def test_validate_reads_standard_input():
    result = strategy_cli("validate", "-", "--from", "yaml", stdin="hybrid_configs: {mp_degre: 2}\n")
    assert result.returncode == 1
    assert result.stderr.strip() == "<stdin>:1:18: unknown field hybrid_configs.mp_degre; did you mean 'mp_degree'?"


def test_validate_missing_file_exits_1_without_traceback(tmp_path):
    result = strategy_cli("validate", str(tmp_path / "nope.yaml"))
    assert result.returncode == 1
    assert result.stderr.strip() == f"{tmp_path / 'nope.yaml'}: cannot read the file: No such file or directory"


def test_validate_applies_overrides_and_policy(write):
    path = write("a.prototxt", "hybrid_configs { mp_degree: 2 mp_configs { mp_skip_c_identity: true } }")
    assert strategy_cli("validate", str(path), "--world-size", "2").returncode == 1
    assert strategy_cli("validate", str(path), "--world-size", "2", "--policy", "warn").returncode == 0
    fixed = strategy_cli("validate", str(path), "--world-size", "2", "--set", "hybrid_configs.mp_configs.mp_async_allreduce=true")
    assert fixed.returncode == 0, fixed.stderr


def test_explain_shows_values_sources_effects_and_groups(write):
    path = write("a.prototxt", "hybrid_configs { mp_degree: 2 mp_configs { mp_skip_c_identity: true } }")
    result = strategy_cli("explain", str(path), "--world-size", "4", "--all")
    assert result.returncode == 0, result.stderr
    rows = explain_rows(result.stdout)
    assert rows["hybrid_configs.dp_degree"] == ["-1", "default", "inferred: 2"]
    assert rows["hybrid_configs.mp_configs.mp_skip_c_identity"] == [
        "true", "set", "no effect: requires hybrid_configs.mp_configs.mp_async_allreduce: true"]
    assert rows["hybrid_configs.mp_configs.mp_async_allreduce"] == ["false", "default", "off"]
    assert "rule broken: hybrid_configs.mp_configs.mp_skip_c_identity requires" in result.stdout
    assert "  mp groups: [0, 1] [2, 3]" in result.stdout
    assert "  dp groups: [0, 2] [1, 3]" in result.stdout


def test_explain_says_when_mp_degree_1_disables_a_flag(write):
    path = write("a.yaml", "hybrid_configs: {dp_degree: 1, mp_configs: {mp_async_allreduce: true}}")
    result = strategy_cli("explain", str(path))
    lines = result.stdout.splitlines()
    at = next(k for k, l in enumerate(lines) if l.startswith("hybrid_configs.mp_configs.mp_async_allreduce"))
    assert lines[at].split(None, 3)[1:] == ["true", "set", "no effect:"]  # the reason continues below the row
    assert lines[at + 1].strip() == "hybrid_configs.mp_degree is 1"


def test_every_subcommand_has_help_with_an_example(capsys):
    from strategy.cli import main

    for command in ["convert", "validate", "resolve", "explain", "diff", "schema", "docs", "defaults", "migrate-env", "fmt"]:
        with pytest.raises(SystemExit) as e:  # (in this process: argparse's help exits 0)
            main([command, "--help"])
        out = capsys.readouterr().out
        assert e.value.code == 0, command
        assert "example:\n  strategy " in out or "example:\n  Flags_" in out, command
    result = strategy_cli("checkpoint", "--help")  # the runtime's command, through its entry point
    assert result.returncode == 0 and "example:\n  strategy " in result.stdout


def test_the_example_strategies_are_valid_and_formatted():
    files = sorted(str(p) for p in (ROOT / "examples" / "strategies").glob("*.prototxt"))
    assert len(files) == 11
    result = strategy_cli("validate", *files)
    assert result.returncode == 0, result.stderr
    assert strategy_cli("fmt", "--check", *files).returncode == 0


def test_validate_names_the_file_for_errors_found_when_resolving(write):
    path = write("moe.prototxt", "hybrid_configs { sharding_degree: 3 ep_degree: 2 moe_sharding_degree: 2 }\n")
    result = strategy_cli("validate", str(path))
    assert result.returncode == 1
    assert result.stderr.startswith(f"{path}:1:50: moe_sharding_degree 2 does not divide sharding_degree 3: dense "
                                    "sharding is split into moe_sharding × the rest")


def test_a_world_size_below_1_is_a_usage_error(write):
    path = write("a.prototxt", "")
    assert strategy_cli("validate", str(path), "--world-size", "0").returncode == 2


def test_the_warn_policy_warns_once_per_problem(write):
    path = write("w.prototxt", "hybrid_configs { mp_configs { mp_skip_c_identity: true } }\n")
    result = strategy_cli("resolve", str(path), "--policy", "warn")
    assert result.returncode == 0
    assert result.stderr.count("strategy: warning:") == 1
    assert f"{path}:1:31:" in result.stderr


def test_validate_reports_every_problem_in_a_file_not_just_the_first(write):
    path = write("many.prototxt", """hybrid_configs {
  mp_degre: 2
  dp_degree: 0
  mp_configs {
    sync_mode: "avg"
    mp_skip_c_identity: true
    mp_async_allreduse: true
  }
}
""")
    result = strategy_cli("validate", str(path), "--set", "hybrid_configs.pp_degre=1")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"{path}:2:3: unknown field hybrid_configs.mp_degre; did you mean 'mp_degree'?",
        f"{path}:3:3: hybrid_configs.dp_degree must be >= 1, or -1 to infer it; got 0",
        f"{path}:5:5: hybrid_configs.mp_configs.sync_mode must be one of \"broadcast\", \"average\"; got \"avg\"; did you mean 'average'?",
        f"{path}:6:5: hybrid_configs.mp_configs.mp_skip_c_identity requires hybrid_configs.mp_configs.mp_async_allreduce: true",
        f"{path}:7:5: unknown field hybrid_configs.mp_configs.mp_async_allreduse; did you mean 'mp_async_allreduce'?",
        "--set hybrid_configs.pp_degre=1: unknown field: hybrid_configs has no field 'pp_degre'; did you mean 'pp_degree'?",
    ]
