"""DeepSpeed's JSON config (`ds_config.json`): its rules, each citing the DeepSpeed config reference or source.

Sources: the configuration reference https://www.deepspeed.ai/docs/config-json/ (batch sizes, fp16/bf16, ZeRO,
offload, logging, activation checkpointing, ...), `deepspeed/runtime/config.py` (train_batch_size = micro ×
accumulation × data-parallel ranks, asserted), `deepspeed/runtime/fp16/loss_scaler.py` (the dynamic loss scaler:
2^16 to start, ×2 after 1000 clean steps, ÷2 on overflow once the hysteresis of 2 is spent),
`deepspeed/runtime/tensor_parallel/config.py` (AutoTP's `tensor_parallel.autotp_size`) and `deepspeed/__init__.py`
(Ulysses: `sequence_parallel_size` with `data_parallel_size` builds the data × sequence mesh). ZeRO shards over every
data rank, so stages 1-3 put them all on sharding_degree; the data ranks are the world over the model-parallel ones, or,
when the file gives all three batch sizes, train_batch_size / (micro-batch × accumulation), which DeepSpeed asserts.
"""

from __future__ import annotations

from .common import (CLIP, OFFLOAD, OFFLOAD_DEVICE, OFFLOAD_SWITCH, SCALE_FLOOR, Leaf, Nothing, Rule, Tool, flatten,
                     integer, number, truth)

__all__ = ["TOOL"]

_COMMIT = "38327e07f6cd39b63418f60cedd1651b0be3e7c3"
_DOCS = "https://www.deepspeed.ai/docs/config-json/"
_SRC = f"https://github.com/microsoft/DeepSpeed/blob/{_COMMIT}/"
SOURCES = {
    "batch": _DOCS + "#batch-size-related-parameters",
    "batch-src": _SRC + "deepspeed/runtime/config.py",
    "fp16": _DOCS + "#fp16-training-options",
    "scaler": _SRC + "deepspeed/runtime/fp16/loss_scaler.py",
    "bf16": _DOCS + "#bfloat16-training-options",
    "amp": _DOCS + "#automatic-mixed-precision-amp-training-options",
    "clip": _DOCS + "#gradient-clipping",
    "zero": _DOCS + "#zero-optimizations-for-fp16-training",
    "zero-src": _SRC + "deepspeed/runtime/zero/config.py",
    "offload": _DOCS + "#parameter-offloading",
    "optimizer": _DOCS + "#optimizer-parameters",
    "scheduler": _DOCS + "#scheduler-parameters",
    "comm": _DOCS + "#communication-options",
    "logging": _DOCS + "#logging",
    "monitor": _DOCS + "#monitoring-module",
    "ac": _DOCS + "#activation-checkpointing",
    "autotp": _SRC + "deepspeed/runtime/tensor_parallel/config.py",
    "ulysses": _SRC + "deepspeed/__init__.py",
    "checkpoint": _DOCS + "#checkpoint-options",
    "dtypes": _DOCS + "#data-type-options",
    "other": _DOCS,
}

_OFF = Nothing("off, the strategy's default")
_TUNING = "ZeRO's buffer, bucket and overlap tuning: FSDP2 sizes its buffers by unit and overlaps on its own"

