"""Process groups for hybrid parallelism: `init` builds every axis's groups and one mesh, and makes them current.

Axis order follows PaddlePaddle (dp, pp, sharding, sep, cp, mp, or the strategy's `order`): mp innermost, so the
ranks of one mp group are adjacent (dp2 × mp2: mp groups [0, 1], [2, 3]; dp groups [0, 2], [1, 3]).
"""

from __future__ import annotations

import atexit
import datetime
import os
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

import strategy as _strategy
from strategy import Resolved, StrategyError

from .consensus import agree
from .rng import ModelParallelRNG, seed_streams

__all__ = ["AXES", "HybridGroup", "communicator_options", "current", "destroy", "init", "mesh_over"]


AXES = ("dp", "pp", "sharding", "sep", "cp", "mp")  # Paddle's default order, outermost first
# The axes that split every row's tokens: their ranks read the same batch, hold replicas of every parameter, and each
# one's loss is its share of the rows, so gradients are summed over them.
SEQUENCE_AXES = ("sep", "cp")


@dataclass(frozen=True, slots=True, kw_only=True)
class HybridGroup:
    """This rank's place in the hybrid layout, and the groups to talk to its peers.

    For each axis of the strategy (dp, pp, sharding, sep, cp, mp): `<axis>_group` (the ranks that differ from
    this one only in their position on that axis), `<axis>_rank` (this rank's position there), `<axis>_size`
    (the axis's degree) and `<axis>_ranks` (the group's global ranks, in axis order). Size-1 axes have a group of
    one, so code can use any axis unconditionally.

    Attributes:
        resolved: the effective strategy every rank agreed on.
        data_rank / data_size: which of the distinct batches this rank takes: ranks that differ only in their
            pp, sep, cp or mp position read the same batch; dp and sharding positions read different ones
            (data_rank = dp_rank · sharding_size + sharding_rank, as Paddle's data loaders count). Ready for
            `DistributedSampler(num_replicas=hcg.data_size, rank=hcg.data_rank)`.
        pp_p2p_group: the pipeline's point-to-point group: pp_group, unless pp_configs.p2p_nccl_config asks for a
            communicator of its own (NCCL only).
        mesh: the same layout as one DeviceMesh over these very groups, dims named by axis in the strategy's order
            (size-1 dims kept: `mesh["pp"]` always exists), for torch's DTensor-based APIs.
    """

    resolved: Resolved
    rank: int
    world_size: int
    dp_group: dist.ProcessGroup
    dp_rank: int
    dp_size: int
    dp_ranks: tuple[int, ...]
    pp_group: dist.ProcessGroup
    pp_rank: int
    pp_size: int
    pp_ranks: tuple[int, ...]
    sharding_group: dist.ProcessGroup
    sharding_rank: int
    sharding_size: int
    sharding_ranks: tuple[int, ...]
    sep_group: dist.ProcessGroup
    sep_rank: int
    sep_size: int
    sep_ranks: tuple[int, ...]
    cp_group: dist.ProcessGroup
    cp_rank: int
    cp_size: int
    cp_ranks: tuple[int, ...]
    mp_group: dist.ProcessGroup
    mp_rank: int
    mp_size: int
    mp_ranks: tuple[int, ...]
    pp_p2p_group: dist.ProcessGroup
    mesh: DeviceMesh
    # The expert topology (ep_degree > 1; Paddle's EPHybridCommunicateGroup): ep splits the experts, moe_sharding
    # ranks hold the same expert block and shard its state, edp ranks hold the same experts beyond them (the world
    # beyond pp × moe_sharding × ep). At ep_degree 1 there are no expert groups (None).
    ep_group: dist.ProcessGroup | None = None
    ep_rank: int = 0
    ep_size: int = 1
    ep_ranks: tuple[int, ...] = ()
    moe_sharding_group: dist.ProcessGroup | None = None
    moe_sharding_rank: int = 0
    moe_sharding_size: int = 1
    moe_sharding_ranks: tuple[int, ...] = ()
    edp_group: dist.ProcessGroup | None = None
    edp_rank: int = 0
    edp_size: int = 1
    edp_ranks: tuple[int, ...] = ()
    # The ranks of this rank's ep group that are also in its mp group: they hold the same tokens, so each routes
    # a share of them (ep_mp_rank's) and the shares are gathered after the combine; a group of one otherwise.
    ep_mp_group: dist.ProcessGroup | None = None
    ep_mp_rank: int = 0
    ep_mp_size: int = 1
    ep_mp_ranks: tuple[int, ...] = ()
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
    embedding_ranks: tuple[int, ...] = ()

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

    def group(self, axis: str) -> dist.ProcessGroup:
        """The group of `axis` ("dp", "pp", "sharding", "sep", "cp" or "mp")."""
        if axis not in AXES:
            raise ValueError(f"unknown axis {axis!r}; the axes are {', '.join(AXES)}")
        return getattr(self, f"{axis}_group")


