"""The effective settings a runtime acts on: what `strategy.resolve` returns.

Its own module so that what only checks a strategy (`strategy validate`) never builds or imports it.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field as dc_field, fields as dc_fields
from typing import TYPE_CHECKING, Any

from . import layout
from .settings import (AmpSettings, CheckpointSettings, DpBucketSettings, ExpertSettings, GradientMergeSettings,
                       MetricsSettings, MpSettings, PipelineSettings, RecomputeSettings, ShardingSettings)
from .topology import Topology
from ..notes import Note

if TYPE_CHECKING:
    from .memory import ModelStateMemory

__all__ = ["Resolved"]


@dataclass(frozen=True, kw_only=True)  # no slots: `_build` fills its __dict__ in one call
class Resolved:
    """The effective settings a runtime acts on.

    Attributes:
        dp_degree ... cp_degree: the six axes' degrees, dp_degree inferred when it was -1 (world size / the
            others); their product is the world size. `ep_degree` and `moe_sharding_degree` (properties) are the
            expert topology's, 1 without experts; `degrees` has them all.
        order: the axis names, outermost first (all six; Paddle's dp, pp, sharding, sep, cp, mp by default).
        mp: the effective model-parallel options.
        sharding: the effective sharding (ZeRO) options; they act only while sharding_degree > 1.
        pipeline: the torch.distributed.pipelining schedule, its stages and micro-batches (defaults while
            pp_degree is 1).
        tp_plan: the strategy's tensor-parallel plan (MpConfig.tp_plan), as (module-name glob, style) in order,
            styles spelled as Hugging Face does ("colwise", "rowwise", ...); empty when it has none.
        nccl: per group, the implemented NCCLConfig fields the file set for its communicator
            (`{"mp": {"commName": "tp", "nchannels": 4}}`); applied by `parallel.init` on NCCL only. Groups: "dp",
            "mp", "pp", "pp_p2p" (the pipeline's sends and receives), "sharding", "sep", "cp", "ep", "moe_sharding"; each
            only while its messages take effect (an axis of degree 1 has none).
        experts: the expert topology when ep_degree > 1 (`ExpertSettings`): Paddle's groups of ep and
            moe_sharding, the experts' replicas beyond them; `order` is then Paddle's dense order beside it.
        checkpoint: periodic checkpoints and resume (`CheckpointSettings`, checkpoint_configs), read by
            `parallel.Checkpointer`.
        tensor_init_seed: tensor_parallel_configs.tensor_init_seed while mp_degree > 1 (-1 otherwise, and when
            unset): `parallel.init` seeds every rank's default generators with it and each rank's model-parallel
            generator with seed + 1 + mp_rank · pp_degree + pp_rank; -1 leaves the script's seeds alone.
        dp_buckets: how the dp average is bucketed while the backward runs (`DpBucketSettings`: fuse_grad_size_in_MB,
            last_comm_group_size_MB).
        metrics: what `parallel.Meter` logs and where (`MetricsSettings`, metrics_configs).
        optimizer_timer: hybrid_configs.enable_optimizer_timer: HybridParallelOptimizer times its step's parts.
        notes: one `Note` per setting that was given but has no effect (or was inferred), and why: a sentence
            (`str`) that keeps its field path, kind and reason as data.
    """

    dp_degree: int
    mp_degree: int
    pp_degree: int
    sharding_degree: int
    sep_degree: int
    cp_degree: int
    order: tuple[str, ...]
    mp: MpSettings
    sharding: ShardingSettings
    pipeline: PipelineSettings = PipelineSettings()  # immutable: one shared default is safe
    nccl: dict[str, dict[str, Any]] = dc_field(default_factory=dict)
    tp_plan: tuple[tuple[str, str], ...] = ()
    amp: AmpSettings = AmpSettings()  # immutable: one shared default is safe
    gradient_merge: GradientMergeSettings = GradientMergeSettings()
    recompute: RecomputeSettings = RecomputeSettings()
    experts: ExpertSettings = ExpertSettings()  # immutable: one shared default is safe
    checkpoint: CheckpointSettings = CheckpointSettings()
    tensor_init_seed: int = -1
    dp_buckets: DpBucketSettings = DpBucketSettings()  # immutable: one shared default is safe
    metrics: MetricsSettings = MetricsSettings()  # immutable: one shared default is safe
    optimizer_timer: bool = False
    notes: tuple[Note, ...] = ()

    @classmethod
    def _build(cls, values: dict[str, Any]) -> Resolved:
        """`Resolved(**values)` without the generated __init__'s one object.__setattr__ per field (what a frozen
        dataclass pays: a fifth of a resolve): the defaults, then `values`, into the new instance's dict at once."""
        made = object.__new__(cls)
        made.__dict__.update(_defaults(), **values)
        if "nccl" not in values:
            made.__dict__["nccl"] = {}  # its own, as default_factory gives it
        return made

    @property
    def ep_degree(self) -> int:
        """Experts split over ep (1 without experts), as `experts.ep_degree`."""
        return self.experts.ep_degree

    @property
    def moe_sharding_degree(self) -> int:
        """Experts sharded over moe_sharding (1 without experts), as `experts.moe_sharding_degree`."""
        return self.experts.moe_sharding_degree

    @property
    def degrees(self) -> dict[str, int]:
        """Axis name -> degree: the six of `order` in that order (their product is the world size), then "ep" and
        "moe_sharding" when experts are split (ep_degree > 1), which Paddle's expert topology lays over the same
        ranks."""
        out = self.topology.degrees
        if self.ep_degree > 1:
            out |= {"ep": self.ep_degree, "moe_sharding": self.moe_sharding_degree}
        return out

    @property
    def topology(self) -> Topology:
        """The ranks laid out over the axes in `order` (`groups(axis)`, `coordinates(rank)`, `rank(coordinates)`)."""
        by_name = {a.name: getattr(self, a.field) for a in layout.plan().axes}
        return Topology.of(by_name, self.order)

    @property
    def world_size(self) -> int:
        return self.topology.world_size

    def process_groups(self) -> dict[str, list[list[int]]]:
        """Axis name -> the rank lists of its groups, for all six axes in `order`: exactly the groups Paddle 3.3.1's
        `CommunicateTopology.get_comm_list` builds. With the default order mp is innermost, so the ranks of an mp
        group are adjacent; an axis of degree 1 gives every rank a group of its own."""
        topology = self.topology
        return {axis: topology.groups(axis) for axis in self.order}

    def coordinates(self, rank: int) -> dict[str, int]:
        """Axis name -> `rank`'s index on that axis, in `order`."""
        return self.topology.coordinates(rank)

    def model_state_memory(self, params: float) -> ModelStateMemory:
        """Each rank's bytes of parameters, gradients and Adam state for a model of `params` parameters, next to
        one process holding it all, by ZeRO's formulas (see `strategy.memory`): 2 + 2 + 12 bytes a parameter under
        amp with pure fp16/bf16 weights, else 4 + 4 + 8; divided by mp · pp, and by sharding_degree as the stage says.

        Raises:
            ValueError: `params` is not a positive number.
        """
        mixed = self.amp.enabled and self.amp.pure
        from . import memory  # only for explain --params

        return memory.model_state(params, model_split=self.mp_degree * self.pp_degree, sharding=self.sharding_degree,
                                  stage=self.sharding.stage, mixed=mixed)

    def expert_state_memory(self, expert_params: float) -> ModelStateMemory:
        """As `model_state_memory`, for the experts' `expert_params` parameters: split over ep (each rank its block)
        and pp, sharded over moe_sharding as sharding_configs.stage says, not by mp or dense sharding (the experts'
        replicas beyond pp × moe_sharding × ep keep whole copies of their shard).

        Raises:
            ValueError: `expert_params` is not a positive number.
        """
        from . import memory

        return memory.model_state(expert_params, model_split=self.experts.ep_degree * self.pp_degree,
                                  sharding=self.experts.moe_sharding_degree, stage=self.sharding.stage,
                                  mixed=self.amp.enabled and self.amp.pure)


_DEFAULTS: dict[str, Any] = {}


def _defaults() -> dict[str, Any]:
    """Resolved's field defaults (immutable values: `_build` shares them, as __init__ does)."""
    if not _DEFAULTS:
        _DEFAULTS.update({f.name: f.default for f in dc_fields(Resolved) if f.default is not MISSING})
    return _DEFAULTS
