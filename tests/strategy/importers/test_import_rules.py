"""`strategy.import_config`'s rules, one behaviour per test, on small files written the way each tool writes them."""

from __future__ import annotations

import functools
import json

import pytest

import strategy
from strategy.importers import import_config, report


def entry(imported, key):
    return next(e for e in imported.entries if e.key == key)


@pytest.fixture
def imp(write):
    """imp(name, text, **import_config's arguments): a file written and imported."""
    def _imp(name: str, text: str, **kw):
        return import_config(write(name, text), **kw)
    return _imp


@pytest.fixture
def ds(imp):
    return lambda config, **kw: imp("ds_config.json", json.dumps(config, indent=2), **kw)


@pytest.fixture
def titan(imp):
    return functools.partial(imp, "train.toml")


@pytest.fixture
def acc(imp):
    return functools.partial(imp, "config.yaml")


@pytest.fixture
def meg(imp):
    return lambda args, **kw: imp("train.sh", f"torchrun pretrain_gpt.py {args}\n", kind="megatron", **kw)


# --- DeepSpeed --------------------------------------------------------------------------------------------------------

def test_a_zero_stage_with_nothing_that_gives_the_world_size_is_an_error_naming_world_size(ds):
    with pytest.raises(strategy.StrategyError) as e:
        ds({"zero_optimization": {"stage": 3}})
    assert (e.value.line, e.value.field) == (3, "zero_optimization.stage")
    assert "shards over every data rank" in e.value.message and "pass --world-size" in e.value.message
    assert "train_batch_size / (train_micro_batch_size_per_gpu × gradient_accumulation_steps)" in e.value.message


def test_the_three_batch_sizes_give_the_data_ranks_and_so_the_world_size(ds):
    imported = ds({"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8,
                   "zero_optimization": {"stage": 3}})
    hybrid = imported.strategy.hybrid_configs
    assert (imported.world_size, hybrid.dp_degree, hybrid.sharding_degree, hybrid.sharding_configs.stage) == (8, 1, 8, 3)
    e = entry(imported, "train_batch_size")
    assert e.status == "mapped" and "hybrid_configs.sharding_degree" in e.fields
    assert e.reason == "world size 8 from train_batch_size / (train_micro_batch_size_per_gpu × gradient_accumulation_steps)"
    assert imported.strategy.gradient_merge_configs.k_steps == 8


def test_the_data_ranks_the_batch_sizes_imply_are_multiplied_by_the_model_parallel_ones(ds):
    imported = ds({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
                   "tensor_parallel": {"autotp_size": 2}, "zero_optimization": {"stage": 1}})
    hybrid = imported.strategy.hybrid_configs
    assert (imported.world_size, hybrid.mp_degree, hybrid.sharding_degree) == (8, 2, 4)
    assert entry(imported, "train_batch_size").reason.endswith("× 2 ranks per model copy")


