"""`strategy.import_config` on real configs: the twelve shared ones and more it was not written from."""

from __future__ import annotations

import json
import re
import tomllib
import warnings
from pathlib import Path

import pytest
import yaml

import strategy
from conftest import ROOT
from strategy import schema
from strategy._generated.strategy_options_pb2 import IMPLEMENTED
from strategy.importers import STATUSES, import_config

FOREIGN = ROOT.parent / "shared" / "fixtures" / "foreign"
MORE = ROOT / "tests" / "fixtures" / "foreign_more"
SHARED_FILES = sorted(p for p in FOREIGN.rglob("*") if p.is_file() and p.name != "README.md")
MORE_FILES = sorted(p for p in MORE.rglob("*") if p.is_file() and p.name != "README.md")
ALL_FILES = SHARED_FILES + MORE_FILES
KIND_BY_SUFFIX = {".json": "deepspeed", ".toml": "torchtitan", ".yaml": "accelerate", ".yml": "accelerate",
                  ".sh": "megatron"}

# What each file means at a world size that fits it, as its tool runs it (degrees, stage, precision, batches).
EXPECTED: dict[str, tuple[int | None, dict[str, object]]] = {
    "hiyouga__LLaMA-Factory__examples__deepspeed__ds_z2_config.json": (8, {
        "hybrid_configs.dp_degree": 1, "hybrid_configs.sharding_degree": 8, "hybrid_configs.sharding_configs.stage": 2,
        "amp": False, "gradient_merge": False}),
    "hiyouga__LLaMA-Factory__examples__deepspeed__ds_z3_offload_config.json": (8, {
        "hybrid_configs.sharding_degree": 8, "hybrid_configs.sharding_configs.stage": 3}),
    "huggingface__accelerate__examples__deepspeed_config_templates__zero_stage1_config.json": (4, {
        "hybrid_configs.dp_degree": 1, "hybrid_configs.sharding_degree": 4, "hybrid_configs.sharding_configs.stage": 1,
        "amp": True, "amp_configs.dtype": "float16", "amp_configs.use_pure_fp16": True,
        "amp_configs.init_loss_scaling": 65536.0, "amp_configs.decr_ratio": 0.5, "amp_configs.incr_every_n_steps": 1000}),
    "huggingface__transformers__tests__deepspeed__ds_config_zero2.json": (4, {
        "hybrid_configs.sharding_degree": 4, "hybrid_configs.sharding_configs.stage": 2}),
    "microsoft__DeepSpeedExamples__training__pipeline_parallelism__ds_config.json": (8, {
        "hybrid_configs.dp_degree": 8, "hybrid_configs.sharding_degree": 1, "gradient_merge": True,
        "gradient_merge_configs.k_steps": 4, "gradient_merge_configs.avg": True}),  # 256 = 8 × 4 × 8
    "pytorch__torchtitan__torchtitan__models__llama3__train_configs__llama3_70b.toml": (64, {
        "hybrid_configs.mp_degree": 8, "hybrid_configs.dp_degree": 1, "hybrid_configs.sharding_degree": 8,
        "hybrid_configs.sharding_configs.stage": 3, "hybrid_configs.mp_configs.sequence_parallel": True,
        "recompute": True, "amp": True, "amp_configs.use_pure_bf16": True}),
    "pytorch__torchtitan__torchtitan__models__llama3__train_configs__debug_model.toml": (8, {
        "hybrid_configs.sharding_degree": 8, "hybrid_configs.sharding_configs.stage": 3, "recompute": False,
        "amp_configs.use_pure_bf16": True, "hybrid_configs.pp_degree": 1}),
    "huggingface__accelerate__examples__config_yaml_templates__fsdp.yaml": (None, {
        "hybrid_configs.dp_degree": 1, "hybrid_configs.sharding_degree": 2, "hybrid_configs.sharding_configs.stage": 3,
        "amp_configs.dtype": "bfloat16", "amp_configs.use_pure_bf16": True, "recompute": False}),
    "huggingface__trl__examples__accelerate_configs__deepspeed_zero3.yaml": (None, {
        "hybrid_configs.sharding_degree": 8, "hybrid_configs.sharding_configs.stage": 3,
        "amp_configs.use_pure_bf16": True}),
    "huggingface__trl__examples__accelerate_configs__context_parallel_2gpu.yaml": (None, {
        "hybrid_configs.cp_degree": 2, "hybrid_configs.dp_degree": 1, "hybrid_configs.sharding_degree": 1,
        "recompute": True, "amp_configs.use_pure_bf16": True}),
    "NVIDIA__Megatron-LM__examples__mixtral__train_mixtral_8x7b_distributed.sh": (32, {
        "hybrid_configs.pp_degree": 4, "hybrid_configs.ep_degree": 8, "hybrid_configs.dp_degree": 1,
        "hybrid_configs.sharding_degree": 8, "hybrid_configs.sharding_configs.stage": 1,
        "pipeline_configs.micro_batch_size": 1, "pipeline_configs.accumulate_steps": 32,  # 256 / (1 × 8)
        "amp_configs.use_pure_bf16": True, "hybrid_configs.mp_configs.sequence_parallel": False}),  # tp 1
    "NVIDIA__Megatron-LM__examples__llama__train_llama3_8b_h100_fp8.sh": (8, {
        "hybrid_configs.sharding_degree": 8, "hybrid_configs.sharding_configs.stage": 1,
        "gradient_merge_configs.k_steps": 16, "amp_configs.use_pure_bf16": True}),  # 128 / (1 × 8)
    "deepspeed.yaml": (None, {  # accelerate naming a DeepSpeed file
        "hybrid_configs.sharding_degree": 2, "hybrid_configs.sharding_configs.stage": 1, "amp_configs.use_pure_fp16": True,
        "amp_configs.init_loss_scaling": 65536.0, "amp_configs.decr_every_n_nan_or_inf": 2}),
    "zero_stage1_config.json": (2, {"hybrid_configs.sharding_degree": 2, "hybrid_configs.sharding_configs.stage": 1}),
    "tp_hsdp.yaml": (None, {
        "hybrid_configs.dp_degree": 2, "hybrid_configs.sharding_degree": 2, "hybrid_configs.mp_degree": 2,
        "hybrid_configs.sharding_configs.stage": 3, "amp_configs.use_pure_bf16": True}),
    "train_gpt3_175b_distributed.sh": (128, {
        "hybrid_configs.mp_degree": 8, "hybrid_configs.pp_degree": 16, "hybrid_configs.dp_degree": 1,
        "pipeline_configs.micro_batch_size": 1, "pipeline_configs.accumulate_steps": 1536,
        "amp_configs.use_pure_fp16": True, "amp_configs.init_loss_scaling": 4294967296.0}),
    "train_llama3_8b_fsdp_h100_fp8.sh": (16, {
        "hybrid_configs.sharding_degree": 16, "hybrid_configs.sharding_configs.stage": 3,
        "gradient_merge_configs.k_steps": 8, "amp_configs.use_pure_bf16": True}),
    "deepseek_v3_16b.toml": (8, {
        "hybrid_configs.ep_degree": 8, "hybrid_configs.sharding_degree": 8, "hybrid_configs.sharding_configs.stage": 3,
        "amp_configs.use_pure_bf16": True}),
    "llama4_17bx128e.toml": (64, {  # pp 4: FSDP never reshards after forward, so stage 2
        "hybrid_configs.mp_degree": 8, "hybrid_configs.pp_degree": 4, "hybrid_configs.sharding_degree": 2,
        "hybrid_configs.sharding_configs.stage": 2, "pipeline_configs.micro_batch_size": 1,
        "pipeline_configs.accumulate_steps": 1, "pipeline_configs.schedule_mode": "1F1B", "recompute": True}),
}