@dataclass(slots=True)
class _State:
    current: HybridGroup | None = None
    groups: list[dist.ProcessGroup] = field(default_factory=list)
    owns_default: bool = False


_STATE = _State()


def init(
    strategy: _strategy.DistributedStrategy | str | os.PathLike[str] | None = None,
    *,
    policy: str = "strict",
    backend: str | None = None,
    timeout: datetime.timedelta | float | None = None,
) -> HybridGroup:
    """Initialise torch.distributed (env://, as torchrun sets it) unless it already is, then build the groups.

    Args:
        strategy: a DistributedStrategy, a path to a strategy file, or None for the defaults.
        policy: passed to `strategy.load` and `strategy.resolve` ("strict" or "warn").
        backend: default "nccl" when CUDA is available, else "gloo".
        timeout: for the default group (when created here) and the new groups; seconds or a timedelta.

    Raises:
        StrategyError: on every rank, when any rank's strategy fails to load or resolve, or when the
            ranks hold different strategies (naming the ranks and the settings that differ).

    Example::

        hcg = parallel.init("tp.prototxt")       # under torchrun --nproc-per-node 2
        layer = parallel.ColumnParallelLinear(1024, 4096)
    """
    if _STATE.current is not None:
        raise RuntimeError("parallel.init was already called; call parallel.destroy() first")
    if isinstance(timeout, (int, float)):
        timeout = datetime.timedelta(seconds=timeout)
    if not dist.is_initialized():
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend == "nccl" and "LOCAL_RANK" in os.environ:
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        _init_default_group(backend, timeout)
        _STATE.owns_default = True
    rank, world = dist.get_rank(), dist.get_world_size()

    # Every rank loads and resolves, then all exchange what they got *before* any subgroup is made:
    # a rank that failed still joins the exchange, so the others raise too instead of hanging.
    resolved, error = None, None
    try:
        message = _as_message(strategy, policy)
        resolved = _strategy.resolve(message, world_size=world, policy=policy)
    except StrategyError as e:
        error = e
    agree(resolved, error, rank=rank, world_size=world)
    assert resolved is not None

    layout = resolved.process_groups()  # axis -> its groups, in the strategy's order
    mine: dict[str, Any] = {}
    for axis, groups in layout.items():
        mine.update(_make_groups(axis, groups, resolved.nccl.get(axis, {}), rank, timeout))
    p2p = communicator_options(resolved.nccl.get("pp_p2p", {}), dist.get_backend())
    if p2p:  # a communicator of its own for the pipeline's send/recv (pp_configs.p2p_nccl_config)
        mine.update({"pp_p2p_group": _make_groups("pp", layout["pp"], resolved.nccl["pp_p2p"], rank, timeout)["pp_group"]})
    else:
        mine["pp_p2p_group"] = mine["pp_group"]
    # The mesh wraps the groups just made (they carry parallel.init's timeout and the NCCL options, which
    # init_device_mesh's own groups would not): rank = the row-major index of its coordinates, axes in order.
    order = tuple(layout)
    rank_grid = torch.arange(world).view(*(resolved.degrees[a] for a in order))
    device_type = "cuda" if dist.get_backend() == "nccl" else "cpu"
    mesh = DeviceMesh.from_group([mine[f"{a}_group"] for a in order], device_type, mesh=rank_grid, mesh_dim_names=order)
    if resolved.experts.ep_degree > 1:
        mine.update(_expert_groups(resolved, rank, timeout, device_type, layout["mp"]))
    mine.update(_embedding_groups(resolved, layout["pp"], mine["pp_group"], rank, timeout))
    mp_rng = seed_streams(resolved, mp_rank=mine["mp_rank"], pp_rank=mine["pp_rank"], pp_size=mine["pp_size"])
    _STATE.current = HybridGroup(resolved=resolved, rank=rank, world_size=world, mesh=mesh, mp_rng=mp_rng, **mine)
    return _STATE.current


