"""The effective settings the runtime reads, one small immutable type per technique, filled by `resolve`.

Fields carry the schema fields' names (MpSettings drops the `mp_` prefix); the schema documents what each does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["AmpSettings", "DpBucketSettings", "MetricsSettings", "GradientMergeSettings", "MpSettings", "PipelineSettings", "RecomputeSettings",
           "ShardingSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MpSettings:
    """Effective model-parallel options (MpConfig's fields, `mp_` prefix dropped), after gating.

    `async_allreduce` is on only when mp_degree > 1 and mp_async_allreduce is set; `skip_c_identity`
    and `fused_linear_param_grad_add` only when async_allreduce is effectively on. `need_broadcast_data`
    (on by default) only when mp_degree > 1. `sequence_parallel` only when mp_degree > 1;
    `recompute_allgather` and `sp_async_reduce_scatter` only when sequence_parallel is effectively on.
    """

    sync_param: bool
    sync_grad: bool
    sync_moment: bool
    sync_mode: str
    async_allreduce: bool
    skip_c_identity: bool
    fused_linear_param_grad_add: bool
    need_broadcast_data: bool
    sequence_parallel: bool = False
    recompute_allgather: bool = False
    sp_async_reduce_scatter: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardingSettings:
    """Effective sharding (ZeRO) options (DygraphShardingConfig's fields the runtime reads).

    `stage` (1, 2 or 3) is the file's `sharding_configs.stage`, kept as configured while sharding_degree is 1, where
    nothing shards (the runtime leaves the model alone). What each stage does on FSDP2 is the field's documentation
    in the schema; the two properties spell out its switches.
    """

    stage: int

    @property
    def reshard_after_forward(self) -> bool:
        """FSDP2's fully_shard(reshard_after_forward=): parameters freed after each block's forward (stage 3)."""
        return self.stage >= 3

    @property
    def reduce_every_micro_step(self) -> bool:
        """Under gradient merge, reduce-scatter on every micro-step (stages 2-3) rather than once on the last (1)."""
        return self.stage >= 2


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineSettings:
    """Effective pipeline: the torch.distributed.pipelining schedule and its stages (pipeline_configs, pp_configs).

    A step takes `micro_batch_size` × `accumulate_steps` samples per data rank, run as `accumulate_steps`
    micro-batches. `schedule` names the class in torch.distributed.pipelining to run; `virtual_pp_degree` is the
    number of model chunks (stages) each pp rank holds: 1 for Schedule1F1B and ScheduleGPipe, >= 2 for the
    interleaved schedules, 2 for the V-shaped ScheduleZBVZeroBubble and ScheduleDualPipeV. `placement`: "loop" (stage
    s on pp rank s % pp_degree) or "v" (pp rank r holds stages r and 2·pp_degree − 1 − r). `shapes`: how the stages
    follow batches of another shape (sequence length, micro-batch size): "fixed" (pipeline_configs.p2p_cache_shape,
    the default: the first step's shapes, another refused), "per_shape" (pp_configs.enable_dynamic_shape or
    p2p_cache_shape false: stages built for each new shape and kept) or "every_step" (pp_configs.
    clear_every_step_cache: built anew each step). `dp_comm_overlap` (pp_configs): each bucket's dp all-reduce starts
    once the step's last micro-batch produced its gradients, rather than after the step's last backward.
    `delay_scale_loss` (pp_configs): each micro-batch's loss is left whole and the step divides the summed gradients by
    `accumulate_steps`, rather than each loss being divided before its backward. `timer` (pp_configs.enable_timer):
    each stage's forward, backward and weight-gradient time and its wait, logged by parallel.Meter; `profiling`
    (pp_configs.profiling): the step's merged timeline written at each log. The defaults while pp_degree is 1,
    where nothing pipelines.
    """

    pp_degree: int = 1
    micro_batch_size: int = 1
    accumulate_steps: int = 1
    virtual_pp_degree: int = 1
    schedule: str = "Schedule1F1B"
    placement: str = "loop"
    shapes: str = "fixed"
    dp_comm_overlap: bool = False
    delay_scale_loss: bool = False
    timer: bool = False
    profiling: bool = False

    @property
    def num_stages(self) -> int:
        """Stages in all: pp_degree × virtual_pp_degree."""
        return self.pp_degree * self.virtual_pp_degree

    @property
    def samples_per_step(self) -> int:
        """Samples a data rank gives one step (train_batch): micro_batch_size × accumulate_steps."""
        return self.micro_batch_size * self.accumulate_steps

    def stages_of(self, pp_rank: int) -> tuple[int, ...]:
        """The stages pp rank `pp_rank` holds, in model order: (r, r + pp, ...) in a loop, (r, 2·pp − 1 − r) in a V."""
        if not 0 <= pp_rank < self.pp_degree:
            raise ValueError(f"pp_rank must be in [0, {self.pp_degree}), got {pp_rank}")
        if self.placement == "v":
            return (pp_rank, 2 * self.pp_degree - 1 - pp_rank)
        return tuple(pp_rank + k * self.pp_degree for k in range(self.virtual_pp_degree))

    def pp_rank_of(self, stage: int) -> int:
        """The pp rank that holds `stage` (the inverse of `stages_of`)."""
        if not 0 <= stage < self.num_stages:
            raise ValueError(f"stage must be in [0, {self.num_stages}), got {stage}")
        if self.placement == "v" and stage >= self.pp_degree:
            return 2 * self.pp_degree - 1 - stage
        return stage % self.pp_degree


class AmpSettings(NamedTuple):
    """Effective mixed precision (`amp`, `amp_configs`).

    `dtype` is the autocast dtype ("bfloat16" under use_pure_bf16 or amp_configs.dtype, else "float16");
    `pure`: weights kept in that dtype (use_pure_fp16 / use_pure_bf16) with fp32 masters; `loss_scaling`: on for
    float16 only. The scaler fields are amp_configs', with Paddle's meaning.
    """

    enabled: bool = False
    dtype: str = "float16"
    pure: bool = False
    loss_scaling: bool = False
    init_loss_scaling: float = 32768.0
    incr_every_n_steps: int = 1000
    decr_every_n_nan_or_inf: int = 2
    incr_ratio: float = 2.0
    decr_ratio: float = 0.8
    use_dynamic_loss_scaling: bool = True


class DpBucketSettings(NamedTuple):
    """How the dp gradient average is bucketed while the backward runs (Paddle's DataParallel comm buffers): buckets
    of `bucket_bytes` (fuse_grad_size_in_MB), the first launched (the last layers' gradients) of
    `first_bucket_bytes` (last_comm_group_size_MB)."""

    bucket_bytes: int = 32 * 2**20
    first_bucket_bytes: int = 2**20


class GradientMergeSettings(NamedTuple):
    """Effective gradient merge: one update every `k_steps` optimizer steps (1: every step), averaged if `avg`."""

    k_steps: int = 1
    avg: bool = True


class RecomputeSettings(NamedTuple):
    """Effective recompute: `checkpoints` are globs on module names, run under torch.utils.checkpoint.

    Empty while enabled: every block of the model (Hugging Face's `_no_split_modules` classes, else the children
    of the model's largest ModuleList), as Paddle recomputes every decoder layer.
    """

    enabled: bool = False
    checkpoints: tuple[str, ...] = ()


class ExpertSettings(NamedTuple):
    """Effective expert parallelism (ep_degree > 1): the expert topology, Paddle's EPHybridCommunicateGroup with the
    world beyond pp × moe_sharding × ep replicating the experts.

    `order` names the expert topology's axes outermost first ("edp", then pp, moe_sharding and ep in the strategy
    order's relative order), `dims` their degrees; empty at ep_degree 1, where nothing is split.
    """

    ep_degree: int = 1
    moe_sharding_degree: int = 1
    order: tuple[str, ...] = ()
    dims: tuple[int, ...] = ()

    @property
    def replicas(self) -> int:
        """Ranks beyond pp × moe_sharding × ep holding the same experts (the "edp" axis)."""
        return dict(zip(self.order, self.dims)).get("edp", 1)


class CheckpointSettings(NamedTuple):
    """Effective checkpoint_configs: save every `every_steps` steps into `dir`/step-N (0: only when asked), keep the
    `keep_last` newest complete ones (0: all), write in the background (`async_save`), and start from `resume`
    ("auto": the newest readable checkpoint in `dir`, if any; "never"; or a checkpoint's path). `dir` empty: no
    checkpoints unless the script names one."""

    dir: str = ""
    every_steps: int = 0
    keep_last: int = 0
    async_save: bool = False
    resume: str = "auto"


class MetricsSettings(NamedTuple):
    """Effective metrics_configs, read by `parallel.Meter`: log every `log_interval` steps (0: never) into `dir`
    (relative to the run's output directory), TensorBoard on or off, one device's `peak_flops` for MFU (0: the
    device's own where known), and the `straggler_threshold` (a fraction of the median busy time)."""

    log_interval: int = 10
    dir: str = ""
    tensorboard: bool = False
    peak_flops: float = 0.0
    straggler_threshold: float = 0.25
