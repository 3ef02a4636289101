"""`strategy schema`, `defaults` and `migrate-env`: documents generated from the schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema
import pytest
import yaml

import strategy
from hypothesis import given, settings

from conftest import PADDLE_FILES
from strategies import dicts, examples
from test_cli_check import strategy_cli


@pytest.fixture(scope="module")
def validator():
    result = strategy_cli("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", [p for p in PADDLE_FILES if p.suffix == ".json"], ids=lambda p: p.name)
def test_schema_accepts_every_valid_fixture(validator, path):
    errors = [e.message for e in validator.iter_errors(json.loads(path.read_text()))]
    if path.stem == "llama_tp2_sp":  # its two sequence-parallel flags require this project's switch
        assert errors == ["'sequence_parallel' is a required property"] * 2
    else:
        assert errors == []


@settings(max_examples=examples(50), deadline=None)
@given(dicts())
def test_schema_accepts_every_valid_strategy(validator, d):
    assert list(validator.iter_errors(d)) == []


@pytest.mark.parametrize(
    "doc",
    [
        {"hybrid_configs": {"mp_degre": 2}},
        {"hybrid_configs": {"mp_configs": {"mp_async_allreduse": True}}},
        {"hybridconfigs": {}},
        {"hybrid_configs": {"mp_degree": 0}},
        {"hybrid_configs": {"dp_degree": 0}},
        {"hybrid_configs": {"mp_degree": "2"}},
        {"hybrid_configs": {"mp_configs": {"sync_mode": "avg"}}},
        {"hybrid_configs": {"mp_configs": {"mp_fused_linear_param_grad_add": True}}},
    ],
)
def test_schema_rejects_typos_wrong_types_and_broken_rules(validator, doc):
    assert list(validator.iter_errors(doc)) != []
    with pytest.raises(strategy.StrategyError):
        strategy.from_dict(doc)  # the loader agrees


def test_schema_carries_the_field_comments_and_defaults(validator):
    mp = validator.schema["$defs"]["MpConfig"]["properties"]
    assert mp["sync_mode"]["enum"] == ["broadcast", "average"]
    assert mp["sync_mode"]["default"] == "broadcast"
    assert "all-reduce of the input gradient" in mp["mp_async_allreduce"]["description"]


@pytest.mark.parametrize("fmt", ["prototxt", "json", "yaml", "binary"])
def test_defaults_spell_out_every_field(fmt):
    raw = subprocess.run([sys.executable, "-m", "strategy", "defaults", "--to", fmt], capture_output=True, timeout=60)
    assert raw.returncode == 0, raw.stderr
    s = strategy.loads(raw.stdout, format=fmt)
    flat = strategy.to_dict(s)
    assert len(flat["hybrid_configs"]) == len(strategy.HybridConfig.DESCRIPTOR.fields) - 1 == 25  # order: a list, empty
    assert len(flat["hybrid_configs"]["mp_configs"]) == len(strategy.MpConfig.DESCRIPTOR.fields) - 1 == 12  # tp_plan: a list, empty
    assert flat["mode"] == "COLLECTIVE" and flat["a_sync"] is True and flat["amp_configs"]["decr_ratio"] == 0.8
    assert flat["hybrid_configs"]["dp_degree"] == -1 and flat["hybrid_configs"]["mp_configs"]["sync_param"] is True


def test_migrate_env_writes_every_legacy_flag_including_the_off_ones():
    env = {**os.environ, "Flags_mp_aysnc_allreduce": "TRUE", "Flags_fused_linear_param_grad_add": "1", "Flags_skip_mp_c_identity": "0"}
    result = strategy_cli("migrate-env", "--to", "yaml", env=env)
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout) == {"hybrid_configs": {"mp_configs": {
        "mp_async_allreduce": True, "mp_skip_c_identity": False, "mp_fused_linear_param_grad_add": True}}}


def test_migrate_env_merges_into_a_file_and_warns_about_a_broken_rule(write):
    path = write("tp.prototxt", "hybrid_configs { mp_degree: 2 }")
    env = {k: v for k, v in os.environ.items() if not k.startswith("Flags_")} | {"Flags_skip_mp_c_identity": "true"}
    result = strategy_cli("migrate-env", "--merge", str(path), env=env)
    assert result.returncode == 0
    with pytest.warns(strategy.StrategyWarning):
        s = strategy.loads(result.stdout, policy="warn")
    assert s.hybrid_configs.mp_degree == 2 and s.hybrid_configs.mp_configs.mp_skip_c_identity
    assert "mp_skip_c_identity requires hybrid_configs.mp_configs.mp_async_allreduce: true" in result.stderr


def test_schema_accepts_what_protobufs_json_mapping_writes_for_64_bit_and_infinite_numbers(validator):
    s = strategy.loads("amp_configs { init_loss_scaling: inf } downpour_table_param { table_id: 7 shard_num: 1000 }")
    written = json.loads(strategy.dumps(s, format="json"))
    assert written["downpour_table_param"][0]["table_id"] == "7" and written["amp_configs"]["init_loss_scaling"] == "Infinity"
    assert list(validator.iter_errors(written)) == []
    assert strategy.loads(strategy.dumps(s, format="json"), format="json") == s