def _embedding_groups(resolved: Resolved, pp_groups: list[list[int]], pp_group: dist.ProcessGroup, rank: int,
                      timeout: datetime.timedelta | None) -> dict[str, Any]:
    """This rank's embedding group (see HybridGroup): per pp group, its first and its last stage's ranks; at pp_degree
    2 they are the pp group itself, which is reused."""
    p = resolved.pipeline
    if p.pp_degree == 1:
        return {}
    first, last = p.pp_rank_of(0), p.pp_rank_of(p.num_stages - 1)
    if first == last:  # a V: stage 0 and the last stage on pp rank 0, one Parameter, nothing to exchange
        return {}
    pairs = [[ranks[first], ranks[last]] for ranks in pp_groups]
    out: dict[str, Any] = {}
    for ranks, pair in zip(pp_groups, pairs):
        group = pp_group if len(ranks) == 2 and rank in ranks else None
        if len(ranks) > 2:  # every rank makes every group, in the same order
            group = dist.new_group(sorted(pair), timeout=timeout)
            _STATE.groups.append(group)
        if rank in pair:
            out = {"embedding_group": group, "embedding_ranks": tuple(pair)}
    return out


def _init_default_group(backend: str, timeout: datetime.timedelta | None) -> None:
    """init_process_group over env:// (as torchrun sets it). Under torchrun, whose rendezvous store outlives a
    restart (pytorch/pytorch#135712), every key this job's groups put there is prefixed by the restart count: the
    ranks of a restarted job must not read the dead attempt's addresses."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    if attempt is None:
        dist.init_process_group(backend=backend, init_method="env://", timeout=timeout)
        return
    from torch.distributed.constants import default_pg_timeout
    from torch.distributed.rendezvous import rendezvous

    limit = timeout or default_pg_timeout
    store, rank, world = next(rendezvous("env://", timeout=limit))
    store.set_timeout(limit)
    dist.init_process_group(backend=backend, store=dist.PrefixStore(f"default_pg/attempt_{attempt}", store), rank=rank,
                            world_size=world, timeout=timeout)


def _expert_groups(resolved: Resolved, rank: int, timeout: datetime.timedelta | None, device_type: str,
                   mp_groups: list[list[int]]) -> dict[str, Any]:
    """The ep, moe_sharding and edp groups of the expert topology, the ep ∩ mp groups, and the expert meshes."""
    experts = resolved.experts
    topology = _strategy.Topology(experts.order, experts.dims)
    out: dict[str, Any] = {}
    for axis in ("edp", "moe_sharding", "ep"):
        out.update(_make_groups(axis, topology.groups(axis), resolved.nccl.get(axis, {}), rank, timeout))
    mp_of = {r: set(g) for g in mp_groups for r in g}
    shares = sorted({tuple(sorted(set(g) & mp_of[r])) for g in topology.groups("ep") for r in g})
    if len(shares[0]) > 1:  # (else every rank is alone: no groups of one to make)
        out.update(_make_groups("ep_mp", [list(s) for s in shares], {}, rank, timeout))
    grid = torch.arange(topology.world_size).view(*topology.dims)
    names = topology.order
    mesh_dims = tuple(d for d in ("edp", "ep", "moe_sharding") if d == "ep" or topology.degrees[d] > 1)
    out["expert_mesh"] = mesh_over(grid, names, mesh_dims, [out[f"{d}_group"] for d in mesh_dims], rank, device_type)
    if experts.moe_sharding_degree > 1:
        data_dims = tuple(d for d in ("edp", "moe_sharding") if d == "moe_sharding" or topology.degrees[d] > 1)
        out["expert_data_mesh"] = mesh_over(grid, names, data_dims, [out[f"{d}_group"] for d in data_dims], rank,
                                            device_type)
    return out


def mesh_over(grid: torch.Tensor, names: tuple[str, ...], dims: tuple[str, ...], groups: list[dist.ProcessGroup],
              rank: int, device_type: str) -> DeviceMesh:
    """A mesh with `dims` (in that order, whatever their order in `grid`, whose axes are `names`) over the ranks
    that share `rank`'s coordinates on the other axes, wrapping `groups` (one per dim, already made)."""
    along = [names.index(d) for d in dims]
    others = [i for i in range(len(names)) if i not in along]
    moved = grid.permute(*others, *along)
    mine = tuple((moved == rank).nonzero()[0][: len(others)].tolist())
    if len(dims) == 1:
        return DeviceMesh.from_group(groups[0], device_type, mesh_dim_names=dims)
    return DeviceMesh.from_group(groups, device_type, mesh=moved[mine], mesh_dim_names=dims)