def _id(path: Path) -> str:
    return path.name


def _value(s: strategy.DistributedStrategy, dotted: str) -> object:
    node: object = s
    for name in dotted.split("."):
        node = getattr(node, name)
    return node


def _kind(path: Path) -> str:
    return KIND_BY_SUFFIX[path.suffix]


def _flat(value: object, prefix: str = "") -> list[str]:
    if isinstance(value, dict) and value:
        return [k for key, item in value.items() for k in _flat(item, f"{prefix}.{key}" if prefix else key)]
    return [prefix]


def _leaf_keys(path: Path) -> list[str]:
    """The file's leaf keys, read by the tools' own kind of parser (not the importer's)."""
    text = path.read_text()
    if path.suffix == ".json":
        return _flat(json.loads(text))
    if path.suffix == ".toml":
        return _flat(tomllib.loads(text))
    if path.suffix in (".yaml", ".yml"):
        data = yaml.safe_load(text)
        keys = _flat(data)
        named = data.get("deepspeed_config", {}).get("deepspeed_config_file")
        if named:  # the file it names follows its key
            at = keys.index("deepspeed_config.deepspeed_config_file") + 1
            keys[at:at] = [f"deepspeed_config.deepspeed_config_file.{k}" for k in _leaf_keys(path.parent / named)]
        return keys
    code = "\n".join(re.sub(r"(^|\s)#.*", "", line) for line in text.splitlines())
    return list(dict.fromkeys(m.group(1) for m in re.finditer(r"(?<![\w-])--([A-Za-z][\w-]*)", code)))


