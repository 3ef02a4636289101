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
from .hybrid_group import AXES, SEQUENCE_AXES, AxisGroup, HybridGroup
from .rng import seed_streams

__all__ = ["AXES", "SEQUENCE_AXES", "AxisGroup", "HybridGroup", "communicator_options", "current", "destroy", "init",
           "mesh_over"]


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
    _STATE.current = _build(resolved, rank, world, timeout)
    return _STATE.current


def _build(resolved: Resolved, rank: int, world: int, timeout: datetime.timedelta | None) -> HybridGroup:
    """Every axis's groups (every rank makes every group, in one order), the mesh over them, the expert and embedding
    groups, and this rank's random streams."""
    layout = resolved.process_groups()  # axis -> its groups, in the strategy's order
    axes = {axis: _make_groups(groups, resolved.nccl.get(axis, {}), rank, timeout) for axis, groups in layout.items()}
    p2p = communicator_options(resolved.nccl.get("pp_p2p", {}), dist.get_backend())
    # a communicator of its own for the pipeline's send/recv (pp_configs.p2p_nccl_config), else the pp group
    pp_p2p = _make_groups(layout["pp"], resolved.nccl["pp_p2p"], rank, timeout) if p2p else axes["pp"]
    # The mesh wraps the groups just made (they carry parallel.init's timeout and the NCCL options, which
    # init_device_mesh's own groups would not): rank = the row-major index of its coordinates, axes in order.
    order = tuple(layout)
    rank_grid = torch.arange(world).view(*resolved.topology.dims)
    device_type = "cuda" if dist.get_backend() == "nccl" else "cpu"
    mesh = DeviceMesh.from_group([axes[a].group for a in order], device_type, mesh=rank_grid,  # type: ignore[misc]
                                 mesh_dim_names=order)
    meshes: dict[str, DeviceMesh] = {}
    if resolved.experts.ep_degree > 1:
        meshes = _expert_groups(resolved, rank, timeout, device_type, layout["mp"], axes)
    embedding = _embedding_group(resolved, layout["pp"], axes["pp"].group, rank, timeout)
    mp_rng = seed_streams(resolved, mp_rank=axes["mp"].rank, pp_rank=axes["pp"].rank, pp_size=axes["pp"].size)
    assert pp_p2p.group is not None
    return HybridGroup(resolved=resolved, rank=rank, world_size=world, axes=axes, pp_p2p_group=pp_p2p.group, mesh=mesh,
                       mp_rng=mp_rng, embedding_group=embedding[0], embedding_ranks=embedding[1],
                       expert_mesh=meshes.get("expert_mesh"), expert_data_mesh=meshes.get("expert_data_mesh"))


def _embedding_group(resolved: Resolved, pp_groups: list[list[int]], pp_group: dist.ProcessGroup | None, rank: int,
                     timeout: datetime.timedelta | None) -> tuple[dist.ProcessGroup | None, tuple[int, ...]]:
    """This rank's embedding group and its ranks (see HybridGroup): per pp group, its first and its last stage's ranks;
    at pp_degree 2 they are the pp group itself, which is reused. (None, ()) where there is none."""
    p = resolved.pipeline
    if p.pp_degree == 1:
        return None, ()
    first, last = p.pp_rank_of(0), p.pp_rank_of(p.num_stages - 1)
    if first == last:  # a V: stage 0 and the last stage on pp rank 0, one Parameter, nothing to exchange
        return None, ()
    pairs = [[ranks[first], ranks[last]] for ranks in pp_groups]
    out: tuple[dist.ProcessGroup | None, tuple[int, ...]] = (None, ())
    for ranks, pair in zip(pp_groups, pairs):
        group = pp_group if len(ranks) == 2 and rank in ranks else None
        if len(ranks) > 2:  # every rank makes every group, in the same order
            group = dist.new_group(sorted(pair), timeout=timeout)
            _STATE.groups.append(group)
        if rank in pair:
            out = (group, tuple(pair))
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
                   mp_groups: list[list[int]], axes: dict[str, AxisGroup]) -> dict[str, DeviceMesh]:
    """The ep, moe_sharding and edp groups of the expert topology and the ep ∩ mp groups, into `axes`; the expert
    meshes (HybridGroup's expert_mesh, expert_data_mesh)."""
    experts = resolved.experts
    topology = _strategy.Topology(experts.order, experts.dims)
    for axis in ("edp", "moe_sharding", "ep"):
        axes[axis] = _make_groups(topology.groups(axis), resolved.nccl.get(axis, {}), rank, timeout)
    mp_of = {r: set(g) for g in mp_groups for r in g}
    shares = sorted({tuple(sorted(set(g) & mp_of[r])) for g in topology.groups("ep") for r in g})
    if len(shares[0]) > 1:  # (else every rank is alone: no groups of one to make)
        axes["ep_mp"] = _make_groups([list(s) for s in shares], {}, rank, timeout)
    grid = torch.arange(topology.world_size).view(*topology.dims)
    names = topology.order

    def mesh(dims: tuple[str, ...]) -> DeviceMesh:
        return mesh_over(grid, names, dims, [axes[d].group for d in dims], rank, device_type)  # type: ignore[misc]

    out = {"expert_mesh": mesh(tuple(d for d in ("edp", "ep", "moe_sharding") if d == "ep" or topology.degrees[d] > 1))}
    if experts.moe_sharding_degree > 1:
        out["expert_data_mesh"] = mesh(tuple(d for d in ("edp", "moe_sharding")
                                             if d == "moe_sharding" or topology.degrees[d] > 1))
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


def _make_groups(groups: list[list[int]], nccl: dict[str, Any], rank: int,
                 timeout: datetime.timedelta | None) -> AxisGroup:
    """Create every group of an axis (every rank creates every group, in the same order); this rank's record."""
    options = communicator_options(nccl, dist.get_backend())
    mine: AxisGroup | None = None
    for ranks in groups:
        group = dist.new_group(ranks, timeout=timeout, **options)
        _STATE.groups.append(group)
        if rank in ranks:
            mine = AxisGroup(group, ranks.index(rank), len(ranks), tuple(ranks))
    assert mine is not None, "every rank is in one group of each axis"
    return mine


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
    _forget_meshes()


def _forget_meshes() -> None:
    """Empty torch's DTensor caches, which key on every DeviceMesh they have seen and so keep it, and the process
    groups it holds, alive after `destroy`: a gloo group keeps three threads, and a process that inits again and
    again (a pool of test ranks, a run restarted in place) gathered hundreds, polling a fifth of a core per 300."""
    from torch.distributed.tensor import _redistribute
    from torch.distributed.tensor._collective_utils import MeshTopoInfo
    from torch.distributed.tensor._sharding_prop import ShardingPropagator
    from torch.distributed.tensor.debug import _clear_sharding_prop_cache

    _clear_sharding_prop_cache()
    ShardingPropagator._propagate_tensor_meta_cached.cache_clear()
    _redistribute._gen_transform_infos.cache_clear()
    _redistribute.clear_redistribute_planner_cache()
    MeshTopoInfo.build_from_mesh.cache_clear()


# Process groups still referenced at interpreter shutdown can abort the process (NCCL especially).
atexit.register(destroy)
