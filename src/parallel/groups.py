"""Process groups for hybrid parallelism: `init` builds the dp × mp layout from a strategy and makes it current.

Axis order follows PaddlePaddle: dp outermost, mp innermost, so the ranks of one mp group are adjacent
(dp2 × mp2: mp groups [0, 1], [2, 3]; dp groups [0, 2], [1, 3]).
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

__all__ = ["HybridGroup", "communicator_options", "current", "destroy", "init"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HybridGroup:
    """This rank's place in the hybrid layout, and the groups to talk to its peers.

    Attributes:
        resolved: the effective strategy every rank agreed on.
        mp_group / dp_group: the model-parallel group (ranks sharing one replica's shards) and the
            data-parallel group (ranks holding the same shard of different replicas).
        mesh: the same layout as a DeviceMesh with dims ("dp", "mp") over these very groups, for torch's
            DTensor-based APIs (distributed checkpoints, parallelize_module): one set of groups, not two.
    """

    resolved: Resolved
    rank: int
    world_size: int
    mp_group: dist.ProcessGroup
    mp_rank: int
    mp_size: int
    dp_group: dist.ProcessGroup
    dp_rank: int
    dp_size: int
    mp_ranks: tuple[int, ...] = field(default=())
    dp_ranks: tuple[int, ...] = field(default=())
    mesh: DeviceMesh | None = None


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
        dist.init_process_group(backend=backend, init_method="env://", timeout=timeout)
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

    mp_groups, dp_groups = resolved.process_groups()
    mine: dict[str, tuple[dist.ProcessGroup, list[int]]] = {}
    for name, layout in (("mp", mp_groups), ("dp", dp_groups)):
        options = communicator_options(resolved.nccl.get(name, {}), dist.get_backend())
        for ranks in layout:  # every rank creates every group, in the same order
            group = dist.new_group(ranks, timeout=timeout, **options)
            _STATE.groups.append(group)
            if rank in ranks:
                mine[name] = (group, ranks)
    (mp_group, mp_ranks), (dp_group, dp_ranks) = mine["mp"], mine["dp"]
    # The mesh wraps the groups just made (they carry parallel.init's timeout and the NCCL options, which
    # init_device_mesh's own groups would not): rank = dp_index * mp + mp_index, as the groups are laid out.
    rank_grid = torch.arange(world).view(resolved.dp_degree, resolved.mp_degree)
    device_type = "cuda" if dist.get_backend() == "nccl" else "cpu"
    mesh = DeviceMesh.from_group([dp_group, mp_group], device_type, mesh=rank_grid, mesh_dim_names=("dp", "mp"))
    _STATE.current = HybridGroup(
        resolved=resolved,
        rank=rank,
        world_size=world,
        mp_group=mp_group,
        mp_rank=mp_ranks.index(rank),
        mp_size=len(mp_ranks),
        dp_group=dp_group,
        dp_rank=dp_ranks.index(rank),
        dp_size=len(dp_ranks),
        mp_ranks=tuple(mp_ranks),
        dp_ranks=tuple(dp_ranks),
        mesh=mesh,
    )
    return _STATE.current


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
