"""This rank's place in the hybrid layout: one small record per axis (`AxisGroup`: group, rank, size, ranks), the
mesh beside them, and the familiar flat names (`hcg.mp_group`, `hcg.dp_rank`, ...) read from the records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from strategy import Resolved

from .rng import ModelParallelRNG

__all__ = ["AXES", "AxisGroup", "EXPERT_AXES", "HybridGroup", "SEQUENCE_AXES"]

AXES = ("dp", "pp", "sharding", "sep", "cp", "mp")  # Paddle's default order, outermost first
# The expert topology's axes (ep_degree > 1), and ep_mp: the ranks of this rank's ep group that are also in its mp group.
EXPERT_AXES = ("ep", "moe_sharding", "edp", "ep_mp")
# The axes that split every row's tokens: their ranks read the same batch, hold replicas of every parameter, and each
# one's loss is its share of the rows, so gradients are summed over them.
SEQUENCE_AXES = ("sep", "cp")


@dataclass(frozen=True, slots=True)
class AxisGroup:
    """One axis of this rank's layout: `group`, the ranks that differ from this one only on that axis (None for an
    expert axis at ep_degree 1), `rank` its position there, `size` the axis's degree, `ranks` the group's global ranks
    in axis order. An axis of degree 1 has a group of one."""

    group: dist.ProcessGroup | None
    rank: int
    size: int
    ranks: tuple[int, ...]


ALONE = AxisGroup(None, 0, 1, ())  # an expert axis where there are no experts to split
T = TypeVar("T")


class _Part(Generic[T]):
    """`hcg.<axis>_<part>`: a part of one axis's record (a dense axis's group is never None)."""

    __slots__ = ("axis", "part")

    def __init__(self, axis: str, part: str) -> None:
        self.axis, self.part = axis, part

    def __get__(self, hcg: HybridGroup, owner: type | None = None) -> T:
        return getattr(hcg.axes.get(self.axis, ALONE), self.part)


@dataclass(frozen=True, slots=True, kw_only=True)
class HybridGroup:
    """This rank's place in the hybrid layout, and the groups to talk to its peers.

    `axis(name)` is the record of an axis (`AxisGroup`): the six dense ones (dp, pp, sharding, sep, cp, mp) and, at
    ep_degree > 1, the expert topology's (ep splits the experts, moe_sharding ranks hold the same block and shard its
    state, edp ranks hold the same experts beyond them, ep_mp the ep ranks inside this rank's mp group, which hold the
    same tokens). `<axis>_group`, `<axis>_rank`, `<axis>_size` and `<axis>_ranks` read the same records.

    Attributes:
        resolved: the effective strategy every rank agreed on.
        axes: the records, by axis name (the expert axes only at ep_degree > 1).
        data_rank / data_size: which of the distinct batches this rank takes: ranks that differ only in their
            pp, sep, cp or mp position read the same batch; dp and sharding positions read different ones
            (data_rank = dp_rank · sharding_size + sharding_rank, as Paddle's data loaders count). Ready for
            `DistributedSampler(num_replicas=hcg.data_size, rank=hcg.data_rank)`.
        pp_p2p_group: the pipeline's point-to-point group: pp_group, unless pp_configs.p2p_nccl_config asks for a
            communicator of its own (NCCL only).
        mesh: the same layout as one DeviceMesh over these very groups, dims named by axis in the strategy's order
            (size-1 dims kept: `mesh["pp"]` always exists), for torch's DTensor-based APIs.
        meshes: meshes derived from `mesh` when first needed ("state": a checkpoint's, "data": FSDP2's), which go
            with this group.
    """

    resolved: Resolved
    rank: int
    world_size: int
    axes: Mapping[str, AxisGroup]
    pp_p2p_group: dist.ProcessGroup
    mesh: DeviceMesh
    # This pipeline stage's expert ranks as a mesh, dims ("edp", "ep", "moe_sharding") less those of degree 1 but ep:
    # an expert block is Shard(0) over ep, its FSDP2 shard Shard(0) of that over moe_sharding (checkpoints).
    expert_mesh: DeviceMesh | None = None
    # What FSDP2 shards the experts over at moe_sharding_degree > 1: ("edp", "moe_sharding"), or ("moe_sharding",).
    expert_data_mesh: DeviceMesh | None = None
    # This rank's model-parallel random stream at mp_degree > 1 (tensor_init_seed; `parallel.model_parallel_rng()`).
    mp_rng: ModelParallelRNG | None = None
    # The embedding group (Megatron's name; Paddle's shared-weight group): the ranks of this pp group's first and last
    # stage, which hold the two copies of a weight tied across stages (an LM head sharing the embedding's), the first
    # stage's rank first. None on the other ranks, at pp_degree 1, and where one rank holds both stages (a V).
    embedding_group: dist.ProcessGroup | None = None
    embedding_ranks: tuple[int, ...] = field(default=())
    # Meshes made from this layout on first use, by what they are for ("state": the checkpoint's, "data": FSDP2's
    # outside dp): kept here so that they, and the groups they hold, go when this layout does.
    meshes: dict[str, DeviceMesh] = field(default_factory=dict, repr=False, compare=False)

    dp_group = _Part[dist.ProcessGroup]("dp", "group")
    dp_rank = _Part[int]("dp", "rank")
    dp_size = _Part[int]("dp", "size")
    dp_ranks = _Part[tuple[int, ...]]("dp", "ranks")
    pp_group = _Part[dist.ProcessGroup]("pp", "group")
    pp_rank = _Part[int]("pp", "rank")
    pp_size = _Part[int]("pp", "size")
    pp_ranks = _Part[tuple[int, ...]]("pp", "ranks")
    sharding_group = _Part[dist.ProcessGroup]("sharding", "group")
    sharding_rank = _Part[int]("sharding", "rank")
    sharding_size = _Part[int]("sharding", "size")
    sharding_ranks = _Part[tuple[int, ...]]("sharding", "ranks")
    sep_group = _Part[dist.ProcessGroup]("sep", "group")
    sep_rank = _Part[int]("sep", "rank")
    sep_size = _Part[int]("sep", "size")
    sep_ranks = _Part[tuple[int, ...]]("sep", "ranks")
    cp_group = _Part[dist.ProcessGroup]("cp", "group")
    cp_rank = _Part[int]("cp", "rank")
    cp_size = _Part[int]("cp", "size")
    cp_ranks = _Part[tuple[int, ...]]("cp", "ranks")
    mp_group = _Part[dist.ProcessGroup]("mp", "group")
    mp_rank = _Part[int]("mp", "rank")
    mp_size = _Part[int]("mp", "size")
    mp_ranks = _Part[tuple[int, ...]]("mp", "ranks")
    ep_group = _Part[dist.ProcessGroup | None]("ep", "group")
    ep_rank = _Part[int]("ep", "rank")
    ep_size = _Part[int]("ep", "size")
    ep_ranks = _Part[tuple[int, ...]]("ep", "ranks")
    moe_sharding_group = _Part[dist.ProcessGroup | None]("moe_sharding", "group")
    moe_sharding_rank = _Part[int]("moe_sharding", "rank")
    moe_sharding_size = _Part[int]("moe_sharding", "size")
    moe_sharding_ranks = _Part[tuple[int, ...]]("moe_sharding", "ranks")
    edp_group = _Part[dist.ProcessGroup | None]("edp", "group")
    edp_rank = _Part[int]("edp", "rank")
    edp_size = _Part[int]("edp", "size")
    edp_ranks = _Part[tuple[int, ...]]("edp", "ranks")
    ep_mp_group = _Part[dist.ProcessGroup | None]("ep_mp", "group")
    ep_mp_rank = _Part[int]("ep_mp", "rank")
    ep_mp_size = _Part[int]("ep_mp", "size")
    ep_mp_ranks = _Part[tuple[int, ...]]("ep_mp", "ranks")

    def axis(self, name: str) -> AxisGroup:
        """The record of axis `name`: a dense axis, or an expert one (a group of one, None, without experts)."""
        if name not in AXES and name not in EXPERT_AXES:
            raise ValueError(f"unknown axis {name!r}; the axes are {', '.join(AXES + EXPERT_AXES)}")
        return self.axes.get(name, ALONE)

    def group(self, axis: str) -> dist.ProcessGroup:
        """The group of `axis` ("dp", "pp", "sharding", "sep", "cp", "mp", or at ep_degree > 1 "ep",
        "moe_sharding", "edp", "ep_mp")."""
        group = self.axis(axis).group
        if group is None:
            raise ValueError(f"hcg.group({axis!r}): there is no {axis} group at ep_degree 1")
        return group

    def with_axis(self, name: str, record: AxisGroup) -> HybridGroup:
        """A copy with axis `name`'s record replaced (a view of the layout that leaves out an axis)."""
        from dataclasses import replace

        return replace(self, axes={**self.axes, name: record})

    @property
    def data_rank(self) -> int:
        return self.dp_rank * self.sharding_size + self.sharding_rank

    @property
    def data_size(self) -> int:
        return self.dp_size * self.sharding_size

    @property
    def expert_grad_divisor(self) -> int:
        """What the sum of an expert's gradients over the ranks holding its block is divided by to be the mean over
        the data ranks, as the dense gradients are: the distinct batches (dp × sharding), times the mp ranks that
        route the same tokens in separate ep groups (each of those counts them once)."""
        return self.data_size * self.mp_size // self.ep_mp_size
