"""accelerate's YAML config (what `accelerate config` writes): its rules, each citing accelerate's source or docs.

Sources, at the commit the shared fixtures come from: `src/accelerate/commands/config/config_args.py` (the keys of a
cluster config; num_processes counts every process, on every machine), `src/accelerate/utils/dataclasses.py`
(DistributedType; FullyShardedDataParallelPlugin: FULL_SHARD by default, reshard_after_forward true for FSDP2,
mixed precision as FSDP's param_dtype; DeepSpeedPlugin: zero_stage 2 unless told, mixed_precision into DeepSpeed's
fp16/bf16), `src/accelerate/utils/constants.py` (FSDP_SHARDING_STRATEGY: 1-5 for FULL_SHARD ... HYBRID_SHARD_ZERO2),
`src/accelerate/parallelism_config.py` (world = dp_replicate · dp_shard · tp · cp · sp; a config of size 1 replicates
over every process) and the guides https://huggingface.co/docs/accelerate/usage_guides/fsdp, .../deepspeed and
.../megatron_lm (megatron_lm_config keys). Plain mixed precision is torch.autocast with torch's GradScaler.
"""

from __future__ import annotations

from .common import (CLIP, OFFLOAD, OFFLOAD_DEVICE, OFFLOAD_SWITCH, SELECTIVE, Leaf, NoCounterpart, Nothing, Rule, Tool,
                     choice, flatten, integer, truth)

__all__ = ["TOOL"]

_COMMIT = "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83"
_SRC = f"https://github.com/huggingface/accelerate/blob/{_COMMIT}/src/accelerate/"
_GUIDE = "https://huggingface.co/docs/accelerate/usage_guides/"
SOURCES = {
    "config": _SRC + "commands/config/config_args.py",
    "types": _SRC + "utils/dataclasses.py",
    "fsdp": _GUIDE + "fsdp",
    "fsdp-src": _SRC + "utils/constants.py",
    "deepspeed": _GUIDE + "deepspeed",
    "megatron": _GUIDE + "megatron_lm",
    "parallelism": _SRC + "parallelism_config.py",
}

_LAUNCH = "the launcher's: where and how the processes start"
_REPLICATE = {t: "replicate" for t in ("NO", "MULTI_CPU", "MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA",
                                       "MULTI_MUSA", "MULTI_XPU", "MULTI_HPU", "MULTI_NEURON")}
_STRATEGIES = {  # FSDP1's sharding strategies, by name or by number (1-5), as ZeRO stages
    "FULL_SHARD": 3, "SHARD_GRAD_OP": 2, "NO_SHARD": 0,
    "HYBRID_SHARD": {"fsdp_stage": 3, "shard_group": "node"},
    "HYBRID_SHARD_ZERO2": {"fsdp_stage": 2, "shard_group": "node"},
}
_BY_NUMBER = {**_STRATEGIES, **{str(i): v for i, v in enumerate(_STRATEGIES.values(), 1)}}


