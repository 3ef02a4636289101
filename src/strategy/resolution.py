"""Resolution: from what a file says to what the runtime does (degrees checked, dependent flags gated).

Loading is lossless; only here are flags that cannot take effect turned off, each with a note saying why.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field as dc_field
from typing import Any, NamedTuple

from google.protobuf.descriptor import FieldDescriptor

from . import layout, rules, schema, support
from ._generated.distributed_strategy_pb2 import DistributedStrategy
from ._generated.hybrid_parallel_pb2 import HybridConfig, MpConfig, TpRule, TpStyle
from ._generated.strategy_options_pb2 import IMPLEMENTED
from .errors import warn
from .topology import Topology

__all__ = ["TP_STYLES", "AmpSettings", "GradientMergeSettings", "MpSettings", "RecomputeSettings", "Resolved", "resolve",
           "resolve_with_reasons"]

# The tensor-parallel styles a plan may name, as Hugging Face spells them ("colwise", ...): from the schema.
TP_STYLES: tuple[str, ...] = tuple(v.name.lower() for v in TpStyle.DESCRIPTOR.values if v.number > 0)

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """The effective settings a runtime acts on.

    Attributes:
        dp_degree ... cp_degree: the six axes' degrees, dp_degree inferred when it was -1 (world size / the
            others); their product is the world size.
        order: the axis names, outermost first (all six; Paddle's dp, pp, sharding, sep, cp, mp by default).
        mp: the effective model-parallel options.
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
) -> tuple[Resolved, dict[str, str]]:
    """`resolve`, plus why each gated flag is off, by dotted path, whether or not the file set it (for explain).

    `requires=False` resolves a file that breaks a `requires` rule as the warn policy does, without warning.
    `unsupported="report"` resolves not-implemented settings as the warn policy does, without warning (explain
    shows them from `support.review`).
    """
    rules.check_policy(policy)
    loaded = support.recall(s)
    # Checked at load under this policy (or the stricter one) and unchanged since: the rules passed, and under
    # "warn" their warnings were given there. Else (built in code, changed, loaded leniently) check now.
    if loaded.checked not in ("strict", policy):
        rules.check(s, loaded.positions, policy=policy, source=loaded.source or "<resolve>", requires=requires)
    _warn_legacy_env()
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
    mp = _mp_settings(plan, getattr(hybrid, plan.mp), degrees, notes, reasons)
    nccl = layout.nccl(hybrid, degrees, notes)
    active = plan.gate is None or degrees[plan.gate] > 1  # a plan splits nothing at mp_degree 1 (noted by the review)
    rules_ = getattr(getattr(hybrid, plan.mp), plan.tp_plan) if plan.tp_plan and active else ()
    tp_plan = tuple((rule.pattern, TpStyle.Name(rule.style).lower()) for rule in rules_)
    fields_: dict[str, Any] = {**degrees, **_training(s, notes)}
    return Resolved(**fields_, order=order, mp=mp, nccl=nccl, tp_plan=tp_plan, notes=tuple(notes)), reasons


class _Flag(NamedTuple):
    name: str
    setting: str  # the MpSettings attribute: the field name without its `mp_` prefix
    is_bool: bool
    requires: str | None


class _Plan(NamedTuple):
    hybrid: str
    mp: str
    gate: str | None
    flags: tuple[_Flag, ...]  # dependency order
    tp_plan: str | None  # MpConfig's list of TpRule


@functools.cache
def _plan() -> _Plan:
    """What resolution needs from the schema, read once from the descriptors."""
    hybrid = next(f for f in schema.ROOT.fields if f.message_type is HybridConfig.DESCRIPTOR)
    mp = next(f for f in HybridConfig.DESCRIPTOR.fields if f.message_type is MpConfig.DESCRIPTOR)
    pending = [
        _Flag(f.name, f.name.removeprefix("mp_"), f.cpp_type == FieldDescriptor.CPPTYPE_BOOL, schema.option(f, "requires"))
        for f in MpConfig.DESCRIPTOR.fields
        if f.message_type is None and schema.option(f, "support") == IMPLEMENTED
    ]
    flags: list[_Flag] = []
    while pending:  # topological order: each flag after the flag it requires
        ready = [f for f in pending if f.requires is None or f.requires in {g.name for g in flags}]
        if not ready:
            raise AssertionError(f"requires rules form a cycle among {[f.name for f in pending]}")
        flags += ready
        pending = [f for f in pending if f not in ready]
    tp_plan = next((f.name for f in MpConfig.DESCRIPTOR.fields if f.message_type is TpRule.DESCRIPTOR), None)
    return _Plan(hybrid.name, mp.name, schema.option(mp, "active_when_parallel"), tuple(flags), tp_plan)


def _mp_settings(plan: _Plan, config: MpConfig, degrees: dict[str, int], notes: list[str], reasons: dict[str, str]) -> MpSettings:
    """Gate each bool flag: off when the mp axis is 1, or when the flag it requires is effectively off."""
    gate_degree = degrees[plan.gate] if plan.gate is not None else None
    active = gate_degree is None or gate_degree > 1
    prefix = f"{plan.hybrid}.{plan.mp}."
    effective: dict[str, Any] = {}
    for flag in plan.flags:  # ordered so that a flag comes after the one it requires
        value = getattr(config, flag.name)
        if flag.is_bool and value:
            reason = None
            if not active:
                reason = f"{plan.gate} is {gate_degree}"
            elif flag.requires and not effective[flag.requires]:
                reason = f"requires {prefix}{flag.requires}: true"
            if reason:
                value = False
                reasons[prefix + flag.name] = reason
                if config.HasField(flag.name):
                    notes.append(f"{prefix}{flag.name} is set but has no effect: {reason}.")
        effective[flag.name] = value
    return MpSettings(**{flag.setting: effective[flag.name] for flag in plan.flags})


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
    for path, _, name in schema.fields_with("legacy_env"):
        if layout.env_is_set(name):
            on = os.environ[name].strip().lower() in ("1", "true")
            warn(
                None,
                f"environment variable {name} is no longer read; set {path}: {str(on).lower()} in the strategy file "
                "instead (`strategy migrate-env` writes it for you)",
                stacklevel=4,
            )