def test_the_shared_fixtures_are_the_twelve_of_the_readme_and_all_have_expectations():
    assert len(SHARED_FILES) == 12
    assert {p.name for p in ALL_FILES} == set(EXPECTED)


def _at_its_world(path: Path) -> strategy.Imported:
    return import_config(path, world_size=EXPECTED[path.name][0])


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_the_tool_is_told_from_the_file(path):
    assert _at_its_world(path).kind == _kind(path)


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_every_leaf_key_is_one_entry_in_file_order(path):
    keys = [e.key for e in _at_its_world(path).entries]
    assert keys == _leaf_keys(path) if path.suffix != ".sh" else sorted(keys) == sorted(_leaf_keys(path))


def _is_set(message, path: str) -> bool:
    """Whether the dotted field `path` is set in `message` (a list: not empty)."""
    *parents, last = path.split(".")
    for name in parents:
        if not message.HasField(name):
            return False
        message = getattr(message, name)
    field = message.DESCRIPTOR.fields_by_name[last]
    return len(getattr(message, last)) > 0 if field.is_repeated else message.HasField(last)


@pytest.mark.parametrize("with_world", [True, False], ids=["at_its_world_size", "without_one"])
@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_every_entry_says_what_became_of_it_and_mapped_ones_name_the_fields_they_set(path, with_world):
    world = EXPECTED[path.name][0] if with_world else None
    try:
        imported = import_config(path, world_size=world)
    except strategy.StrategyError:  # without its world size a file may not say enough (checked elsewhere)
        assert not with_world
        return
    for e in imported.entries + imported.assumed:
        assert e.status in STATUSES, e
        if e.status == "mapped":
            assert e.fields and all(_is_set(imported.strategy, f) for f in e.fields), e
        else:
            assert e.reason and not e.fields, e
        if e.value == "auto" and _kind(path) in ("deepspeed", "accelerate"):
            assert e.status == "unresolved", e
        assert "no rule for this key" not in e.reason, e  # every key of these files is known