def _make_groups(axis: str, groups: list[list[int]], nccl: dict[str, Any], rank: int,
                 timeout: datetime.timedelta | None) -> dict[str, Any]:
    """Create every group of `axis` (every rank creates every group, in the same order); this rank's as fields."""
    options = communicator_options(nccl, dist.get_backend())
    out: dict[str, Any] = {}
    for ranks in groups:
        group = dist.new_group(ranks, timeout=timeout, **options)
        _STATE.groups.append(group)
        if rank in ranks:
            out = {f"{axis}_group": group, f"{axis}_rank": ranks.index(rank), f"{axis}_size": len(ranks),
                   f"{axis}_ranks": tuple(ranks)}
    return out


def communicator_options(settings: dict[str, Any], backend: str) -> dict[str, Any]:
    """`new_group` keyword arguments for a group's NCCLConfig settings (resolved.nccl["mp"]); none unless NCCL.

    commName becomes the group's description (NCCL logs, flight recorder); nchannels caps the CTAs (channels)
    of the communicator's kernels. The other NCCLConfig fields have no per-communicator knob in torch and are
    noted by `strategy.resolve`.
    """
    if not settings or backend != "nccl":
        return {}
    kwargs: dict[str, Any] = {}
    if settings.get("commName"):
        kwargs["group_desc"] = settings["commName"]
    if settings.get("nchannels"):
        options = dist.ProcessGroupNCCL.Options()
        options.config.max_ctas = settings["nchannels"]
        kwargs["pg_options"] = options
    return kwargs


def _as_message(value: object, policy: str) -> _strategy.DistributedStrategy:
    if value is None:
        return _strategy.DistributedStrategy()
    if isinstance(value, _strategy.DistributedStrategy):
        return value
    if isinstance(value, (str, os.PathLike)):
        return _strategy.load(value, policy=policy)
    raise TypeError(f"strategy must be a DistributedStrategy, a path or None, got {type(value).__name__}")


def current() -> HybridGroup:
    """The group made current by `init`; RuntimeError before it."""
    if _STATE.current is None:
        raise RuntimeError("no hybrid group: call parallel.init(strategy) first (under torchrun)")
    return _STATE.current


def destroy() -> None:
    """Release the groups `init` made, and the default group if `init` created it. Safe to call twice."""
    if dist.is_initialized():
        for group in _STATE.groups:
            dist.destroy_process_group(group)
        if _STATE.owns_default:
            dist.destroy_process_group()
    _STATE.groups.clear()
    _STATE.current = None
    _STATE.owns_default = False


# Process groups still referenced at interpreter shutdown can abort the process (NCCL especially).
atexit.register(destroy)
