"""`strategy import`, driven as a real command: the strategy on stdout or OUT, the report on stderr, exit codes."""

from __future__ import annotations

import json
import os

import strategy
from strategy.importers import import_config
from test_cli_check import strategy_cli
from test_import_fixtures import FOREIGN, MORE

ZERO2 = FOREIGN / "deepspeed" / "hiyouga__LLaMA-Factory__examples__deepspeed__ds_z2_config.json"
MIXTRAL = FOREIGN / "megatron" / "NVIDIA__Megatron-LM__examples__mixtral__train_mixtral_8x7b_distributed.sh"


def test_the_strategy_goes_to_stdout_as_prototxt_and_the_report_to_stderr_one_line_per_entry():
    result = strategy_cli("import", str(ZERO2), "--world-size", "8")
    assert result.returncode == 0, result.stderr
    s = strategy.loads(result.stdout)
    assert (s.hybrid_configs.sharding_degree, s.hybrid_configs.sharding_configs.stage) == (8, 2)
    lines = result.stderr.splitlines()
    arrows = [line for line in lines if "->" in line]
    assert len(arrows) == len(import_config(ZERO2, world_size=8).entries) == 20
    assert "zero_optimization.stage = 2 -> hybrid_configs.dp_degree, hybrid_configs.sharding_degree, " \
           "hybrid_configs.sharding_configs.stage" in lines
    assert 'gradient_clipping = "auto" -> unresolved: "auto": the Trainer or accelerate fills it in at launch; the ' \
           "field keeps its default" in lines


# The file: 256 / (4 × 8) = 8 data ranks, ZeRO-3, no offloading.
ZERO3 = {"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8,
         "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "none"}, "offload_param": {"device": "none"}}}


def test_a_deepspeed_config_without_world_size_runs_on_the_data_ranks_its_batch_sizes_imply(write, tmp_path):
    out = tmp_path / "out.prototxt"
    result = strategy_cli("import", str(write("ds_zero3.json", json.dumps(ZERO3))), "-o", str(out))
    assert result.returncode == 0, result.stderr
    hybrid = strategy.load(out).hybrid_configs
    assert (hybrid.dp_degree, hybrid.sharding_degree, hybrid.sharding_configs.stage) == (1, 8, 3)
    assert "world size 8 from train_batch_size / (train_micro_batch_size_per_gpu × gradient_accumulation_steps)" \
        in result.stderr
    explained = strategy_cli("explain", str(out), "--world-size", "8")
    assert explained.returncode == 0, explained.stderr
    stage = next(line for line in explained.stdout.splitlines() if line.startswith("hybrid_configs.sharding_configs.stage"))
    assert stage.split()[1] == "3" and "no effect" not in stage
    resolved = strategy.resolve(strategy.load(out), world_size=8)
    assert (resolved.sharding_degree, resolved.sharding.stage) == (8, 3)


def test_a_zero_stage_with_nothing_that_gives_the_world_size_is_exit_1_naming_world_size(write, tmp_path):
    out = write("out.json", '{"keep": "me"}')
    path = write("ds.json", json.dumps({"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}))
    result = strategy_cli("import", str(path), "-o", str(out))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "zero_optimization.stage" in result.stderr and "pass --world-size" in result.stderr
    assert out.read_text() == '{"keep": "me"}'


def test_a_world_size_the_batch_sizes_contradict_is_exit_1_naming_both(write):
    result = strategy_cli("import", str(write("ds_zero3.json", json.dumps(ZERO3))), "--world-size", "4")
    assert result.returncode == 1 and result.stdout == ""
    assert "= 8 data ranks, so the world size is 8, not 4 (--world-size)" in result.stderr
    assert "pass --world-size 8 or leave it out" in result.stderr


def test_out_is_written_atomically_in_the_format_its_extension_names(tmp_path):
    out = tmp_path / "s.yaml"
    result = strategy_cli("import", str(MIXTRAL), "--world-size", "32", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    s = strategy.load(out)
    assert (s.hybrid_configs.pp_degree, s.hybrid_configs.ep_degree, s.pipeline_configs.accumulate_steps) == (4, 8, 32)
    assert os.listdir(tmp_path) == ["s.yaml"]


def test_the_kind_can_be_named_with_from(write):
    path = write("launch.txt", "python pretrain_gpt.py --micro-batch-size 2 --bf16\n")
    assert strategy_cli("import", str(path)).returncode == 1
    result = strategy_cli("import", str(path), "--from", "megatron")
    assert result.returncode == 0, result.stderr
    assert strategy.loads(result.stdout).amp_configs.use_pure_bf16


def test_the_file_named_by_an_accelerate_config_is_imported_relative_to_it():
    result = strategy_cli("import", str(MORE / "accelerate" / "config_yaml_templates" / "deepspeed.yaml"))
    assert result.returncode == 0, result.stderr
    assert "deepspeed_config.deepspeed_config_file.zero_optimization.stage = 1 -> " in result.stderr
    assert strategy.loads(result.stdout).hybrid_configs.sharding_configs.stage == 1


def test_malformed_input_is_exit_1_with_a_located_error_no_traceback_and_out_untouched(write, tmp_path):
    out = write("out.json", '{"keep": "me"}')
    cases = {
        "bad.json": ('{"zero_optimization": {"stage": 2,}}', ":1:"),
        "bad.toml": ("[parallelism]\ntensor_parallel_degree = \n", "bad.toml:2:"),
        "bad.yaml": ("distributed_type: FSDP\nfsdp_config: [unclosed\n", "bad.yaml:3:"),
        "deg.json": ('{\n  "tensor_parallel": {"autotp_size": "two"}\n}', "deg.json:2:"),
        "fit.sh": ("run --tensor-model-parallel-size 3\n", "fit.sh:1:5: tensor-model-parallel-size"),
    }
    for name, (text, where) in cases.items():
        path = write(name, text)
        result = strategy_cli("import", str(path), "--world-size", "8", "-o", str(out))
        assert result.returncode == 1, (name, result.stderr)
        assert where in result.stderr and "Traceback" not in result.stderr, (name, result.stderr)
        assert out.read_text() == '{"keep": "me"}'
    assert sorted(os.listdir(tmp_path)) == sorted([*cases, "out.json"])


def test_a_file_whose_kind_cannot_be_told_is_exit_1_listing_the_kinds(write):
    result = strategy_cli("import", str(write("model.yaml", "hidden_size: 4096\n")))
    assert result.returncode == 1
    assert "deepspeed, torchtitan, accelerate, megatron" in result.stderr


def test_usage_errors_exit_2(tmp_path):
    assert strategy_cli("import").returncode == 2
    assert strategy_cli("import", str(ZERO2), "--from", "colossal").returncode == 2
    assert strategy_cli("import", str(ZERO2), "--world-size", "0").returncode == 2


def test_an_unknown_output_extension_is_exit_1_and_nothing_is_written(tmp_path):
    result = strategy_cli("import", str(ZERO2), "-o", str(tmp_path / "s.toml"))
    assert result.returncode == 1 and "unknown extension '.toml'" in result.stderr
    assert os.listdir(tmp_path) == []


def test_the_mapping_table_is_printed_by_docs_imports():
    result = strategy_cli("docs", "--imports")
    assert result.returncode == 0, result.stderr
    assert "| `zero_optimization.stage` |" in result.stdout and "| `tensor-model-parallel-size` |" in result.stdout