@pytest.mark.parametrize("path", [p for p in ALL_FILES if _kind(p) in ("deepspeed", "accelerate")], ids=_id)
def test_auto_is_unresolved_whatever_the_key(path):
    entries = _at_its_world(path).entries
    autos = [e for e in entries if e.value == "auto"]
    assert all(e.status == "unresolved" and '"auto"' in e.reason for e in autos)
    # nothing else is left unresolved: what needs a world size it lacks is an error instead
    assert all(e.status != "unresolved" or e.value == "auto" for e in entries if _kind(path) == "deepspeed")


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_degrees_stages_and_precision_are_what_the_tool_runs(path):
    world, expected = EXPECTED[path.name]
    imported = import_config(path, world_size=world)
    got = {field: _value(imported.strategy, field) for field in expected}
    assert got == expected
    degrees = [_value(imported.strategy, f"hybrid_configs.{a}_degree") for a in ("dp", "mp", "pp", "sharding", "sep", "cp")]
    assert -1 not in degrees  # the world size is known: every degree is written
    product = 1
    for d in degrees:
        product *= d
    assert product == imported.world_size


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_without_a_world_size_a_file_imports_at_its_own_or_is_refused_naming_world_size(path):
    """Never a strategy that trains something else: the world size the file states (num_processes, torchrun's counts)
    or implies (DeepSpeed's batch sizes) is used as if passed; where something needs one and nothing gives it, the
    import stops and says --world-size."""
    try:
        alone = import_config(path)
    except strategy.StrategyError as e:
        assert "--world-size" in e.message, e.message
        return
    assert alone.world_size is not None  # each of these files that imports alone states its world size
    assert alone.strategy == import_config(path, world_size=alone.world_size).strategy


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
@pytest.mark.parametrize("fmt", strategy.FORMATS)
def test_the_imported_strategy_round_trips_through_every_format(path, fmt):
    s = import_config(path, world_size=EXPECTED[path.name][0]).strategy
    again = strategy.loads(strategy.dumps(s, format=fmt), format=fmt)
    assert again == s


def _not_implemented(path: str) -> bool:
    try:
        chain = schema.field_by_path(path)
    except (KeyError, ValueError, AttributeError):
        return False
    return any(schema.option(f, "support") != IMPLEMENTED for f in chain)


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_the_imported_strategy_resolves_at_its_world_size(path):
    """Strictly, unless it sets what this project does not implement yet (each error names such a field)."""
    imported = import_config(path, world_size=EXPECTED[path.name][0])
    try:
        resolved = strategy.resolve(imported.strategy, world_size=imported.world_size)
    except strategy.StrategyError as e:
        lines = str(e).splitlines()
        fields = [re.search(r"([a-z_]+(?:\.[a-z_]+)+)", line) for line in lines]
        assert all(m and _not_implemented(m.group(1)) for m in fields), str(e)
        with warnings.catch_warnings():  # "warn" resolves what is not implemented as its default (1 for a degree)
            warnings.simplefilter("ignore")
            strategy.resolve(imported.strategy, policy="warn")
        return
    assert resolved.world_size == imported.world_size


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_explain_shows_what_will_run(path):
    imported = import_config(path, world_size=EXPECTED[path.name][0])
    try:
        text = strategy.explain(imported.strategy, world_size=imported.world_size)
    except strategy.StrategyError as e:
        # explain counts an axis not implemented yet as 1, which then does not fill the world size (cp_degree 2 on 2
        # ranks).
        unimplemented = [f.name for f, v in imported.strategy.hybrid_configs.ListFields()
                         if f.name.endswith("_degree") and v > 1 and _not_implemented(f"hybrid_configs.{f.name}")]
        assert unimplemented, e
        return
    assert "hybrid_configs.dp_degree" in text and f"process groups for {imported.world_size} ranks" in text


def test_torchtitans_llama4_preset_runs_its_one_micro_batch_as_gpipe_and_says_what_it_costs():
    """Its pp 4 gets one micro-batch a step (local_batch_size 1, micro-batches of 1): fewer than 1F1B's stages, so the
    step runs as GPipe (what Paddle's 1F1B does with so few), with the bubble in the warning."""
    imported = import_config(MORE / "torchtitan" / "llama4_17bx128e.toml", world_size=64)
    assert (imported.strategy.hybrid_configs.pp_degree, imported.strategy.pipeline_configs.accumulate_steps) == (4, 1)
    with pytest.warns(strategy.StrategyWarning, match=r"pipeline_configs\.accumulate_steps = 1 is fewer micro-batches "
                                                      r"than the 4 stages of Schedule1F1B .* = 3/4 = 75% of each step"):
        resolved = strategy.resolve(imported.strategy, world_size=64)
    assert resolved.pipeline.schedule == "ScheduleGPipe"
