"""The expert (MoE) topology of a strategy with ep_degree > 1: Paddle 3.3.1's EPHybridCommunicateGroup, with its
constraints as located errors, and the one it lifts.

Paddle builds, beside the dense topology, an expert topology over (pp, moe_sharding, ep) in the order's relative
order: ep splits the experts, moe_sharding ranks hold the same expert block (and shard its state), and dense sharding
is split into moe_sharding × the rest, placed around pp. Paddle asserts dp_degree 1 and pp × moe_sharding × ep = the
world; here, as Megatron-core's expert-data-parallel group does, the factor of the world that pp × moe_sharding × ep
leaves over replicates the experts: it is the expert topology's outermost axis, "edp". For every file Paddle accepts
it is 1 and the groups are exactly Paddle's. (fleet.py `_init_hybrid_parallel_env`, topology.py
`EPHybridCommunicateGroup`.)
"""

# Annotations stay evaluated (no `from __future__ import annotations`): see layout.py.

import math
from collections.abc import Callable, Mapping
from typing import NamedTuple

from .._generated.distributed_strategy_pb2 import DistributedStrategy
from .._generated.hybrid_parallel_pb2 import HybridConfig
from ..notes import Kind, Note
from ..errors import Location, StrategyError
from . import layout
from .topology import Topology

__all__ = ["MOE_ORDER", "ExpertLayout", "expert_layout", "requested"]

# The order Paddle's MoE runs set (PaddleFleet's and PaddleFormers' scripts); Paddle's own default has no "ep".
MOE_ORDER = ("sharding", "moe_sharding", "pp", "sep", "cp", "dp", "ep", "mp")
REPLICAS = "edp"  # the expert topology's outermost axis: ranks that hold the same experts outside moe_sharding


class ExpertLayout(NamedTuple):
    """The expert topology (`topology`: edp, then pp, moe_sharding and ep in the order's relative order) and the
    dense order Paddle builds beside it (sharding right after pp)."""

    topology: Topology
    dense_order: tuple[str, ...]

    @property
    def ep(self) -> int:
        return self.topology.degrees["ep"]

    @property
    def replicas(self) -> int:
        return self.topology.degrees[REPLICAS]


def requested(s: DistributedStrategy, world_size: int | None) -> ExpertLayout | None:
    """The expert layout the file asks for (for explain), or None without ep."""
    from ..schema import support

    loaded = support.recall(s)
    hybrid = s.hybrid_configs
    return expert_layout(hybrid, layout.degrees(hybrid, world_size, []), loaded.positions, loaded.source, [],
                         world_known=layout.world_size_given(world_size))


