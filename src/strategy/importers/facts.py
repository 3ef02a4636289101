"""The facts a config states (tensor degree, ZeRO stage, micro-batch size, ...), what each sets, and the schedules.

The tools' rules name these facts; `plan` turns them into fields; `table` prints what each sets.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["FACTS", "SCHEDULES", "Occurrence", "Outcome", "Schedule"]

# What each fact sets, for the mapping table (the rules say which key states it and how its value reads).
FACTS: dict[str, str] = {
    "world_size": "the world size: the degrees it sizes (--world-size, when given, is used instead)",
    "node_procs": "the processes per machine: × the machines, the world size (--world-size, when given, is used "
                  "instead)",
    "num_machines": "the machines (HYBRID_SHARD shards within one; × the processes per machine, the world size)",
    "data_ranks": "the data ranks (dp_degree × sharding_degree)",
    "tp": "hybrid_configs.mp_degree",
    "pp": "hybrid_configs.pp_degree",
    "sep": "hybrid_configs.sep_degree",
    "cp": "hybrid_configs.cp_degree",
    "ep": "hybrid_configs.ep_degree (carved out of the ranks outside mp and pp; out of a pipeline stage's ranks, mp's "
          "included, where the experts stay whole: PaddleFormers, or an expert tensor degree of 1)",
    "etp": "the experts' own tensor degree: 1 keeps each expert whole, so that ep_degree may span the tensor-parallel "
           "ranks too; above 1 no counterpart (experts stay whole on every mp rank here)",
    "replicate": "hybrid_configs.dp_degree",
    "shard": "hybrid_configs.sharding_degree (-1: the data ranks left)",
    "shard_group": "hybrid_configs.sharding_degree = this, dp_degree = the data ranks left (HSDP)",
    "zero_stage": "hybrid_configs.sharding_configs.stage; 1-3 shard over every data rank (dp_degree 1, "
                  "sharding_degree = the data ranks), 0 replicates (dp_degree = the data ranks)",
    "data_mode": "how the data ranks split: sharded (sharding_degree, stage 3 unless a key says otherwise) "
                 "or replicated (dp_degree)",
    "fsdp_stage": "hybrid_configs.sharding_configs.stage while the data ranks are sharded (0: replicated)",
    "reshard": "hybrid_configs.sharding_configs.stage: 3 when parameters are freed after forward, else 2",
    "micro": "pipeline_configs.micro_batch_size under pp; else the data loader's batch (no counterpart)",
    "global": "the accumulation, global / (micro × data ranks): pipeline_configs.accumulate_steps under pp, "
              "else gradient_merge, gradient_merge_configs.k_steps and avg when > 1; with the accumulation given too, "
              "the data ranks, global / (micro × accumulation), and so the world size (--world-size must agree)",
    "accum": "pipeline_configs.accumulate_steps under pp, else gradient_merge, gradient_merge_configs.k_steps and "
             "avg when > 1",
    "pp_micro": "pipeline_configs.micro_batch_size under pp (the local batch cut into micro-batches of this size)",
    "schedule": "pipeline_configs.schedule_mode (with hybrid_configs.pp_configs.virtual_pp_degree or "
                "use_dualpipev)",
    "virtual": "hybrid_configs.pp_configs.virtual_pp_degree (model chunks per pipeline rank)",
    "layers_per_virtual": "hybrid_configs.pp_configs.virtual_pp_degree = layers / pp_degree / this",
    "layers_per_stage": "hybrid_configs.pp_configs.virtual_pp_degree = layers / pp_degree / this",
    "num_layers": "read to size the virtual pipeline stages; otherwise the model's (no counterpart)",
    "amp": "amp, amp_configs.dtype; pure: use_pure_bf16 / use_pure_fp16 (weights in that dtype, fp32 masters); "
           "float16: the tool's loss scaler",
    "init_scale": "amp_configs.init_loss_scaling",
    "scale_power": "amp_configs.init_loss_scaling = 2^p",
    "static_scale": "0: dynamic scaling; else amp_configs.init_loss_scaling with use_dynamic_loss_scaling false",
    "scale_window": "amp_configs.incr_every_n_steps",
    "hysteresis": "amp_configs.decr_every_n_nan_or_inf",
    "recompute": "recompute (every block of the model)",
    "sequence_parallel": "hybrid_configs.mp_configs.sequence_parallel when mp_degree > 1",
    "ckpt_enable": "whether the tool saves checkpoints at all: off, the checkpoint keys set nothing",
    "ckpt_dir": "checkpoint_configs.dir",
    "ckpt_every": "checkpoint_configs.every_steps (with a dir; × gradient_merge_configs.k_steps: the tools count "
                  "optimizer updates, a step here is a micro-step)",
    "ckpt_keep": "checkpoint_configs.keep_last (0: all)",
    "ckpt_async": "checkpoint_configs.async_save",
    "topo_order": "hybrid_configs.order while some degree is above 1 (Paddle keeps it in Python, outside its proto)",
    "expert_switch": "with expert parallelism, hybrid_configs.order as the trainer reorders it",
    "auto_schedule": "on the auto-parallel path under pp, pipeline_configs.schedule_mode (Eager1F1B runs 1F1B: torch has "
                     "no eager variant); on the hybrid path nothing (its schedule is the pipeline words')",
    "auto_parallel": "the auto-parallel path: hybrid_configs.order pp first (the rest goes to fleet.auto.Strategy "
                     "there, to this strategy's own fields here)",
    "dtype": "amp, amp_configs.dtype (with fp16_opt_level: O2 also use_pure_bf16 / use_pure_fp16)",
    "opt_level": "with bf16 / fp16: O1 autocast (amp), O2 pure low precision with fp32 masters (use_pure_*), O0 no amp",
    "scale_loss": "amp_configs.init_loss_scaling under fp16",
    "master_grad": "checked (split_param and sharding comm overlap need it); fp32 master gradients are how pure low "
                   "precision steps here",
    "eval_batch": "evaluation's batch (no counterpart; checked against the micro-batch under a pipeline where the "
                  "trainer does)",
    "release_grads": "hybrid_configs.pp_configs.release_gradients under pp",
    "seed": "tensor_parallel_configs.tensor_init_seed at tensor-parallel degree > 1; otherwise the script's",
    "granularity": "how much recompute recomputes: \"full\" every block (recompute), the rest no counterpart",
    "save_strategy": "\"steps\": save_steps counts; \"no\" / \"epoch\": no step-counted checkpoints",
    "stage2_overlap": "checked (sharding stage 2 and logging_steps > 1, as the trainer asserts); FSDP2 overlaps its "
                      "reduce-scatters on its own",
    "stage1_broadcast_overlap": "checked (stage 1 without split_param); FSDP2 prefetches its all-gathers on its own",
    "stage1_allgather_overlap": "checked (stage 1 with split_param); FSDP2 prefetches its all-gathers on its own",
    "logging_steps": "metrics_configs.log_interval (also checked where the trainer's overlap switches need > 1)",
    "log_interval": "metrics_configs.log_interval (steps between two logs of parallel.Meter)",
    "tensorboard": "metrics_configs.tensorboard (rank 0's TensorBoard events)",
    "timers": "hybrid_configs.enable_optimizer_timer (the optimizer step's parts; parallel.Meter times every step's "
              "phases whatever the value)",
    "do_eval": "the training loop's evaluation (checked against evaluation_strategy where the trainer does)",
    "eval_strategy": "when the training loop evaluates (no counterpart)",
    "checked": "nothing in the strategy",
    "refused": "an error at the key",
    "offload": "offloading parameters or optimizer state to CPU or NVMe (not implemented; off is how the strategy runs)",
}


class Schedule(NamedTuple):
    mode: str | None  # pipeline_configs.schedule_mode (None: DualPipeV runs whatever it says)
    virtual: int = 1  # model chunks per rank the schedule runs with unless a key says
    dualpipev: bool = False


# Pipeline schedules by torch.distributed.pipelining's names (torchtitan's spelling; the other tools' readers
# translate to them), onto Paddle's schedule_mode as pipeline_configs.schedule_mode documents it: GPipe is "FThenB"
# (LoopedBFS with virtual stages), interleaved 1F1B "VPP", the zero-bubble ones "ZBH1" and the V-shaped "ZBVPP",
# DualPipeV pp_configs.use_dualpipev. Multi-stage schedules get 2 chunks per rank unless a key says otherwise, as
# torchtitan's pipeline_parallel.py does.
SCHEDULES: dict[str, Schedule] = {
    "1F1B": Schedule("1F1B"),
    "GPipe": Schedule("FThenB"),
    "Interleaved1F1B": Schedule("VPP", 2),
    "LoopedBFS": Schedule("FThenB", 2),
    "InterleavedZeroBubble": Schedule("ZBH1", 2),
    "ZBVZeroBubble": Schedule("ZBVPP", 2),
    "DualPipeV": Schedule(None, 2, dualpipev=True),
}


class Occurrence(NamedTuple):
    fact: str
    value: Any
    entry: int  # index into the leaves


class Outcome(NamedTuple):
    status: str  # "mapped" (set fields, or had nothing to set: the entry tells which), "unresolved" or "no counterpart"
    fields: tuple[str, ...]
    reason: str