def _staged(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {"fsdp_stage": value}


RULES = (
    Rule(key="distributed_type", means="data_mode", cite="types", read=choice({
        **_REPLICATE, "FSDP": "shard", "DEEPSPEED": "deepspeed", "MEGATRON_LM": "megatron",
        "XLA": NoCounterpart("TPUs (XLA) are not a target of this runtime")},
        describe='MULTI_GPU (and the other MULTI_*, NO): replicated; FSDP: sharded; DEEPSPEED: the ZeRO stage '
                 '(2 unless told); MEGATRON_LM: megatron_lm_config')),
    Rule(key="mixed_precision", means="amp", cite="types", read=choice({
        "no": Nothing("no mixed precision, the strategy's default"), "bf16": ("bfloat16", "plugin"),
        "fp16": ("float16", "plugin"), "fp8": NoCounterpart("fp8 training is not implemented")},
        describe='"bf16" / "fp16": autocast, pure (weights in that dtype, fp32 masters) under FSDP, DeepSpeed or '
                 'Megatron-LM; "no": nothing to set')),
    Rule(key="num_processes", means="world_size", read=integer(1, also=(-1,), scale=lambda n: n if n > 0 else
         NoCounterpart("-1: the launcher (SLURM) decides; pass --world-size")), cite="config"),
    Rule(key="num_machines", means="num_machines", read=integer(), cite="config"),
    Rule(key="parallelism_config.parallelism_config_dp_replicate_size", means="replicate", read=integer(),
         cite="parallelism"),
    Rule(key="parallelism_config.parallelism_config_dp_shard_size", means="shard", read=integer(), cite="parallelism"),
    Rule(key="parallelism_config.parallelism_config_tp_size", means="tp", read=integer(), cite="parallelism"),
    Rule(key="parallelism_config.parallelism_config_cp_size", means="cp", read=integer(), cite="parallelism"),
    Rule(key="parallelism_config.parallelism_config_sp_size", means="sep", read=integer(), cite="parallelism",
         reason="accelerate's sp is DeepSpeed's Ulysses (ALST)"),
    Rule(key="parallelism_config.*", reason="the backends and communication strategies of tp, cp and sp are the "
                                            "runtime's own", cite="parallelism"),
    Rule(key="fsdp_config.fsdp_sharding_strategy", means=("fsdp_stage", "shard_group"), cite="fsdp-src",
         read=choice({k: _staged(v) for k, v in _BY_NUMBER.items()},
                     describe="FULL_SHARD (1): stage 3; SHARD_GRAD_OP (2): stage 2; NO_SHARD (3): replicated; "
                              "HYBRID_SHARD (4) / HYBRID_SHARD_ZERO2 (5): stage 3 / 2 within each machine, "
                              "replicated across machines")),
    Rule(key="fsdp_config.fsdp_reshard_after_forward", means=("reshard", "fsdp_stage", "shard_group"), cite="types",
         read=choice({True: {"reshard": "always"}, False: {"reshard": "never"},
                      **{k: _staged(v) for k, v in _BY_NUMBER.items()}},
                     describe="FSDP2's bool: true stage 3, false stage 2; FSDP1's strategy name as "
                              "fsdp_sharding_strategy")),
    Rule(key="fsdp_config.fsdp_activation_checkpointing", means="recompute", read=truth(True, False), cite="fsdp",
         reason="FSDP checkpoints every wrapped transformer layer, as recompute does every block"),
    Rule(key="fsdp_config.fsdp_offload_params", means="offload", read=OFFLOAD_SWITCH, cite="fsdp"),
    Rule(key="fsdp_config.fsdp_version", cite="fsdp", reason="sharding here is always FSDP2's fully_shard"),
    Rule(key="fsdp_config.fsdp_auto_wrap_policy", cite="fsdp",
         reason="the units are the model's blocks (its _no_split_modules classes, else its largest ModuleList)"),
    Rule(key="fsdp_config.fsdp_transformer_layer_cls_to_wrap", cite="fsdp",
         reason="the units are the model's blocks (its _no_split_modules classes, else its largest ModuleList)"),
    Rule(key="fsdp_config.fsdp_min_num_params", cite="fsdp", reason="units are blocks, not sized by parameters"),
    Rule(key="fsdp_config.fsdp_*_prefetch", cite="fsdp", reason="FSDP2 prefetches the next unit's all-gather itself "
                                                                "(sharding_configs.comm_overlap, always on)"),
    Rule(key="fsdp_config.fsdp_state_dict_type", cite="fsdp",
         reason="checkpoints are parallel.save's (sharded; full_state_dict gathers)"),
    Rule(key="fsdp_config.*", cite="fsdp", reason="how FSDP is set up around the model (loading, module states, "
                                                  "original parameters) is the runtime's own"),
    Rule(key="deepspeed_config.deepspeed_config_file", include="deepspeed", cite="deepspeed"),
    Rule(key="deepspeed_config.zero_stage", means="zero_stage", read=integer(0), cite="deepspeed"),
    Rule(key="deepspeed_config.gradient_accumulation_steps", means="accum", read=integer(), cite="deepspeed"),
    Rule(key="deepspeed_config.gradient_clipping", reason=CLIP, cite="deepspeed"),
    Rule(key="deepspeed_config.offload_*_device", means="offload", read=OFFLOAD_DEVICE, cite="deepspeed"),
    Rule(key="deepspeed_config.offload_*", reason=OFFLOAD, cite="deepspeed"),
    Rule(key="deepspeed_config.zero3_save_16bit_model", cite="deepspeed",
         reason="checkpoints are parallel.save's (sharded; full_state_dict gathers)"),
    Rule(key="deepspeed_config.zero3_init_flag", cite="deepspeed",
         reason="building the model sharded is parallel's init=\"shard\" / meta-device loading"),
    Rule(key="deepspeed_config.deepspeed_*", reason=_LAUNCH, cite="deepspeed"),
    Rule(key="deepspeed_config.*", reason="a DeepSpeed plugin option with no counterpart", cite="deepspeed"),
    Rule(key="megatron_lm_config.megatron_lm_tp_degree", means="tp", read=integer(), cite="megatron"),
    Rule(key="megatron_lm_config.megatron_lm_pp_degree", means="pp", read=integer(), cite="megatron"),
    Rule(key="megatron_lm_config.megatron_lm_num_micro_batches", means="accum", read=integer(), cite="megatron"),
    Rule(key="megatron_lm_config.megatron_lm_sequence_parallelism", means="sequence_parallel",
         read=truth(True, Nothing("off, the strategy's default")), cite="megatron"),
    Rule(key="megatron_lm_config.megatron_lm_use_distributed_optimizer", means="zero_stage",
         read=truth(1, Nothing("off: the data ranks replicate")), cite="megatron",
         reason="Megatron's distributed optimizer shards the optimizer state: stage 1"),
    Rule(key="megatron_lm_config.megatron_lm_recompute_activations", cite="megatron", reason=SELECTIVE),
    Rule(key="megatron_lm_config.megatron_lm_recompute_granularity", means="recompute", cite="megatron",
         read=choice({"full": True, "selective": NoCounterpart(SELECTIVE)})),
    Rule(key="megatron_lm_config.megatron_lm_expert_model_parallel_size", means="ep", read=integer(),
         cite="megatron"),
    Rule(key="megatron_lm_config.megatron_lm_context_parallel_size", means="cp", read=integer(), cite="megatron"),
    Rule(key="megatron_lm_config.megatron_lm_gradient_clipping", reason=CLIP, cite="megatron"),
    Rule(key="megatron_lm_config.*", reason="a Megatron-LM plugin option with no counterpart", cite="megatron"),
    Rule(key="downcast_bf16", reason="TPU only (XLA_DOWNCAST_BF16)", cite="config"),
    Rule(key="use_cpu", reason="the device is the training script's (gloo on CPU, NCCL on GPUs)", cite="config"),
    Rule(key="dynamo_config.*", reason="torch.compile is applied to the model by the script", cite="config"),
    Rule(key="fp8_config.*", reason="fp8 training is not implemented", cite="config"),
    *(Rule(key=key, reason=_LAUNCH, cite="config") for key in (
        "compute_environment", "debug", "machine_rank", "main_process_ip", "main_process_port", "rdzv_backend",
        "same_network", "main_training_function", "enable_cpu_affinity", "gpu_ids", "tpu_*", "commands",
        "command_file", "mpirun_config.*", "ipex_config.*")),
)


def _leaves(text: str, source: str) -> list[Leaf]:
    from ..formats.yaml.located import parse

    return list(flatten(parse(text, source)))


TOOL = Tool(
    kind="accelerate", name="accelerate", sources=SOURCES, rules=RULES, leaves=_leaves, auto=True,
    scaler={"init_loss_scaling": 65536.0, "incr_every_n_steps": 2000, "decr_every_n_nan_or_inf": 1,
            "incr_ratio": 2.0, "decr_ratio": 0.5},  # torch.amp.GradScaler's defaults
    size_one_replicates=True,  # parallelism_config.py: a parallelism_config of size 1 replicates over every process
    fsdp_spans_cp=True,  # its FSDP2 mesh is dp_shard × cp
)