def expert_layout(hybrid: HybridConfig, degrees: Mapping[str, int], positions: Mapping[str, Location],
                  source: str | None, notes: list[Note], *, world_known: bool = True) -> ExpertLayout | None:
    """The expert layout of `hybrid` at its dense `degrees` (by field, dp inferred), or None when ep_degree and
    moe_sharding_degree are 1, or when the world size is not known (`world_known` false) and the degrees alone do
    not make one the expert axes divide (the checks of the order and the pairs still run).

    Raises:
        StrategyError: what Paddle asserts (or silently gets wrong) under its expert topology, located at the field.
    """
    p = layout.plan()
    experts = {a.name: getattr(hybrid, a.field) for a in p.expert_axes}
    ep, moe = experts["ep"], experts["moe_sharding"]
    if ep == 1 and moe == 1:
        return None

    def fail(field: str, message: str) -> StrategyError:
        path = f"hybrid_configs.{field}"
        return StrategyError.at(positions.get(path) or Location(source), message, field=path)

    _check_pairs(ep, moe, degrees, fail)
    listed = _listed_order(hybrid, ep, notes, fail)
    sharding, pp = degrees["sharding_degree"], degrees["pp_degree"]
    if sharding % moe:
        raise fail("moe_sharding_degree", f"moe_sharding_degree {moe} does not divide sharding_degree {sharding}: "
                   "dense sharding is split into moe_sharding × the rest; make sharding_degree a multiple of it")
    world = math.prod(degrees[a.field] for a in p.axes)
    if world % (pp * moe * ep) and not world_known:
        return None  # validated without a world size: the degrees alone (dp 1) need not fill the expert axes
    if world % (pp * moe * ep):
        raise fail("ep_degree", f"pp_degree {pp} × moe_sharding_degree {moe} × ep_degree {ep} = {pp * moe * ep} "
                   f"does not divide the world size {world}: the expert topology lays its ranks out over them; change "
                   "the degrees")
    names = (REPLICAS,) + tuple(n for n in listed if n in ("pp", "moe_sharding", "ep"))
    sizes = {REPLICAS: world // (pp * moe * ep), "pp": pp, "moe_sharding": moe, "ep": ep}
    topology = Topology.of(sizes, names)
    # Paddle's dense topology: sharding split into moe_sharding (before pipe when the order lists it first) and
    # dense sharding (right after pipe); with one of them 1, sharding is one axis there.
    moe_first = names.index("moe_sharding") < names.index("pp")
    if pp > 1 and 1 < moe < sharding and moe_first:
        raise fail("moe_sharding_degree", f"moe_sharding_degree {moe} before pp (pp_degree {pp}) in the order, with "
                   f"dense sharding {sharding // moe} after it: Paddle's sharding group then spans the pipeline stages, "
                   "which no one axis of the mesh does, and this runtime refuses that layout; set moe_sharding_degree "
                   f"to 1 or to sharding_degree {sharding}, or pp_degree: 1")
    found = ExpertLayout(topology, _dense_order(listed, moe_first and moe == sharding > 1))
    if pp > 1:
        _check_stages(found, degrees, fail)
    return found


_Fail = Callable[[str, str], StrategyError]  # the error at a hybrid_configs field


def _check_pairs(ep: int, moe: int, degrees: Mapping[str, int], fail: _Fail) -> None:
    """The degrees Paddle refuses beside the expert ones: moe_sharding without ep, sep or cp with ep."""
    if ep == 1:
        raise fail("moe_sharding_degree", f"moe_sharding_degree {moe} shards the experts' state, but ep_degree is 1: "
                   "Paddle builds its expert groups only with ep_degree > 1 (without, its plain topology lays out ranks "
                   "that do not exist); set ep_degree > 1 or moe_sharding_degree: 1")
    for other in ("sep_degree", "cp_degree"):
        if degrees[other] > 1:
            why = ("Paddle asserts sep_degree 1 under its expert topology" if other == "sep_degree" else
                   "Paddle carves cp out of each sharding group under its expert topology, this project runs cp as an "
                   "axis of its own")
            raise fail("ep_degree", f"ep_degree {ep} with {other} {degrees[other]}: {why}; set one of them to 1")


def _listed_order(hybrid: HybridConfig, ep: int, notes: list[Note], fail: _Fail) -> tuple[str, ...]:
    """The order the file lists, which must name ep and moe_sharding; Paddle's MoE order (noted) when it lists none."""
    listed = tuple(hybrid.order)
    order_path = "hybrid_configs.order"
    suggestion = ", ".join(f'"{n}"' for n in MOE_ORDER)
    if not listed:
        notes.append(Note(order_path, Kind.INFO, "Paddle's MoE order", text=(
            f"{order_path} is not set and ep_degree is {ep}: using the order Paddle's MoE runs set "
            f"({', '.join(MOE_ORDER)}); Paddle's own default lists no ep and would ignore ep_degree.")))
        return MOE_ORDER
    if "ep" not in listed:
        raise fail("order", f"{order_path} does not list \"ep\" while ep_degree is {ep}: Paddle then builds its plain "
                   "topology and runs with ep_degree silently ignored; list \"ep\" and \"moe_sharding\", e.g. "
                   f"order: [{suggestion}]")
    if "moe_sharding" not in listed:
        raise fail("order", f"{order_path} lists \"ep\" but not \"moe_sharding\" (Paddle asserts both under its "
                   f"expert topology); list \"moe_sharding\" too, e.g. order: [{suggestion}]")
    return listed


def _dense_order(listed: tuple[str, ...], sharding_before_pp: bool) -> tuple[str, ...]:
    """The dense axes in the order's relative order, sharding moved next to pp: before it when moe_sharding is all of
    sharding and comes first, else right after it."""
    p = layout.plan()
    dense = list(layout.complete_order(tuple(n for n in listed if n in p.default_order), p.default_order))
    dense.remove("sharding")
    dense.insert(dense.index("pp") + (0 if sharding_before_pp else 1), "sharding")
    return tuple(dense)


def _check_stages(found: ExpertLayout, degrees: Mapping[str, int], fail: _Fail) -> None:
    """Every rank's pipeline stage is the same in the dense and the expert topology (Paddle's always is: there the
    expert topology covers the world with pp, moe_sharding and ep alone)."""
    p = layout.plan()
    dense = Topology.of({a.name: degrees[a.field] for a in p.axes}, found.dense_order)
    for rank in range(dense.world_size):
        if dense.coordinates(rank)["pp"] != found.topology.coordinates(rank)["pp"]:
            raise fail("ep_degree", f"with ep_degree {found.ep} the experts' {found.replicas} replicas (the world "
                       f"beyond pp × moe_sharding × ep) put rank {rank} in another pipeline stage than the dense "
                       "layout does; set dp_degree: 1 (Paddle's layout) or pp_degree: 1")