RULES = (
    Rule(key="train_batch_size", means="global", read=integer(), cite="batch"),
    Rule(key="train_micro_batch_size_per_gpu", means="micro", read=integer(), cite="batch"),
    Rule(key="gradient_accumulation_steps", means="accum", read=integer(), cite="batch-src"),
    Rule(key="gradient_clipping", reason=CLIP, cite="clip"),
    Rule(key="zero_optimization.stage", means="zero_stage", read=integer(0), cite="zero"),
    Rule(key="zero_optimization.mics_shard_size", means="shard_group", cite="zero-src",
         read=integer(1, also=(-1,), scale=lambda n: Nothing("-1: MiCS off") if n == -1 else n,
                      describe="MiCS: shards of this size, replicated over the rest; -1 off")),
    Rule(key="zero_optimization.offload_*.device", means="offload", read=OFFLOAD_DEVICE, cite="offload"),
    Rule(key="zero_optimization.offload_*", reason=OFFLOAD, cite="offload"),
    Rule(key="zero_optimization.cpu_offload", means="offload", read=OFFLOAD_SWITCH, cite="zero-src"),
    Rule(key="zero_optimization.cpu_offload_param", means="offload", read=OFFLOAD_SWITCH, cite="zero-src"),
    Rule(key="zero_optimization.cpu_offload*", reason=OFFLOAD, cite="zero-src"),
    Rule(key="zero_optimization.stage3_gather_*_weights_on_model_save", cite="zero",
         reason="how checkpoints are written: parallel.save writes sharded checkpoints (full_state_dict gathers)"),
    Rule(key="zero_optimization.zero_quantized_*", reason="ZeRO++ quantized communication is not implemented",
         cite="zero-src"),
    Rule(key="zero_optimization.zero_hpz_partition_size", cite="zero-src",
         reason="ZeRO++'s secondary parameter partition (hpZ) has no counterpart; sharding_degree shards it all"),
    Rule(key="zero_optimization.*", reason=_TUNING, cite="zero"),
    Rule(key="zero_allow_untested_optimizer", reason="any torch optimizer works here", cite="zero"),
    Rule(key="zero_force_ds_cpu_optimizer", reason=OFFLOAD, cite="zero"),
    Rule(key="fp16.enabled", means="amp", read=truth(("float16", "pure"), _OFF), cite="fp16",
         reason="DeepSpeed keeps the weights in fp16 with fp32 masters: use_pure_fp16"),
    Rule(key="fp16.loss_scale", means="static_scale", read=number(), cite="fp16"),
    Rule(key="fp16.initial_scale_power", means="scale_power", read=integer(0), cite="fp16"),
    Rule(key="fp16.loss_scale_window", means="scale_window", read=integer(), cite="fp16"),
    Rule(key="fp16.hysteresis", means="hysteresis", read=integer(), cite="scaler"),
    Rule(key="fp16.min_loss_scale", cite="fp16",
         reason=SCALE_FLOOR),
    Rule(key="fp16.consecutive_hysteresis", cite="fp16",
         reason="the bad-step count resets after a clean step here, as Paddle's scaler does"),
    Rule(key="fp16.auto_cast", reason="inputs are the model's business; parallel.autocast() covers the forward",
         cite="fp16"),
    Rule(key="fp16.*", reason="an fp16 option with no counterpart in amp_configs", cite="fp16"),
    Rule(key="bf16.enabled", means="amp", read=truth(("bfloat16", "pure"), _OFF), cite="bf16",
         reason="DeepSpeed keeps the weights in bf16 with fp32 masters: use_pure_bf16"),
    Rule(key="bfloat16.enabled", means="amp", read=truth(("bfloat16", "pure"), _OFF), cite="bf16"),
    Rule(key="bf16.*", reason="a bf16 option with no counterpart in amp_configs", cite="bf16"),
    Rule(key="amp.enabled", means="amp", read=truth(("float16", "autocast"), _OFF), cite="amp",
         reason="NVIDIA apex's AMP: float16 autocast"),
    Rule(key="amp.*", reason="apex.amp.initialize's options; the strategy's amp is torch.autocast", cite="amp"),
    Rule(key="tensor_parallel.autotp_size", means="tp", cite="autotp",
         read=integer(0, scale=lambda n: n or Nothing("0: AutoTP off"), describe="0: off")),
    Rule(key="tensor_parallel.*", reason="AutoTP's partitioning options: tp_plan chooses what to split",
         cite="autotp"),
    Rule(key="sequence_parallel_size", means="sep", read=integer(), cite="ulysses",
         reason="DeepSpeed's ZeRO also shards over the Ulysses ranks; here sharding_degree covers the data ranks"),
    Rule(key="data_parallel_size", means="data_ranks", read=integer(), cite="ulysses"),
    Rule(key="optimizer.*", reason="the optimizer is your torch optimizer (HybridParallelOptimizer wraps it)",
         cite="optimizer"),
    Rule(key="scheduler.*", reason="the learning-rate schedule is your torch scheduler", cite="scheduler"),
    Rule(key="communication_data_type", reason="FSDP2 and the dp all-reduce communicate in the gradients' dtype",
         cite="comm"),
    Rule(key="seq_parallel_communication_data_type", reason="communication dtype tuning has no counterpart",
         cite="comm"),
    Rule(key="prescale_gradients", reason="gradients are averaged after the reduction here", cite="comm"),
    Rule(key="gradient_predivide_factor", reason="gradients are averaged after the reduction here", cite="comm"),
    Rule(key="sparse_gradients", reason="sparse embedding gradients are not implemented", cite="comm"),
    Rule(key="disable_allgather", reason="communication tuning has no counterpart", cite="comm"),
    Rule(key="steps_per_print", means="log_interval", read=integer(), cite="logging"),
    Rule(key="wall_clock_breakdown", means="timers", read=truth(True, False), cite="logging"),
    Rule(key="tensorboard.enabled", means="tensorboard", read=truth(True, False), cite="monitor"),
    Rule(key="tensorboard.*", reason="TensorBoard's events go under metrics_configs.dir, named by the run",
         cite="monitor"),
    Rule(key="flops_profiler.*", cite="other",
         reason="parallel.Meter counts every run's FLOPs for the whole model and logs TFLOP/s and MFU (against "
                "metrics_configs.peak_flops); DeepSpeed's per-module profile has no counterpart (torch.profiler's "
                "with_flops does that)"),
    *(Rule(key=key, reason="logging and monitoring are the training script's (parallel.Meter logs its metrics)",
           cite=cite)
      for key, cite in (("dump_state", "logging"), ("memory_breakdown", "batch-src"), ("wandb.*", "monitor"),
                        ("csv_monitor.*", "monitor"), ("comet.*", "monitor"), ("comms_logger.*", "other"))),
    Rule(key="activation_checkpointing.*", cite="ac",
         reason="configures deepspeed.checkpointing, which the model's code calls; the strategy's recompute "
                "recomputes whole blocks"),
    Rule(key="pipeline.*", cite="batch-src",
         reason="DeepSpeed's PipelineModule sets the stages in code; pass pp_degree in the strategy"),
    Rule(key="checkpoint.*", reason="checkpoints are parallel.save / parallel.load's", cite="checkpoint"),
    Rule(key="data_types.*", reason="gradients accumulate in their parameters' dtype (fp32 main_grad for "
                                    "mp_fused_linear_param_grad_add)", cite="dtypes"),
    Rule(key="dataloader_drop_last", reason="the data loader's", cite="batch-src"),
    *(Rule(key=f"{section}.*", reason=f"{what} has no counterpart in the strategy", cite="other") for section, what in (
        ("compression_training", "model compression"), ("data_efficiency", "data efficiency"),
        ("curriculum_learning", "curriculum learning"), ("elasticity", "elastic training"),
        ("autotuning", "the autotuner"), ("aio", "NVMe offload I/O"), ("sparse_attention", "sparse attention"),
        ("progressive_layer_drop", "progressive layer drop"), ("eigenvalue", "eigenvalue-based quantization"),
        ("quantize_training", "quantized training"), ("weight_quantization", "weight quantization"),
        ("hybrid_engine", "the RLHF hybrid engine"), ("nebula", "Nebula checkpointing"),
        ("compile", "DeepSpeed's torch.compile wrapper (use torch.compile on the model)"))),
)


def _leaves(text: str, source: str) -> list[Leaf]:
    from ..formats.json.located import parse

    return list(flatten(parse(text, source)))


TOOL = Tool(
    kind="deepspeed", name="DeepSpeed", sources=SOURCES, rules=RULES, leaves=_leaves, auto=True,
    scaler={"init_loss_scaling": 65536.0, "incr_every_n_steps": 1000, "decr_every_n_nan_or_inf": 2,
            "incr_ratio": 2.0, "decr_ratio": 0.5},
)