def test_a_world_size_the_batch_sizes_contradict_is_an_error_naming_both(ds):
    config = {"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8}
    assert ds(config, world_size=8).world_size == 8
    with pytest.raises(strategy.StrategyError) as e:
        ds(config, world_size=16)
    assert (e.value.line, e.value.field) == (2, "train_batch_size")
    assert "= 8 data ranks, so the world size is 8, not 16 (--world-size)" in e.value.message


def test_replicated_data_ranks_need_no_world_size_dp_degree_is_inferred(ds):
    hybrid = ds({"zero_optimization": {"stage": 0}, "bf16": {"enabled": True}}).strategy.hybrid_configs
    assert (hybrid.dp_degree, hybrid.HasField("sharding_degree")) == (-1, False)


def test_zero_over_every_data_rank_is_dp_1_and_sharding_the_data_ranks(ds):
    hybrid = ds({"zero_optimization": {"stage": 2}, "tensor_parallel": {"autotp_size": 2}}, world_size=8).strategy.hybrid_configs
    assert (hybrid.dp_degree, hybrid.mp_degree, hybrid.sharding_degree, hybrid.sharding_configs.stage) == (1, 2, 4, 2)


def test_stage_0_is_plain_data_parallelism(ds):
    imported = ds({"zero_optimization": {"stage": 0}}, world_size=4)
    assert (imported.strategy.hybrid_configs.dp_degree, imported.strategy.hybrid_configs.sharding_degree) == (4, 1)
    assert not imported.strategy.hybrid_configs.HasField("sharding_configs")


def test_mics_shards_within_groups_and_replicates_across_them(ds):
    hybrid = ds({"zero_optimization": {"stage": 3, "mics_shard_size": 4}}, world_size=16).strategy.hybrid_configs
    assert (hybrid.dp_degree, hybrid.sharding_degree) == (4, 4)


def test_the_global_batch_sets_the_accumulation_over_micro_batch_and_data_ranks(ds):
    imported = ds({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2}, world_size=4)
    assert entry(imported, "train_batch_size").fields == (
        "gradient_merge", "gradient_merge_configs.k_steps", "gradient_merge_configs.avg")
    assert imported.strategy.gradient_merge_configs.k_steps == 8
    assert entry(imported, "train_micro_batch_size_per_gpu").status == "no counterpart"


def test_a_global_batch_that_is_one_micro_batch_per_rank_has_no_counterpart(ds):
    imported = ds({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2}, world_size=4)
    assert entry(imported, "train_batch_size").status == "no counterpart"
    assert not imported.strategy.gradient_merge


def test_the_accumulation_from_the_global_batch_without_a_world_size_is_an_error_naming_world_size(ds):
    with pytest.raises(strategy.StrategyError) as e:
        ds({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2})
    assert e.value.field == "train_batch_size" and "pass --world-size" in e.value.message


def test_explicit_accumulation_is_mapped_and_a_consistent_global_batch_has_no_counterpart(ds):
    imported = ds({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8},
                  world_size=4)
    assert entry(imported, "gradient_accumulation_steps").status == "mapped"
    assert entry(imported, "train_batch_size").status == "no counterpart"
    assert imported.strategy.gradient_merge_configs.k_steps == 8


def test_batch_sizes_that_disagree_are_an_error_naming_them(ds, tmp_path):
    with pytest.raises(strategy.StrategyError) as e:
        ds({"train_batch_size": 60, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8}, world_size=4)
    assert e.value.line == 2 and e.value.field == "train_batch_size"
    assert "train_batch_size 60" in e.value.message and "gradient_accumulation_steps 8" in e.value.message


def test_fp16_brings_deepspeeds_loss_scaler_and_pure_fp16_weights(ds):
    configs = ds({"fp16": {"enabled": True, "initial_scale_power": 12, "hysteresis": 4}}).strategy.amp_configs
    assert (configs.dtype, configs.use_pure_fp16, configs.init_loss_scaling, configs.decr_every_n_nan_or_inf,
            configs.incr_every_n_steps, configs.decr_ratio) == ("float16", True, 4096.0, 4, 1000, 0.5)


def test_a_static_loss_scale_turns_dynamic_scaling_off_and_wins_over_the_power(ds):
    imported = ds({"fp16": {"enabled": True, "loss_scale": 128, "initial_scale_power": 16}})
    configs = imported.strategy.amp_configs
    assert (configs.use_dynamic_loss_scaling, configs.init_loss_scaling) == (False, 128.0)
    assert entry(imported, "fp16.initial_scale_power").status == "no counterpart"


def test_bf16_and_fp16_both_on_is_an_error(ds):
    with pytest.raises(strategy.StrategyError, match="different precisions"):
        ds({"fp16": {"enabled": True}, "bf16": {"enabled": True}})


def test_auto_is_unresolved_before_any_other_rule(ds):
    imported = ds({"gradient_clipping": "auto", "train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}})
    assert {e.status for e in imported.entries} == {"unresolved"}
    assert imported.strategy == strategy.DistributedStrategy()


@pytest.mark.parametrize("name, text, key", [
    ("ds.json", '{"zero_optimization": {"offload_optimizer": {"device": "none"}}}', "zero_optimization.offload_optimizer.device"),
    ("ds.json", '{"zero_optimization": {"offload_param": {"device": "none"}}}', "zero_optimization.offload_param.device"),
    ("ds.json", '{"zero_optimization": {"cpu_offload": false}}', "zero_optimization.cpu_offload"),
    ("config.yaml", "distributed_type: DEEPSPEED\ndeepspeed_config:\n  offload_optimizer_device: none\n",
     "deepspeed_config.offload_optimizer_device"),
    ("config.yaml", "distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: false\n", "fsdp_config.fsdp_offload_params"),
    ("train.toml", "[training]\nenable_cpu_offload = false\n", "training.enable_cpu_offload"),
])
def test_offloading_left_off_is_nothing_to_set(imp, name, text, key):
    e = entry(imp(name, text, world_size=8), key)
    assert (e.status, e.fields) == ("nothing to set", ())
    assert e.reason == "no offloading: parameters and optimizer state stay on the device, as here"


def test_offloading_to_cpu_or_nvme_has_no_counterpart(ds):
    imported = ds({"zero_optimization": {"offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "nvme"}}})
    for key in ("zero_optimization.offload_optimizer.device", "zero_optimization.offload_param.device"):
        e = entry(imported, key)
        assert e.status == "no counterpart" and "offloading to CPU or NVMe is not implemented" in e.reason


def test_clipping_has_no_counterpart_and_names_the_optimizers_argument(ds):
    assert "HybridParallelOptimizer(max_grad_norm=...)" in entry(ds({"gradient_clipping": 1.0}), "gradient_clipping").reason


def test_a_list_and_an_empty_table_are_one_leaf_each(ds):
    imported = ds({"optimizer": {"params": {"betas": [0.9, 0.95]}}, "tensorboard": {}})
    assert [(e.key, e.value) for e in imported.entries] == [("optimizer.params.betas", [0.9, 0.95]), ("tensorboard", {})]


def test_a_key_no_rule_knows_is_unresolved_not_dropped(ds):
    e = entry(ds({"brand_new_feature": True}), "brand_new_feature")
    assert e.status == "unresolved" and "no rule" in e.reason


def test_degrees_the_world_size_does_not_divide_are_a_located_error(ds):
    with pytest.raises(strategy.StrategyError) as e:
        ds({"tensor_parallel": {"autotp_size": 3}}, world_size=8)
    assert (e.value.line, e.value.field) == (3, "tensor_parallel.autotp_size")
    assert "the world size 8 (--world-size)" in e.value.message


def test_a_degree_that_is_not_a_number_is_a_located_error(ds):
    with pytest.raises(strategy.StrategyError) as e:
        ds({"zero_optimization": {"stage": "three"}})
    assert (e.value.line, e.value.column) == (3, 5)
    assert e.value.message == 'zero_optimization.stage: expected a whole number >= 0, got "three"'


def test_malformed_json_is_a_located_error(write):
    with pytest.raises(strategy.StrategyError) as e:
        import_config(write("ds.json", '{"train_batch_size": 8,\n "fp16": {"enabled": tru}}'))
    assert e.value.line == 2


# --- torchtitan ---------------------------------------------------------------------------------------------------------

def test_dp_shard_minus_one_takes_the_ranks_left_or_is_an_error_naming_world_size(titan):
    text = "[parallelism]\ndata_parallel_shard_degree = -1\ntensor_parallel_degree = 2\n"
    with pytest.raises(strategy.StrategyError) as e:
        titan(text)
    assert (e.value.line, e.value.field) == (2, "parallelism.data_parallel_shard_degree")
    assert "-1 takes the data ranks left" in e.value.message and "pass --world-size" in e.value.message
    hybrid = titan(text, world_size=16).strategy.hybrid_configs
    assert (hybrid.dp_degree, hybrid.mp_degree, hybrid.sharding_degree) == (1, 2, 8)


def test_torchtitans_default_fsdp_over_the_ranks_left_needs_the_world_size_and_says_it_is_the_default(titan):
    with pytest.raises(strategy.StrategyError, match=r"data_parallel_shard_degree: -1 \(torchtitan's default\) takes "
                                                     r"the data ranks left.*pass --world-size"):
        titan("[parallelism]\ntensor_parallel_degree = 2\n")
    hybrid = titan("[parallelism]\ndata_parallel_shard_degree = 2\n").strategy.hybrid_configs
    assert (hybrid.sharding_degree, hybrid.dp_degree) == (2, 1)  # explicit degrees need no world size


def test_replicate_times_shard_is_hsdp(titan):
    hybrid = titan("[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 4\n",
                   world_size=8).strategy.hybrid_configs
    assert (hybrid.dp_degree, hybrid.sharding_degree, hybrid.sharding_configs.stage) == (2, 4, 3)


def test_fsdp_under_a_pipeline_never_reshards_after_forward_by_default_so_stage_2(titan):
    imported = titan("[parallelism]\npipeline_parallel_degree = 2\n", world_size=8)
    assert imported.strategy.hybrid_configs.sharding_configs.stage == 2
    assumed = {e.key: e for e in imported.assumed}
    assert assumed["parallelism.fsdp_reshard_after_forward"].fields == ("hybrid_configs.sharding_configs.stage",)
    always = titan('[parallelism]\npipeline_parallel_degree = 2\nfsdp_reshard_after_forward = "always"\n', world_size=8)
    assert always.strategy.hybrid_configs.sharding_configs.stage == 3


@pytest.mark.parametrize("name, mode, virtual, dualpipev", [
    ("1F1B", "1F1B", 1, False), ("GPipe", "FThenB", 1, False), ("interleaved1f1b", "VPP", 2, False),
    ("LoopedBFS", "FThenB", 2, False), ("InterleavedZeroBubble", "ZBH1", 2, False), ("ZBVZeroBubble", "ZBVPP", 2, False),
    ("DualPipeV", "1F1B", 2, True)])
def test_pipeline_schedules_become_paddles_schedule_modes(titan, name, mode, virtual, dualpipev):
    s = titan(f'[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule = "{name}"\n'
              "[training]\nlocal_batch_size = 8\n", world_size=2).strategy
    assert (s.pipeline_configs.schedule_mode, s.hybrid_configs.pp_configs.virtual_pp_degree,
            s.hybrid_configs.pp_configs.use_dualpipev) == (mode, virtual, dualpipev)


def test_the_local_batch_is_cut_into_pipeline_micro_batches(titan):
    s = titan("[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_microbatch_size = 2\n"
              "[training]\nlocal_batch_size = 8\nglobal_batch_size = 32\n", world_size=4).strategy
    # 2 data ranks: 32 / (8 × 2) = 2 accumulation steps of 8 / 2 = 4 micro-batches each
    assert (s.pipeline_configs.micro_batch_size, s.pipeline_configs.accumulate_steps) == (2, 8)


def test_selective_activation_checkpointing_has_no_counterpart(titan):
    e = entry(titan('[activation_checkpoint]\nmode = "selective"\n', world_size=8), "activation_checkpoint.mode")
    assert e.status == "no counterpart" and "would change what is saved" in e.reason
    assert titan('[activation_checkpoint]\nmode = "full"\n', world_size=8).strategy.recompute


def test_tensor_parallelism_is_sequence_parallel_as_torchtitans_plan(titan):
    s = titan("[parallelism]\ntensor_parallel_degree = 4\n", world_size=8).strategy
    assert (s.hybrid_configs.mp_degree, s.hybrid_configs.mp_configs.sequence_parallel) == (4, True)


def test_expert_parallelism_is_carved_out_of_the_data_ranks(titan):
    s = titan("[parallelism]\nexpert_parallel_degree = 4\n", world_size=8).strategy
    assert (s.hybrid_configs.ep_degree, s.hybrid_configs.sharding_degree) == (4, 8)
    with pytest.raises(strategy.StrategyError, match="must divide the 2 ranks outside tensor and pipeline") as e:
        titan("[parallelism]\nexpert_parallel_degree = 4\ntensor_parallel_degree = 4\n", world_size=8)
    assert e.value.message.endswith("or keep each expert whole (parallelism.expert_tensor_parallel_degree = 1), and "
                                    "ep may span the tensor-parallel ranks too, up to the 8 ranks of a stage")


def test_experts_kept_whole_let_expert_parallelism_span_the_tensor_parallel_ranks(titan, imp):
    """torchtitan's and Megatron's expert tensor degree 1: ep over any rank of a pipeline stage, tp's included, which
    the runtime runs (experts are whole on every mp rank there); above 1 the split inside experts is said to be lost."""
    text = "[parallelism]\nexpert_parallel_degree = 4\ntensor_parallel_degree = 4\nexpert_tensor_parallel_degree = 1\n"
    imported = titan(text, world_size=8)
    h = imported.strategy.hybrid_configs
    assert (h.ep_degree, h.mp_degree, h.sharding_degree) == (4, 4, 2)
    assert "hybrid_configs.ep_degree" in entry(imported, "parallelism.expert_tensor_parallel_degree").fields
    resolved = strategy.resolve(imported.strategy, world_size=8)
    assert (resolved.ep_degree, resolved.mp_degree) == (4, 4)
    megatron = imp("args.txt", "--tensor-model-parallel-size 2 --expert-model-parallel-size 8 "
                   "--expert-tensor-parallel-size 1 --use-distributed-optimizer --bf16\n", kind="megatron", world_size=8)
    assert (megatron.strategy.hybrid_configs.ep_degree, megatron.strategy.hybrid_configs.mp_degree) == (8, 2)
    assert strategy.resolve(megatron.strategy, world_size=8).ep_degree == 8
    with pytest.raises(strategy.StrategyError, match="or keep each expert whole .--expert-tensor-parallel-size 1."):
        imp("args.txt", "--tensor-model-parallel-size 2 --expert-model-parallel-size 8\n", kind="megatron",
            world_size=8)
    split = titan("[parallelism]\nexpert_parallel_degree = 2\nexpert_tensor_parallel_degree = 2\n", world_size=8)
    e = entry(split, "parallelism.expert_tensor_parallel_degree")
    assert e.status == "no counterpart" and "experts stay whole on every mp rank" in e.reason


def test_malformed_toml_is_a_located_error(titan):
    with pytest.raises(strategy.StrategyError) as e:
        titan("[parallelism]\ntensor_parallel_degree = = 2\n")
    assert e.value.line == 2 and e.value.message.startswith("invalid TOML")


@pytest.mark.parametrize(("text", "key", "reason"), [
    ("distributed_type: MULTI_GPU\n", "distributed_type",
     "the data ranks replicate: dp_degree (-1) is inferred at the world size"),
    ('distributed_type: MULTI_GPU\nmixed_precision: "no"\n', "mixed_precision", "no mixed precision, the strategy's default"),
    ("distributed_type: MULTI_GPU\nnum_processes: auto\n", "num_processes", None),
])
def test_a_value_that_sets_no_field_says_so_instead_of_mapped(acc, text, key, reason):
    e = entry(acc(text=text), key)
    if reason is None:  # "auto": filled in at launch, so nothing can be known here
        assert (e.status, e.fields) == ("unresolved", ()) and '"auto"' in e.reason
    else:
        assert (e.status, e.fields, e.reason) == ("nothing to set", (), reason)


def test_the_report_line_of_a_value_that_sets_nothing_says_nothing_to_set(acc):
    imported = acc(text='distributed_type: MULTI_GPU\nmixed_precision: "no"\n', world_size=4)
    assert report(imported) == [
        'distributed_type = "MULTI_GPU" -> hybrid_configs.dp_degree, hybrid_configs.sharding_degree',
        'mixed_precision = "no" -> nothing to set: no mixed precision, the strategy\'s default',
    ]


# --- accelerate ---------------------------------------------------------------------------------------------------------

def test_num_processes_is_the_world_size_and_its_entry_lists_the_degrees_it_sized(acc):
    imported = acc("distributed_type: MULTI_GPU\nnum_processes: 4\n")
    assert imported.world_size == 4 and imported.strategy.hybrid_configs.dp_degree == 4
    assert "hybrid_configs.dp_degree" in entry(imported, "num_processes").fields
    overridden = acc("distributed_type: MULTI_GPU\nnum_processes: 4\n", world_size=8)
    assert overridden.world_size == 8 and entry(overridden, "num_processes").status == "no counterpart"


@pytest.mark.parametrize("strategy_, stage", [("FULL_SHARD", 3), ("SHARD_GRAD_OP", 2), ("2", 2)])
def test_fsdp_sharding_strategies_are_zero_stages(acc, strategy_, stage):
    hybrid = acc(f"distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_sharding_strategy: {strategy_}\n"
                 ).strategy.hybrid_configs
    assert (hybrid.dp_degree, hybrid.sharding_degree, hybrid.sharding_configs.stage) == (1, 8, stage)


def test_no_shard_and_multi_gpu_replicate(acc):
    for text in ("distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_sharding_strategy: NO_SHARD\n",
                 "distributed_type: MULTI_GPU\nnum_processes: 8\n"):
        hybrid = acc(text).strategy.hybrid_configs
        assert (hybrid.dp_degree, hybrid.sharding_degree) == (8, 1)


def test_hybrid_shard_shards_within_a_machine_and_replicates_across(acc):
    hybrid = acc("distributed_type: FSDP\nnum_processes: 16\nnum_machines: 2\nfsdp_config:\n"
                 "  fsdp_sharding_strategy: HYBRID_SHARD\n").strategy.hybrid_configs
    assert (hybrid.dp_degree, hybrid.sharding_degree, hybrid.sharding_configs.stage) == (2, 8, 3)


def test_plain_mixed_precision_is_autocast_with_torchs_scaler(acc):
    configs = acc("distributed_type: MULTI_GPU\nmixed_precision: fp16\nnum_processes: 2\n").strategy.amp_configs
    assert (configs.dtype, configs.use_pure_fp16, configs.incr_every_n_steps, configs.decr_every_n_nan_or_inf) == (
        "float16", False, 2000, 1)


def test_a_deepspeed_file_it_names_is_imported_after_its_key(acc, write):
    write("ds.json", '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": true}}')
    imported = acc("distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds.json\nnum_processes: 4\n")
    assert [e.key for e in imported.entries] == [
        "distributed_type", "deepspeed_config.deepspeed_config_file",
        "deepspeed_config.deepspeed_config_file.zero_optimization.stage",
        "deepspeed_config.deepspeed_config_file.bf16.enabled", "num_processes"]
    hybrid = imported.strategy.hybrid_configs
    assert (hybrid.sharding_degree, hybrid.sharding_configs.stage, imported.strategy.amp_configs.use_pure_bf16) == (4, 3, True)


def test_a_missing_file_it_names_is_unresolved_naming_the_path(acc, tmp_path):
    e = entry(acc("distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: gone.json\nnum_processes: 2\n"),
              "deepspeed_config.deepspeed_config_file")
    assert e.status == "unresolved" and str(tmp_path / "gone.json") in e.reason


def test_sharding_without_num_processes_or_a_world_size_is_an_error_naming_both(acc):
    with pytest.raises(strategy.StrategyError) as e:
        acc("distributed_type: FSDP\nmixed_precision: bf16\n")
    assert e.value.field == "distributed_type"
    assert e.value.message.endswith("pass --world-size, or state it in the file (num_processes)")


def test_the_batch_sizes_of_a_deepspeed_file_it_names_must_agree_with_num_processes(acc, write):
    write("ds.json", '{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4}')
    with pytest.raises(strategy.StrategyError, match=r"so the world size is 4, not 8 \(num_processes; --world-size "):
        acc("distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds.json\nnum_processes: 8\n")


def test_accelerates_deepspeed_plugin_runs_stage_2_unless_told(acc):
    hybrid = acc("distributed_type: DEEPSPEED\nnum_processes: 4\n").strategy.hybrid_configs
    assert (hybrid.sharding_degree, hybrid.sharding_configs.stage) == (4, 2)


def test_parallelism_config_gives_the_degrees(acc):
    hybrid = acc("distributed_type: FSDP\nnum_processes: 8\nparallelism_config:\n"
                 "  parallelism_config_dp_replicate_size: 2\n  parallelism_config_dp_shard_size: 2\n"
                 "  parallelism_config_tp_size: 2\n").strategy.hybrid_configs
    assert (hybrid.dp_degree, hybrid.sharding_degree, hybrid.mp_degree) == (2, 2, 2)


def test_malformed_yaml_is_a_located_error(acc):
    with pytest.raises(strategy.StrategyError) as e:
        acc("distributed_type: FSDP\nfsdp_config: [unclosed\n")
    assert e.value.line == 3


# --- Megatron -----------------------------------------------------------------------------------------------------------

def test_the_distributed_optimizer_is_zero_stage_1_over_the_data_ranks(meg):
    hybrid = meg("--tensor-model-parallel-size 2 --use-distributed-optimizer", world_size=8).strategy.hybrid_configs
    assert (hybrid.mp_degree, hybrid.dp_degree, hybrid.sharding_degree, hybrid.sharding_configs.stage) == (2, 1, 4, 1)


def test_torchruns_processes_per_node_times_nodes_is_the_scripts_world_size(imp):
    text = "torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --tensor-model-parallel-size 2 --use-distributed-optimizer\n"
    imported = imp("train.sh", text)
    hybrid = imported.strategy.hybrid_configs
    assert (imported.world_size, hybrid.mp_degree, hybrid.sharding_degree, hybrid.sharding_configs.stage) == (16, 2, 8, 1)
    assert "hybrid_configs.sharding_degree" in entry(imported, "nnodes").fields
    overridden = imp("train.sh", text, world_size=32)
    assert (overridden.world_size, overridden.strategy.hybrid_configs.sharding_degree) == (32, 16)
    assert entry(overridden, "nproc_per_node").reason == "the world size 32 (--world-size) is used instead"


def test_the_distributed_optimizer_without_torchruns_counts_or_a_world_size_is_an_error_naming_them(meg):
    for args in ("--use-distributed-optimizer", "--use-distributed-optimizer --nproc_per_node gpu --nnodes 2"):
        with pytest.raises(strategy.StrategyError) as e:
            meg(args)
        assert e.value.field == "use-distributed-optimizer"
        assert e.value.message.endswith("pass --world-size, or state it in the file (nproc_per_node × nnodes)")


def test_sequence_parallel_maps_above_tp_1_and_says_why_not_at_tp_1(meg):
    assert meg("--tensor-model-parallel-size 2 --sequence-parallel").strategy.hybrid_configs.mp_configs.sequence_parallel
    e = entry(meg("--tensor-model-parallel-size 1 --sequence-parallel"), "sequence-parallel")
    assert e.status == "no counterpart" and "Megatron itself turns sequence parallelism off at tp 1" in e.reason


def test_virtual_stages_come_from_the_layers_per_virtual_stage(meg):
    s = meg("--num-layers 32 --pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 4 "
            "--micro-batch-size 1 --global-batch-size 16", world_size=4).strategy
    assert (s.pipeline_configs.schedule_mode, s.hybrid_configs.pp_configs.virtual_pp_degree,
            s.pipeline_configs.accumulate_steps) == ("VPP", 2, 16)


def test_recompute_is_full_recomputation_only(meg):
    assert meg("--recompute-granularity full").strategy.recompute
    for args, key in (("--recompute-granularity selective", "recompute-granularity"),
                      ("--recompute-activations", "recompute-activations")):
        assert entry(meg(args), key).status == "no counterpart"


def test_batch_size_ramp_up_has_no_counterpart_and_the_global_batch_sets_the_accumulation(meg):
    imported = meg("--micro-batch-size 2 --global-batch-size 64 --rampup-batch-size 16 16 1000", world_size=8)
    assert entry(imported, "rampup-batch-size").status == "no counterpart"
    assert imported.strategy.gradient_merge_configs.k_steps == 4


def test_auto_is_a_real_value_for_megatron(meg):
    e = entry(meg("--attention-backend auto"), "attention-backend")
    assert (e.value, e.status) == ("auto", "no counterpart")


def test_fp16_brings_megatrons_loss_scaler(meg):
    configs = meg("--fp16 --loss-scale-window 500").strategy.amp_configs
    assert (configs.init_loss_scaling, configs.incr_every_n_steps, configs.use_pure_fp16) == (2.0 ** 32, 500, True)


def test_a_degree_that_is_not_a_number_names_the_flag(meg):
    with pytest.raises(strategy.StrategyError) as e:
        meg("--tensor-model-parallel-size two")
    assert e.value.field == "tensor-model-parallel-size" and e.value.line == 1


# --- detection ----------------------------------------------------------------------------------------------------------

def test_a_file_whose_kind_cannot_be_told_lists_the_kinds(write):
    for name, text in (("notes.txt", "hello\n"), ("other.yaml", "model: llama\n")):
        with pytest.raises(strategy.StrategyError, match="deepspeed, torchtitan, accelerate, megatron"):
            import_config(write(name, text))


def test_the_kind_can_be_named(write):
    path = write("launch.txt", "python train.py --micro-batch-size 4\n")
    assert import_config(path, kind="megatron").kind == "megatron"
    with pytest.raises(strategy.StrategyError, match="unknown kind 'colossal'"):
        import_config(path, kind="colossal")


def test_torchtitans_checkpoint_section_is_checkpoint_configs(titan):
    c = titan('[checkpoint]\nenable = true\nfolder = "ckpt"\ninterval = 500\nkeep_latest_k = 3\n'
              'async_mode = "async_with_pinned_mem"\n', world_size=8).strategy.checkpoint_configs
    assert (c.dir, c.every_steps, c.keep_last, c.async_save) == ("ckpt", 500, 3, True)
    off = titan('[checkpoint]\nenable = false\nfolder = "ckpt"\ninterval = 500\n', world_size=8)
    assert not off.strategy.HasField("checkpoint_configs")
    assert entry(off, "checkpoint.interval").status == "nothing to set"


def test_megatrons_save_flags_are_checkpoint_configs(meg):
    imported = meg("--save /ckpt --save-interval 1000 --async-save", world_size=8)
    c = imported.strategy.checkpoint_configs
    assert (c.dir, c.every_steps, c.async_save) == ("/ckpt", 1000, True)
    alone = meg("--save-interval 1000", world_size=8)
    assert entry(alone, "save-interval").reason.startswith("saving every N steps needs checkpoint_configs.dir")
