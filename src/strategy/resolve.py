"""Resolution: from what a file says to what the runtime does (degrees checked, dependent flags gated).

Loading is lossless; only here are flags that cannot take effect turned off, each with a note saying why.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from google.protobuf.descriptor import FieldDescriptor

from . import rules, schema
from ._generated.distributed_strategy_pb2 import DistributedStrategy, HybridConfig, MpConfig
from .errors import StrategyError, warn

__all__ = ["MpSettings", "Resolved", "resolve"]

_HYBRID = "hybrid_configs"


@dataclass(frozen=True, slots=True, kw_only=True)
class MpSettings:
    """Effective model-parallel options (MpConfig's fields, `mp_` prefix dropped), after gating.

    `async_allreduce` is on only when mp_degree > 1 and mp_async_allreduce is set; `skip_c_identity`
    and `fused_linear_param_grad_add` only when async_allreduce is effectively on.
    """

    sync_param: bool
    sync_grad: bool
    sync_moment: bool
    sync_mode: str
    async_allreduce: bool
    skip_c_identity: bool
    fused_linear_param_grad_add: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """The effective settings a runtime acts on.

    Attributes:
        dp_degree ... sep_degree: the degrees, dp_degree inferred when it was -1; their product is the world size.
        mp: the effective model-parallel options.
        notes: one sentence per setting that was given but has no effect (or was inferred), and why.
    """

    dp_degree: int
    mp_degree: int
    pp_degree: int
    sharding_degree: int
    sep_degree: int
    mp: MpSettings
    notes: tuple[str, ...] = ()

    @property
    def world_size(self) -> int:
        return self.dp_degree * self.mp_degree * self.pp_degree * self.sharding_degree * self.sep_degree


def resolve(s: DistributedStrategy, *, world_size: int | None = None, policy: str = "strict") -> Resolved:
    """Check `s` against the world size and work out the effective settings.

    Args:
        world_size: number of ranks; None reads WORLD_SIZE from the environment when set, else takes the
            product of the explicit degrees (an inferred dp_degree then becomes 1, with a note).
        policy: "strict" raises when a flag's `requires` rule is broken; "warn" warns and turns it off.

    Raises:
        StrategyError: a degree is unsupported, or the degrees do not multiply to the world size.
    """
    rules.check_policy(policy)
    rules.check(s, {}, policy=policy, source="<resolve>")
    _warn_legacy_env()
    notes: list[str] = []
    hybrid = s.hybrid_configs
    degrees = _degrees(hybrid, world_size, notes)
    mp = _mp_settings(hybrid, degrees, notes)
    return Resolved(**degrees, mp=mp, notes=tuple(notes))


def _axis_fields() -> list[FieldDescriptor]:
    return [f for f in HybridConfig.DESCRIPTOR.fields if schema.option(f, "axis")]


def _degrees(hybrid: HybridConfig, world_size: int | None, notes: list[str]) -> dict[str, int]:
    fields = _axis_fields()
    degrees = {f.name: getattr(hybrid, f.name) for f in fields}
    for f in fields:
        top = schema.option(f, "max_supported")
        if top is not None and degrees[f.name] > top:
            axis = schema.option(f, "axis")
            raise StrategyError(
                f"{_HYBRID}.{f.name} = {degrees[f.name]}: {axis} parallelism is not implemented by this project; "
                f"set {f.name}: {top}",
                field=f"{_HYBRID}.{f.name}",
            )
    inferred = [f for f in fields if degrees[f.name] == schema.option(f, "infer_value")]
    known = math.prod(v for f, v in zip(fields, degrees.values()) if f not in inferred)
    shown = " × ".join(f"{name}={value}" for name, value in degrees.items())
    if world_size is None:
        world_size = _env_world_size()
    if world_size is None:
        for f in inferred:
            degrees[f.name] = 1
            notes.append(f"{_HYBRID}.{f.name} is -1 (infer) and no world size was given (WORLD_SIZE is unset): using 1.")
        return degrees
    if world_size < 1:
        raise StrategyError(f"world size must be >= 1, got {world_size}")
    if inferred:
        if world_size % known:
            raise StrategyError(
                f"cannot infer {inferred[0].name}: world size {world_size} is not divisible by the product of the other degrees "
                f"({shown}, product {known}); change the degrees or the number of ranks",
                field=f"{_HYBRID}.{inferred[0].name}",
            )
        degrees[inferred[0].name] = world_size // known
        notes.append(f"{_HYBRID}.{inferred[0].name} inferred as {world_size // known} from world size {world_size}.")
    elif known != world_size:
        raise StrategyError(
            f"the degrees {shown} multiply to {known}, but the world size is {world_size}; "
            f"make their product {world_size}, or set dp_degree: -1 to infer it",
            field=_HYBRID,
        )
    return degrees


def _env_world_size() -> int | None:
    raw = os.environ.get("WORLD_SIZE")
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise StrategyError(f"environment variable WORLD_SIZE={raw!r} is not an integer") from None


def _mp_settings(hybrid: HybridConfig, degrees: dict[str, int], notes: list[str]) -> MpSettings:
    outer = next(f for f in HybridConfig.DESCRIPTOR.fields if f.message_type is MpConfig.DESCRIPTOR)
    gate = schema.option(outer, "active_when_parallel")
    active = gate is None or degrees[gate] > 1
    config = getattr(hybrid, outer.name)
    prefix = f"{_HYBRID}.{outer.name}."
    effective: dict[str, object] = {}

    def value(field: FieldDescriptor) -> object:
        if field.name in effective:
            return effective[field.name]
        raw = getattr(config, field.name)
        result, reason = raw, None
        if field.cpp_type == FieldDescriptor.CPPTYPE_BOOL and raw:
            needed = schema.option(field, "requires")
            if not active:
                result, reason = False, f"{gate} is {degrees[gate]}"
            elif needed and not value(MpConfig.DESCRIPTOR.fields_by_name[needed]):
                result, reason = False, f"requires {prefix}{needed}: true"
        if reason and config.HasField(field.name):
            notes.append(f"{prefix}{field.name} is set but has no effect: {reason}.")
        effective[field.name] = result
        return result

    settings = {f.name.removeprefix("mp_"): value(f) for f in MpConfig.DESCRIPTOR.fields}
    return MpSettings(**settings)


def _warn_legacy_env() -> None:
    for path, field in schema.walk():
        name = schema.option(field, "legacy_env")
        if name and name in os.environ:
            on = os.environ[name].strip().lower() in ("1", "true")
            warn(
                None,
                f"environment variable {name} is no longer read; set {path}: {str(on).lower()} in the strategy file "
                "instead (`strategy migrate-env` writes it for you)",
                stacklevel=4,
            )


