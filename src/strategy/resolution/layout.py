"""The hybrid layout a strategy asks for: each axis's degree (dp inferred), the axes' order, each group's NCCL settings.

Read generically from the schema's (axis), (infer_value), (axis_order) and (group) options.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): a NamedTuple's string annotations are
# compiled at class creation, which every `strategy` command pays at start.

from collections.abc import Callable, Mapping
import functools
import math
import operator
import os
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import schema
from ..schema import support
from .._generated.distributed_strategy_pb2 import DistributedStrategy
from .._generated.hybrid_parallel_pb2 import HybridConfig
from .._generated.strategy_options_pb2 import IMPLEMENTED
from .axis_order import complete_order
from ..notes import Kind, Note
from ..errors import Location, StrategyError

if TYPE_CHECKING:
    from .topology import Topology

__all__ = ["Axis", "complete_order", "env_is_set", "degrees", "has_experts", "nccl", "order", "plan", "requested"]


class Axis(NamedTuple):
    field: str  # the degree's field: "dp_degree"
    name: str  # its (axis): "dp"
    infer: int | None  # the (infer_value) meaning "whatever the world size leaves over"


class _Comm(NamedTuple):
    configs: str  # the HybridConfig message field: "pp_configs"
    field: str  # its NCCLConfig field: "p2p_nccl_config"
    group: str  # the (group) it sets up: "pp_p2p"
    gate: str | None  # the degree that must be > 1 for it to take effect


class _Plan(NamedTuple):
    axes: tuple[Axis, ...]  # in field order
    fields: tuple[str, ...]  # their degree fields
    read: Callable[[HybridConfig], tuple[int, ...]]  # a HybridConfig's degrees, in `fields` order, in one call
    inferable: tuple[Axis, ...]  # the axes with an (infer_value)
    default_order: tuple[str, ...]  # the (allowed) values of the (axis_order) field that are (axis) names, outermost first
    expert_axes: tuple[Axis, ...]  # the degrees with an (expert_axis): ep, moe_sharding (never inferred)
    read_experts: Callable[[HybridConfig], tuple[int, ...]]  # their degrees, in one call
    # The NCCLConfig fields with a (group) whose status is implemented, by HybridConfig message, in order.
    comm_by_configs: tuple[tuple[str, tuple[_Comm, ...]], ...]


@functools.cache
def plan() -> _Plan:
    """What the layout needs from the schema, read once from the descriptors."""
    hybrid = schema.ROOT.fields_by_name["hybrid_configs"]
    fields = HybridConfig.DESCRIPTOR.fields
    axes = tuple(Axis(f.name, schema.option(f, "axis"), schema.option(f, "infer_value")) for f in fields if schema.option(f, "axis"))
    order = next(f for f in fields if schema.option(f, "axis_order"))
    experts = tuple(Axis(f.name, schema.option(f, "expert_axis"), None) for f in fields if schema.option(f, "expert_axis"))
    allowed = schema.option(order, "allowed")
    default = tuple(name for name in allowed if name in {a.name for a in axes})
    assert sorted(allowed) == sorted([a.name for a in axes] + [a.name for a in experts]), (allowed, axes, experts)
    comm = tuple(
        _Comm(f.name, inner.name, schema.option(inner, "group"), schema.option(f, "active_when_parallel"))
        for f in fields
        if f.message_type is not None
        for inner in f.message_type.fields
        if schema.option(inner, "group") and support.status((hybrid, f, inner)).support == IMPLEMENTED
    )
    names = tuple(a.field for a in axes)
    by_configs = {c.configs: tuple(d for d in comm if d.configs == c.configs) for c in comm}
    return _Plan(axes, names, operator.attrgetter(*names), tuple(a for a in axes if a.infer is not None),
                 default, experts, operator.attrgetter(*(a.field for a in experts)), tuple(by_configs.items()))


def world_size_given(world_size: int | None) -> bool:
    """Whether a world size is known: given, or in WORLD_SIZE (else the degrees' product stands in for it)."""
    return world_size is not None or _env_world_size() is not None


def has_experts(hybrid: HybridConfig) -> bool:
    """Whether an expert degree (ep, moe_sharding) is above 1: the file asks for an expert topology."""
    return max(plan().read_experts(hybrid)) > 1


def degrees(hybrid: HybridConfig, world_size: int | None, notes: list[Note]) -> dict[str, int]:
    """Each degree by field name, the inferred one (dp_degree: -1) worked out from the world size."""
    p = plan()
    values = p.read(hybrid)
    out = dict(zip(p.fields, values))
    inferred = [a for a in p.inferable if out[a.field] == a.infer]
    known = math.prod(out[a.field] for a in p.axes if out[a.field] != a.infer) if inferred else math.prod(values)
    if world_size is None:
        world_size = _env_world_size()
    if world_size is None:
        for a in inferred:
            out[a.field] = 1
            notes.append(Note(f"hybrid_configs.{a.field}", Kind.INFERRED, "1", text=(
                f"hybrid_configs.{a.field} is {a.infer} (infer) and no world size was given (WORLD_SIZE is unset): using 1.")))
        return out
    if world_size < 1:
        raise StrategyError(f"world size must be >= 1, got {world_size}")
    shown = lambda: " × ".join(f"{name}={value}" for name, value in out.items())  # noqa: E731 - only for errors
    if inferred:
        a = inferred[0]
        if world_size % known:
            raise StrategyError(
                f"cannot infer {a.field}: world size {world_size} is not divisible by the product of the other degrees "
                f"({shown()}, product {known}); change the degrees or the number of ranks",
                field=f"hybrid_configs.{a.field}",
            )
        out[a.field] = world_size // known
        notes.append(Note(f"hybrid_configs.{a.field}", Kind.INFERRED, str(out[a.field]),
                          text=f"hybrid_configs.{a.field} inferred as {out[a.field]} from world size {world_size}."))
    elif known != world_size:
        fixes = [f"make their product {world_size}"]
        fixes += [f"set {a.field}: {a.infer} to infer it" for a in p.axes if a.infer is not None]
        raise StrategyError(
            f"the degrees {shown()} multiply to {known}, but the world size is {world_size}; {', or '.join(fixes)}",
            field="hybrid_configs",
        )
    return out


def exclusive(hybrid: HybridConfig, positions: Mapping[str, Location], source: str | None) -> None:
    """Degrees the file sets that cannot both be > 1 ((excludes) in the schema: sep and cp), an error located at both
    fields; checked before anything else, whatever the policy does with either."""
    p = plan()
    for field, other in _exclusions():
        if getattr(hybrid, field) > 1 and getattr(hybrid, other) > 1:
            degrees = dict(zip(p.fields, p.read(hybrid)))
            paths = [f"hybrid_configs.{name}" for name in (field, other)]
            where = positions.get(paths[1])
            raise StrategyError.at(
                positions.get(paths[0]) or Location(source),
                f"{paths[0]} ({degrees[field]}) and {paths[1]} ({degrees[other]}{f', at {where.prefix()}' if where else ''}) cannot "
                f"both be above 1 (Paddle refuses the pair too); keep one of them at 1", field=paths[0])


@functools.cache
def _exclusions() -> tuple[tuple[str, str], ...]:
    return tuple((f.name, schema.option(f, "excludes")) for f in HybridConfig.DESCRIPTOR.fields if schema.option(f, "excludes"))


def order(hybrid: HybridConfig, degrees: dict[str, int], positions: Mapping[str, Location], source: str | None) -> tuple[str, ...]:
    """All axis names, outermost first: the file's order completed with the left-out axes in their default places.

    The rules checked at load that each name is known and listed once; here, that no axis of degree > 1 is left out.
    """
    p = plan()
    listed = hybrid.order
    if not listed:
        return p.default_order
    listed = tuple(name for name in listed if name in p.default_order)  # without the expert axes
    missing = [a for a in p.axes if degrees[a.field] > 1 and a.name not in listed]
    if missing:
        path = "hybrid_configs.order"
        left_out = " and ".join(f"{a.name} (degree {degrees[a.field]})" for a in missing)
        wanted = set(listed) | {a.name for a in missing}
        example = ", ".join(f'"{name}"' for name in complete_order(listed, p.default_order) if name in wanted)
        raise StrategyError.at(
            positions.get(path) or Location(source),
            f"{path} leaves out {left_out}; list every axis whose degree is > 1, e.g. order: [{example}]",
            field=path,
        )
    return complete_order(listed, p.default_order)


def requested(s: DistributedStrategy, world_size: int | None) -> "Topology":
    """The topology the file asks for, also with degrees this project does not implement yet (for explain).

    Raises:
        StrategyError: the degrees do not fit the world size, or the order leaves out an axis of degree > 1.
    """
    p = plan()
    hybrid = s.hybrid_configs
    loaded = support.recall(s)
    by_field = degrees(hybrid, world_size, [])
    names = {a.field: a.name for a in p.axes}
    from .topology import Topology  # only explain asks: checking and resolving need no Topology

    return Topology.of({names[k]: v for k, v in by_field.items()}, order(hybrid, by_field, loaded.positions, loaded.source))


def nccl(hybrid: HybridConfig, given: Mapping[str, Any], degrees: dict[str, int], notes: list[Note]) -> dict[str, dict[str, Any]]:
    """The implemented NCCLConfig fields set for each group's communicator, keyed by the field's (group). `given`:
    what `hybrid` sets, by field name."""
    p = plan()
    out: dict[str, dict[str, Any]] = {}
    for configs, comms in p.comm_by_configs:
        message = given.get(configs)
        if message is None:
            continue  # the common case: looked up once per message, not once per communicator
        for c in comms:
            _nccl_one(hybrid, message, c, degrees, notes, out)
    return out


def _nccl_one(hybrid: HybridConfig, configs: Any, c: _Comm, degrees: dict[str, int], notes: list[Note],
              out: dict[str, dict[str, Any]]) -> None:
    """One communicator's NCCLConfig in `configs` (the hybrid_configs message of its group), when the file set it and
    its axis is active."""
    if c.gate is not None and (degrees[c.gate] if c.gate in degrees else getattr(hybrid, c.gate)) <= 1:  # ep: no axis
        return  # inactive: the support review notes each field set there
    if not configs.HasField(c.field):
        return
    message = getattr(configs, c.field)
    chosen = {f.name: v for f, v in message.ListFields() if schema.option(f, "support") == IMPLEMENTED}
    if chosen:
        out[c.group] = chosen
        notes.append(Note(f"hybrid_configs.{c.configs}.{c.field}", Kind.INFO, "applies to NCCL only", text=(
            f"hybrid_configs.{c.configs}.{c.field} ({', '.join(chosen)}) applies to the {c.group} group's NCCL communicator; "
            "it has no effect on gloo.")))


_ENV_KEYS: dict[str, object] = {}  # name -> os.environ's key for it, encoded once
# os.environ's own mapping (CPython's, which putenv and os.environ[...] = ... update in place); None elsewhere.
_ENV_DATA = getattr(os.environ, "_data", None)


def env_is_set(name: str) -> bool:
    """`name in os.environ`, without the KeyError that costs a miss there (resolve runs this on every call)."""
    data = _ENV_DATA
    if isinstance(data, dict):
        key = _ENV_KEYS.get(name)
        if key is None:
            encode = getattr(os.environ, "encodekey", None)
            if encode is None:
                return name in os.environ
            key = _ENV_KEYS[name] = encode(name)
        return key in data
    return name in os.environ


_ENV_KEY_SETS: dict[tuple[str, ...], frozenset[object]] = {}


def env_any(names: tuple[str, ...]) -> bool:
    """Whether any of `names` is in os.environ: one set test in the common case, none of them."""
    data = _ENV_DATA
    encode = getattr(os.environ, "encodekey", None)
    if not isinstance(data, dict) or encode is None:
        return any(env_is_set(name) for name in names)
    keys = _ENV_KEY_SETS.get(names)
    if keys is None:
        keys = _ENV_KEY_SETS[names] = frozenset(encode(name) for name in names)
    return not data.keys().isdisjoint(keys)  # a view's isdisjoint walks the smaller side: the few names


def _env_world_size() -> int | None:
    raw = os.environ.get("WORLD_SIZE") if env_is_set("WORLD_SIZE") else None
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise StrategyError(f"environment variable WORLD_SIZE={raw!r} is not an integer") from None
