"""Resolution: from what a file says to what the runtime does (degrees checked, dependent flags gated).

Loading is lossless; only here are flags that cannot take effect turned off, each with a note saying why.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass, field as dc_field
from typing import Any, NamedTuple

from google.protobuf.descriptor import FieldDescriptor

from . import layout, memory, pipeline, rules, schema, support
from ._generated.distributed_strategy_pb2 import DistributedStrategy
from ._generated.hybrid_parallel_pb2 import DygraphShardingConfig, HybridConfig, MpConfig, PpConfig, TpRule, TpStyle
from ._generated.strategy_options_pb2 import IMPLEMENTED
from .errors import StrategyError, warn
from .memory import ModelStateMemory
from .settings import (AmpSettings, GradientMergeSettings, MpSettings, PipelineSettings, RecomputeSettings,
                       ShardingSettings)
from .topology import Topology

__all__ = ["TP_STYLES", "AmpSettings", "GradientMergeSettings", "MpSettings", "PipelineSettings", "RecomputeSettings",
           "Resolved", "ShardingSettings", "resolve", "resolve_with_reasons"]

# The tensor-parallel styles a plan may name, as Hugging Face spells them ("colwise", ...): from the schema.
TP_STYLES: tuple[str, ...] = tuple(v.name.lower() for v in TpStyle.DESCRIPTOR.values if v.number > 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """The effective settings a runtime acts on.

    Attributes:
        dp_degree ... cp_degree: the six axes' degrees, dp_degree inferred when it was -1 (world size / the
            others); their product is the world size.
        order: the axis names, outermost first (all six; Paddle's dp, pp, sharding, sep, cp, mp by default).
        mp: the effective model-parallel options.
        sharding: the effective sharding (ZeRO) options; they act only while sharding_degree > 1.
        pipeline: the torch.distributed.pipelining schedule, its stages and micro-batches (defaults while
            pp_degree is 1).
        tp_plan: the strategy's tensor-parallel plan (MpConfig.tp_plan), as (module-name glob, style) in order,
            styles spelled as Hugging Face does ("colwise", "rowwise", ...); empty when it has none.
        nccl: per group, the implemented NCCLConfig fields the file set for its communicator
            (`{"mp": {"commName": "tp", "nchannels": 4}}`); applied by `parallel.init` on NCCL only. Groups: "dp",
            "mp", "pp", "pp_p2p" (the pipeline's sends and receives), "sharding", "sep", "cp"; each only while its
            messages take effect (an axis of degree 1 has none).
        notes: one sentence per setting that was given but has no effect (or was inferred), and why.
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
    notes: tuple[str, ...] = ()

    @property
    def degrees(self) -> dict[str, int]:
        """Axis name -> degree, in `order`."""
        by_name = {a.name: getattr(self, a.field) for a in layout.plan().axes}
        return {axis: by_name[axis] for axis in self.order}

    @property
    def topology(self) -> Topology:
        """The ranks laid out over the axes in `order` (`groups(axis)`, `coordinates(rank)`, `rank(coordinates)`)."""
        return Topology.of(self.degrees, self.order)

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
        return memory.model_state(params, model_split=self.mp_degree * self.pp_degree, sharding=self.sharding_degree,
                                  stage=self.sharding.stage, mixed=mixed)


def resolve(s: DistributedStrategy, *, world_size: int | None = None, policy: str = "strict") -> Resolved:
    """Check `s` against the world size and work out the effective settings.

    Args:
        world_size: number of ranks; None reads WORLD_SIZE from the environment when set, else takes the
            product of the explicit degrees (an inferred dp_degree then becomes 1, with a note).
        policy: "strict" raises when a flag's `requires` rule is broken, or when a field this project does not
            implement is set to anything but its default; "warn" warns, turns the flag off and resolves the
            unimplemented field as if it were left at its default.

    Raises:
        StrategyError: a not-implemented setting (located at its file:line:col when `s` came from `load`, every
            such setting listed), or degrees that do not multiply to the world size.

    Example::

        r = strategy.resolve(strategy.load("tp.prototxt"), world_size=4)
        r.mp.async_allreduce, r.notes
    """
    return resolve_with_reasons(s, world_size=world_size, policy=policy)[0]


def resolve_with_reasons(
    s: DistributedStrategy,
    *,
    world_size: int | None = None,
    policy: str = "strict",
    requires: bool = True,
    unsupported: str | None = None,
    problems: list[StrategyError] | None = None,
) -> tuple[Resolved, dict[str, str]]:
    """`resolve`, plus why each gated flag is off, by dotted path, whether or not the file set it (for explain).

    `requires=False` resolves a file that breaks a `requires` rule as the warn policy does, without warning.
    `unsupported="report"` resolves not-implemented settings as the warn policy does, without warning (explain
    shows them from `support.review`). With `problems`, a pipeline that cannot run (a schedule torch lacks, too few
    micro-batches) is appended there and resolved as near as it can be, instead of raised.
    """
    rules.check_policy(policy)
    loaded = support.recall(s)
    # Checked at load under this policy (or the stricter one) and unchanged since: the rules passed, and under
    # "warn" their warnings were given there. Else (built in code, changed, loaded leniently) check now.
    if loaded.checked not in ("strict", policy):
        rules.check(s, loaded.positions, policy=policy, source=loaded.source or "<resolve>", requires=requires)
    _warn_legacy_env()
    layout.exclusive(s.hybrid_configs, loaded.positions, loaded.source)
    review = support.review(s, positions=loaded.positions, source=loaded.source)
    reasons: dict[str, str] = {}
    mode = unsupported or policy
    if review.unsupported:
        if mode == "strict":
            raise support.combined(review.unsupported)
        for finding in review.unsupported:
            if mode == "warn":
                warn(finding.error.location, f"{finding.error.message}; ignored (policy 'warn')", stacklevel=4)
        s = support.effective(s, [f.path for f in review.unsupported])
    plan = _plan()
    notes: list[str] = list(review.notes)
    hybrid = getattr(s, plan.hybrid)
    degrees = layout.degrees(hybrid, world_size, notes)
    order = layout.order(hybrid, degrees, loaded.positions, loaded.source)
    effective = {g.configs: _gated(plan, g, hybrid, degrees, notes, reasons) for g in plan.groups}
    mp_group = next(g for g in plan.groups if g.configs == plan.mp)
    mp = MpSettings(**{flag.setting: effective[plan.mp][flag.name] for flag in mp_group.flags})
    sharding = ShardingSettings(**{k: v for k, v in effective[plan.sharding].items() if k in _SHARDING_FIELDS})
    pipe = pipeline.settings(s, degrees, effective[plan.pp], loaded.positions, loaded.source, policy=policy,
                             notes=notes, problems=problems)
    nccl = layout.nccl(hybrid, degrees, notes)
    active = mp_group.gate is None or degrees[mp_group.gate] > 1  # a plan splits nothing at mp_degree 1 (noted by the review)
    rules_ = getattr(getattr(hybrid, plan.mp), plan.tp_plan) if plan.tp_plan and active else ()
    tp_plan = tuple((rule.pattern, TpStyle.Name(rule.style).lower()) for rule in rules_)
    fields_: dict[str, Any] = {**degrees, **_training(s, notes)}
    return Resolved(**fields_, order=order, mp=mp, sharding=sharding, pipeline=pipe, nccl=nccl, tp_plan=tp_plan,
                    notes=tuple(notes)), reasons


class _Flag(NamedTuple):
    name: str
    setting: str  # the settings attribute: the field name without an `mp_` prefix
    is_bool: bool
    requires: str | None


class _Group(NamedTuple):
    """A HybridConfig message whose settings take effect only while its degree is > 1 (mp_configs, sharding_configs)."""

    configs: str  # the message field: "mp_configs"
    gate: str | None  # its (active_when_parallel) degree
    flags: tuple[_Flag, ...]  # its implemented scalar fields, each after the flag it requires
    defaults: dict[str, Any]  # each flag's default value: what a file that leaves it out gets
    bools: tuple[_Flag, ...]  # the bool flags, in `flags`' order: gated off while the degree is 1
    dependent: tuple[_Flag, ...]  # the bool flags that require another, in `flags`' order


class _Plan(NamedTuple):
    hybrid: str
    mp: str
    sharding: str
    pp: str
    groups: tuple[_Group, ...]
    tp_plan: str | None  # MpConfig's list of TpRule


_SHARDING_FIELDS = frozenset(f.name for f in dataclasses.fields(ShardingSettings))


@functools.cache
def _plan() -> _Plan:
    """What resolution needs from the schema, read once from the descriptors."""
    hybrid = next(f for f in schema.ROOT.fields if f.message_type is HybridConfig.DESCRIPTOR)
    fields = HybridConfig.DESCRIPTOR.fields
    mp = next(f for f in fields if f.message_type is MpConfig.DESCRIPTOR)
    sharding = next(f for f in fields if f.message_type is DygraphShardingConfig.DESCRIPTOR)
    pp = next(f for f in fields if f.message_type is PpConfig.DESCRIPTOR)
    groups = tuple(
        _group(f) for f in fields
        if f.message_type is not None and schema.option(f, "active_when_parallel")
        and schema.option(f, "support") == IMPLEMENTED
    )
    tp_plan = next((f.name for f in MpConfig.DESCRIPTOR.fields if f.message_type is TpRule.DESCRIPTOR), None)
    return _Plan(hybrid.name, mp.name, sharding.name, pp.name, groups, tp_plan)


def _group(f: FieldDescriptor) -> _Group:
    flags = _flags(f.message_type)
    defaults = {flag.name: f.message_type.fields_by_name[flag.name].default_value for flag in flags}
    bools = tuple(flag for flag in flags if flag.is_bool)
    return _Group(f.name, schema.option(f, "active_when_parallel"), flags, defaults, bools,
                  tuple(flag for flag in bools if flag.requires))


def _flags(desc: Any) -> tuple[_Flag, ...]:
    """A message's implemented scalar fields in topological order: each flag after the flag it requires."""
    pending = [
        _Flag(f.name, f.name.removeprefix("mp_"), f.cpp_type == FieldDescriptor.CPPTYPE_BOOL, schema.option(f, "requires"))
        for f in desc.fields
        if f.message_type is None and schema.option(f, "support") == IMPLEMENTED
    ]
    flags: list[_Flag] = []
    while pending:
        ready = [f for f in pending if f.requires is None or f.requires in {g.name for g in flags}]
        if not ready:
            raise AssertionError(f"requires rules form a cycle among {[f.name for f in pending]}")
        flags += ready
        pending = [f for f in pending if f not in ready]
    return tuple(flags)


def _gated(plan: _Plan, group: _Group, hybrid: HybridConfig, degrees: dict[str, int], notes: list[str],
           reasons: dict[str, str]) -> dict[str, Any]:
    """Each flag's effective value: a bool is off when the group's degree is 1, or when the flag it requires is
    effectively off (noted when the file set it); other values as the file gives them. Reads only what the file
    set (the defaults come from the schema)."""
    gate_degree = degrees[group.gate] if group.gate is not None else None
    active = gate_degree is None or gate_degree > 1
    effective = dict(group.defaults)
    config = getattr(hybrid, group.configs) if hybrid.HasField(group.configs) else None
    if config is not None:
        for f, value in config.ListFields():
            if f.name in effective:
                effective[f.name] = value
    prefix = f"{plan.hybrid}.{group.configs}."
    for flag in group.dependent if active else group.bools:  # ordered so that a flag comes after the one it requires
        if not effective[flag.name]:
            continue
        if not active:
            reason = f"{group.gate} is {gate_degree}"
        elif not effective[flag.requires]:  # type: ignore[index]  # `dependent` flags have one
            reason = f"requires {prefix}{flag.requires}: true"
        else:
            continue
        effective[flag.name] = False
        reasons[prefix + flag.name] = reason
        if config is not None and config.HasField(flag.name):
            notes.append(f"{prefix}{flag.name} is set but has no effect: {reason}.")
    return effective


def _training(s: DistributedStrategy, notes: list[str]) -> dict[str, Any]:
    """amp, gradient merge and recompute: each switch with its configs, read where the schema keeps them."""
    out: dict[str, Any] = {}
    for switch, configs, settings in _TRAINING:
        if not getattr(s, switch):
            continue
        message = getattr(s, configs)
        known = set(settings._fields)
        values: dict[str, Any] = {f.name: _plain(f, getattr(message, f.name)) for f in message.DESCRIPTOR.fields
                                  if f.name in known}
        if "enabled" in known:
            values["enabled"] = True
        out[switch] = settings(**values)
        if settings is RecomputeSettings and not out[switch].checkpoints:
            notes.append(f"{switch} is on and {configs}.checkpoints names no modules: every block of the model is "
                         "recomputed (Hugging Face's _no_split_modules classes, else the children of its largest "
                         "ModuleList), as Paddle recomputes every decoder layer.")
    if "amp" in out:
        out["amp"] = _amp_dtype(s, out["amp"], notes)
    return out


def _plain(f: FieldDescriptor, value: Any) -> Any:
    """A field's value as the file spells it: 0.8, not the float32 0.800000011920929."""
    if f.is_repeated:
        return tuple(value)
    return float(support.show_scalar(f, value)) if f.cpp_type == FieldDescriptor.CPPTYPE_FLOAT else value


def _amp_dtype(s: DistributedStrategy, amp: AmpSettings, notes: list[str]) -> AmpSettings:
    configs = s.amp_configs
    bf16 = configs.use_pure_bf16 or configs.dtype == "bfloat16"
    scaler_fields = ("init_loss_scaling", "incr_every_n_steps", "decr_every_n_nan_or_inf", "incr_ratio", "decr_ratio",
                     "use_dynamic_loss_scaling")
    if bf16:
        for name in scaler_fields:
            if configs.HasField(name):
                notes.append(f"amp_configs.{name} is set but has no effect: bfloat16 needs no loss scaling.")
    return amp._replace(dtype="bfloat16" if bf16 else "float16", pure=configs.use_pure_bf16 or configs.use_pure_fp16,
                        loss_scaling=not bf16)


# (switch, its configs message field, the settings type): the three training techniques the runtime implements.
_TRAINING = (("amp", "amp_configs", AmpSettings), ("gradient_merge", "gradient_merge_configs", GradientMergeSettings),
             ("recompute", "recompute_configs", RecomputeSettings))


def _warn_legacy_env() -> None:
    for path, name in _legacy_env():
        if layout.env_is_set(name):
            on = os.environ[name].strip().lower() in ("1", "true")
            warn(
                None,
                f"environment variable {name} is no longer read; set {path}: {str(on).lower()} in the strategy file "
                "instead (`strategy migrate-env` writes it for you)",
                stacklevel=4,
            )


@functools.cache
def _legacy_env() -> tuple[tuple[str, str], ...]:
    """(field path, environment variable) for each (legacy_env) in the schema."""
    return tuple((path, name) for path, _, name in schema.fields_with("legacy_env"))
