"""Resolution: from what a file says to what the runtime does (degrees checked, dependent flags gated).

Loading is lossless; only here are flags that cannot take effect turned off, each with a note saying why.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): a NamedTuple's string annotations are
# compiled at class creation, which every `strategy` command pays at start.

import functools
import operator
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from google.protobuf.descriptor import FieldDescriptor

from . import layout, pipeline
from ..schema import rules, support
from .. import schema
from .._generated.distributed_strategy_pb2 import DistributedStrategy
from .._generated.hybrid_parallel_pb2 import HybridConfig, TpStyle
from .._generated.strategy_options_pb2 import IMPLEMENTED
from ..errors import StrategyError, warn
from ..notes import Kind, Note

if TYPE_CHECKING:
    from .resolved import Resolved
    from .settings import AmpSettings, GradientMergeSettings, MpSettings, PipelineSettings, RecomputeSettings, ShardingSettings

__all__ = ["TP_STYLES", "AmpSettings", "GradientMergeSettings", "MpSettings", "PipelineSettings", "RecomputeSettings",
           "Resolved", "ShardingSettings", "check", "resolve", "resolve_with_reasons"]


def __getattr__(name: str) -> Any:
    """The result types, imported when first named: checking a strategy needs none of them."""
    if name == "Resolved":
        from .resolved import Resolved

        return Resolved
    if name in __all__:
        from . import settings

        return getattr(settings, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# The tensor-parallel styles a plan may name, as Hugging Face spells them ("colwise", ...): from the schema.
TP_STYLES: tuple[str, ...] = tuple(v.name.lower() for v in TpStyle.DESCRIPTOR.values if v.number > 0)


def resolve(s: DistributedStrategy, *, world_size: int | None = None, policy: str = "strict") -> "Resolved":
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
    resolved = _resolve(s, world_size=world_size, policy=policy, build=True)[0]
    assert resolved is not None
    return resolved


def resolve_with_reasons(
    s: DistributedStrategy,
    *,
    world_size: int | None = None,
    policy: str = "strict",
    requires: bool = True,
    unsupported: str | None = None,
    problems: list[StrategyError] | None = None,
) -> "tuple[Resolved, dict[str, str]]":
    """`resolve`, plus why each gated flag is off, by dotted path, whether or not the file set it (for explain).

    `requires=False` resolves a file that breaks a `requires` rule as the warn policy does, without warning.
    `unsupported="report"` resolves not-implemented settings as the warn policy does, without warning (explain
    shows them from `support.review`). With `problems`, a pipeline that cannot run (a schedule torch lacks, too few
    micro-batches) is appended there and resolved as near as it can be, instead of raised.
    """
    resolved, reasons = _resolve(s, world_size=world_size, policy=policy, requires=requires, unsupported=unsupported,
                                 problems=problems, build=True)
    assert resolved is not None
    return resolved, reasons


def check(s: DistributedStrategy, *, world_size: int | None = None, policy: str = "strict", requires: bool = True) -> None:
    """Raise what `resolve` would raise (under `requires=False`, as `resolve_with_reasons`), without building the
    effective settings: `strategy validate`."""
    _resolve(s, world_size=world_size, policy=policy, requires=requires, build=False)


def _resolve(s: DistributedStrategy, *, world_size: int | None, policy: str, requires: bool = True,
             unsupported: str | None = None, problems: list[StrategyError] | None = None,
             build: bool) -> "tuple[Resolved | None, dict[str, str]]":
    """Every check resolution makes; with `build`, the effective settings too (nothing they hold can fail).

    The warnings given here and in the steps it calls (rules.check, pipeline.settings) name the caller of `resolve`,
    `resolve_with_reasons` or `check` (their stacklevels count these frames): keep those calls in this function.
    """
    rules.check_policy(policy)
    loaded = support.recall(s)
    # Checked at load under this policy (or the stricter one) and unchanged since: the rules passed, and under
    # "warn" their warnings were given there. Else (built in code, changed, loaded leniently) check now.
    if loaded.checked not in ("strict", policy):
        rules.check(s, loaded.positions, policy=policy, source=loaded.source or "<resolve>", requires=requires)
    _warn_legacy_env()
    layout.exclusive(s.hybrid_configs, loaded.positions, loaded.source)
    # What Paddle asserts of an expert layout, before what is implemented here; kept unless the policy changes `s`.
    expert, expert_notes = _expert_layout(s.hybrid_configs, world_size, loaded)
    review = support.review(s, positions=loaded.positions, source=loaded.source)
    if review.unsupported:
        s = _without_unsupported(s, review.unsupported, unsupported or policy)
        if expert is not None:  # a degree the policy set back to its default lays the experts out otherwise
            expert, expert_notes = _expert_layout(s.hybrid_configs, world_size, loaded)
    notes: list[Note] = list(review.notes)
    reasons: dict[str, str] = {}
    given = _Given(s, {} if review.unsupported else review.listed)  # (the policy's copy of `s` is listed anew)
    hybrid = s.hybrid_configs
    degrees = layout.degrees(hybrid, world_size, notes)
    order = layout.order(hybrid, degrees, loaded.positions, loaded.source)
    notes += expert_notes
    if expert is not None:
        order = expert.dense_order  # Paddle lays the dense axes out around the expert ones
    effective = {g.configs: _gated(g, given, degrees, notes, reasons) for g in _plan().groups}
    pipe = pipeline.settings(s, degrees, effective["pp_configs"], loaded.positions, loaded.source, policy=policy,
                             notes=notes, problems=problems)
    saving = None
    if "checkpoint_configs" in given.root:  # (a directory that cannot be written fails `validate` too)
        from . import checkpoint

        saving = checkpoint.settings(s, loaded.positions, loaded.source)
    measuring = None
    if "metrics_configs" in given.root:
        from . import metrics

        measuring = metrics.settings(s, loaded.positions, loaded.source)
    if not build:
        return None, reasons
    fields_ = _fields(s, given, degrees, effective, expert, notes)
    if saving is not None:
        fields_["checkpoint"] = saving
    if measuring is not None:
        fields_["metrics"] = measuring
    types = _types()
    fields_["order"], fields_["notes"] = order, tuple(notes)
    if pipe is not None:
        fields_["pipeline"] = types.pipeline(**pipe)
    return types.resolved._build(fields_), reasons


def _without_unsupported(s: DistributedStrategy, unsupported: "list[support.Finding]", mode: str) -> DistributedStrategy:
    """`s` with its not-implemented settings back at their defaults (`support.effective`): an error under "strict",
    a warning each under "warn", silently under "report" (explain shows them from the review)."""
    if mode == "strict":
        raise support.combined(unsupported)
    for finding in unsupported:
        if mode == "warn":
            warn(finding.error.location, f"{finding.error.message}; ignored (policy 'warn')", stacklevel=5)
    return support.effective(s, [f.path for f in unsupported])


def _fields(s: DistributedStrategy, given: "_Given", degrees: dict[str, int], effective: dict[str, dict[str, Any]],
            expert: Any, notes: list[Note]) -> dict[str, Any]:
    """Resolved's fields but the order, pipeline, checkpoint and notes: the degrees, the mp and sharding settings, the
    NCCL settings, the tensor-parallel plan, the training settings and the experts."""
    types, plan, hybrid = _types(), _plan(), s.hybrid_configs
    nccl = layout.nccl(hybrid, given.hybrid, degrees, notes)
    active = plan.mp.active(degrees)  # a plan splits nothing at mp_degree 1 (noted by the review)
    # A group's configs left out: the settings of its defaults, gated or not, built once (`_Types`).
    has_mp = "mp_configs" in given.hybrid
    mp = _interned(types.mp, effective["mp_configs"]) if has_mp else types.mp_unset[active]
    if "sharding_configs" in given.hybrid:
        sharding_flags = effective["sharding_configs"]
        sharding = _interned(types.sharding, {k: sharding_flags[k] for k in types.sharding_fields})
    else:
        sharding = types.sharding_unset[plan.sharding.active(degrees)]
    rules_ = hybrid.mp_configs.tp_plan if has_mp and active else ()
    tp_plan = tuple((rule.pattern, TpStyle.Name(rule.style).lower()) for rule in rules_) if rules_ else ()
    fields_: dict[str, Any] = {**degrees, **_training(s, given.root, notes), "mp": mp, "sharding": sharding, "nccl": nccl,
                               "tp_plan": tp_plan}
    if given.hybrid.get("enable_optimizer_timer"):
        fields_["optimizer_timer"] = True
    if degrees["mp_degree"] > 1:  # Paddle's dygraph fleet reads it at every mp_degree > 1
        fields_["tensor_init_seed"] = s.tensor_parallel_configs.tensor_init_seed
    if "fuse_grad_size_in_MB" in given.root or "last_comm_group_size_MB" in given.root:  # DataParallel's buffer sizes
        from .settings import DpBucketSettings

        bucket, first = s.fuse_grad_size_in_MB * 2**20, s.last_comm_group_size_MB * 2**20
        fields_["dp_buckets"] = DpBucketSettings(bucket, max(1, int(first)) if first < bucket else bucket)
    if expert is not None:
        from .settings import ExpertSettings

        t = expert.topology
        fields_["experts"] = ExpertSettings(t.degrees["ep"], t.degrees["moe_sharding"], t.order, t.dims)
    return fields_


_INTERNED: dict[tuple[Any, ...], Any] = {}
_INTERN_AT_MOST = 512  # settings of that many distinct values kept; a sweep over more starts afresh


def _interned(settings: Any, values: dict[str, Any]) -> Any:
    """`settings(**values)`, one object per distinct value: the settings are immutable, and a frozen dataclass costs
    a few microseconds to build (most of a resolve that sets mp_configs)."""
    key = (settings, *values.values())  # `values` always lists its keys in the same order (the group's flags)
    made = _INTERNED.get(key)
    if made is None:
        if len(_INTERNED) >= _INTERN_AT_MOST:
            _INTERNED.clear()
        made = _INTERNED[key] = settings(**values)
    return made


class _Given:
    """What `s` and the messages below it set (field name -> value), taken from the lists the support review made as
    it walked them (`Review.listed`) and listed here only where it did not: one ListFields a message, where asking
    each field (HasField, a name lookup in C each time) cost a tenth of a resolve."""

    __slots__ = ("hybrid", "listed", "root")

    def __init__(self, s: DistributedStrategy, listed: dict[str, dict[str, Any]]) -> None:
        self.listed = listed
        self.root = self.of("", s)
        hybrid = self.root.get("hybrid_configs")
        self.hybrid: dict[str, Any] = {} if hybrid is None else self.of("hybrid_configs.", hybrid)

    def of(self, prefix: str, msg: Any) -> dict[str, Any]:
        """The set fields of `msg`, found at `prefix` ("hybrid_configs.mp_configs.")."""
        values = self.listed.get(prefix)
        if values is None:
            values = {f.name: value for f, value in msg.ListFields()}
        return values


def _expert_layout(hybrid: HybridConfig, world_size: int | None, loaded: Any) -> tuple[Any, list[Note]]:
    """The expert layout (`experts.ExpertLayout`, None without experts) and its notes. `experts` is imported only for
    a file with experts: it builds a Topology (a dataclass), which validating any other file never needs."""
    notes: list[Note] = []
    if not layout.has_experts(hybrid):
        return None, notes
    from . import experts

    return experts.expert_layout(hybrid, layout.degrees(hybrid, world_size, []), loaded.positions, loaded.source, notes,
                                 world_known=layout.world_size_given(world_size)), notes


class _Flag(NamedTuple):
    name: str
    setting: str  # the settings attribute: the field name without an `mp_` prefix
    is_bool: bool
    requires: str | None
    requires_setting: str | None  # the settings attribute of the flag it requires


class _Group(NamedTuple):
    """A HybridConfig message whose settings take effect only while its degree is > 1 (mp_configs, sharding_configs)."""

    configs: str  # the message field: "mp_configs"
    gate: str | None  # its (active_when_parallel) degree
    flags: tuple[_Flag, ...]  # its implemented scalar fields, each after the flag it requires
    defaults: dict[str, Any]  # each flag's default value by its settings attribute: what a file that leaves it out gets
    bools: tuple[_Flag, ...]  # the bool flags, in `flags`' order: gated off while the degree is 1
    dependent: tuple[_Flag, ...]  # the bool flags that require another, in `flags`' order
    bools_on: tuple[_Flag, ...]  # of `bools`, those on by default: all a file that leaves the message out can gate
    dependent_on: tuple[_Flag, ...]  # of `dependent`, those on by default
    prefix: str  # "hybrid_configs.mp_configs."
    setting_of: dict[str, str]  # each flag's settings attribute by its field name

    def active(self, degrees: dict[str, int]) -> bool:
        """Whether its settings take effect at these degrees."""
        return self.gate is None or degrees[self.gate] > 1


class _Plan(NamedTuple):
    groups: tuple[_Group, ...]  # every group, in HybridConfig's field order
    mp: _Group  # hybrid_configs.mp_configs
    sharding: _Group  # hybrid_configs.sharding_configs


@functools.cache
def _plan() -> _Plan:
    """The groups resolution gates, read once from the descriptors (their (active_when_parallel), (requires) and
    defaults)."""
    groups = tuple(
        _group(f) for f in HybridConfig.DESCRIPTOR.fields
        if f.message_type is not None and schema.option(f, "active_when_parallel")
        and schema.option(f, "support") == IMPLEMENTED and _flags(f.message_type)
    )
    by_configs = {g.configs: g for g in groups}
    return _Plan(groups, by_configs["mp_configs"], by_configs["sharding_configs"])


def _group(f: FieldDescriptor) -> _Group:
    flags = _flags(f.message_type)
    defaults = {flag.setting: f.message_type.fields_by_name[flag.name].default_value for flag in flags}
    bools = tuple(flag for flag in flags if flag.is_bool)
    dependent = tuple(flag for flag in bools if flag.requires)
    return _Group(f.name, schema.option(f, "active_when_parallel"), flags, defaults, bools, dependent,
                  tuple(flag for flag in bools if defaults[flag.setting]), tuple(flag for flag in dependent if defaults[flag.setting]),
                  f"hybrid_configs.{f.name}.", {flag.name: flag.setting for flag in flags})


def _getter(make: Callable[..., Callable[[Any], Any]], names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """`make(*names)` (operator.itemgetter or attrgetter) that always gives a tuple, in one call: those give a bare
    value for one name and take none."""
    if len(names) > 1:
        return make(*names)
    get = make(names[0]) if names else None

    def few(x: Any) -> tuple[Any, ...]:
        return () if get is None else (get(x),)

    return few


def _flags(desc: Any) -> tuple[_Flag, ...]:
    """A message's implemented scalar fields in topological order: each flag after the flag it requires."""
    pending = [
        _Flag(f.name, f.name.removeprefix("mp_"), f.cpp_type == FieldDescriptor.CPPTYPE_BOOL, requires,
              requires.removeprefix("mp_") if requires else None)
        for f in desc.fields
        if f.message_type is None and schema.option(f, "support") == IMPLEMENTED
        for requires in [schema.option(f, "requires")]
    ]
    flags: list[_Flag] = []
    while pending:
        ready = [f for f in pending if f.requires is None or f.requires in {g.name for g in flags}]
        if not ready:
            raise AssertionError(f"requires rules form a cycle among {[f.name for f in pending]}")
        flags += ready
        pending = [f for f in pending if f not in ready]
    return tuple(flags)


def _gated(group: _Group, given: _Given, degrees: dict[str, int], notes: list[Note],
           reasons: dict[str, str]) -> dict[str, Any]:
    """Each flag's effective value by its settings attribute: a bool is off when the group's degree is 1, or when
    the flag it requires is effectively off (noted when the file set it); other values as the file gives them. Reads
    only what the file set (the defaults come from the schema). A group the file leaves out gets the same read-only
    result every time, by the degree of its axis."""
    active = group.active(degrees)
    config = given.hybrid.get(group.configs)
    if config is None:
        key = (group.configs, None if active else degrees[group.gate])  # type: ignore[index]  # inactive: gated
        unset = _UNSET_GATED.get(key)
        if unset is None:
            gated: dict[str, str] = {}
            unset = _UNSET_GATED[key] = (_gate(group, None, active, degrees, notes, gated), gated)
        if unset[1]:
            reasons.update(unset[1])
        return unset[0]
    return _gate(group, given.of(group.prefix, config), active, degrees, notes, reasons)


_UNSET_GATED: dict[tuple[str, int | None], tuple[dict[str, Any], dict[str, str]]] = {}


def _gate(group: _Group, config: dict[str, Any] | None, active: bool, degrees: dict[str, int], notes: list[Note],
          reasons: dict[str, str]) -> dict[str, Any]:
    """`_gated` for a configs message that sets `config` (field name -> value; None: left out, all defaults)."""
    effective = dict(group.defaults)
    if config is not None:
        setting_of = group.setting_of
        for name, value in config.items():
            setting = setting_of.get(name)
            if setting is not None:
                effective[setting] = value
        candidates = group.dependent if active else group.bools
    else:  # all defaults: only the flags on by default can be gated off
        candidates = group.dependent_on if active else group.bools_on
    prefix = group.prefix
    for flag in candidates:  # ordered so that a flag comes after the one it requires
        if not effective[flag.setting]:
            continue
        if not active:
            reason = f"hybrid_configs.{group.gate} is {degrees[group.gate]}"  # type: ignore[index]  # inactive: gated
        elif not effective[flag.requires_setting]:  # type: ignore[index]  # `dependent` flags have one
            reason = f"requires {prefix}{flag.requires}: true"
        else:
            continue
        effective[flag.setting] = False
        reasons[prefix + flag.name] = reason
        if config is not None and flag.name in config:
            notes.append(Note(f"{prefix}{flag.name}", Kind.NO_EFFECT, reason))
    return effective


def _training(s: DistributedStrategy, root: dict[str, Any], notes: list[Note]) -> dict[str, Any]:
    """amp, gradient merge and recompute: each switch with its configs, read where the schema keeps them."""
    types = _types()
    out: dict[str, Any] = {}
    for switch, configs, settings, reader, unset in types.training:
        if not getattr(s, switch):
            continue
        message = root.get(configs)
        if message is not None:
            values = reader.read(message)
            if settings is types.amp:
                values.update(_amp_dtype(message, notes))
            out[switch] = settings(**values)
        else:
            out[switch] = unset  # the configs left out: their defaults, the same settings every time
        if settings is types.recompute and not out[switch].checkpoints:
            notes.append(Note(f"{configs}.checkpoints", Kind.INFO, "", text=(
                f"{switch} is on and {configs}.checkpoints names no modules: every block of the model is recomputed "
                "(Hugging Face's _no_split_modules classes, else the children of its largest ModuleList), as Paddle "
                "recomputes every decoder layer.")))
    return out


class _Reader(NamedTuple):
    """How a settings type's fields are read from its configs message, worked out once from the descriptors."""

    names: tuple[str, ...]  # the fields read as they are
    values: Callable[[Any], tuple[Any, ...]]  # their values, in one call
    floats: tuple[tuple[str, float], ...]  # float fields, each with its default as a file spells it (0.8)
    lists: tuple[str, ...]  # repeated fields: read as tuples
    enabled: bool  # the settings type has an `enabled` switch (on, since its switch is)

    def read(self, message: Any) -> dict[str, Any]:
        values = dict(zip(self.names, self.values(message)))
        for name, default in self.floats:
            values[name] = _spelled(getattr(message, name)) if message.HasField(name) else default
        for name in self.lists:
            values[name] = tuple(getattr(message, name))
        if self.enabled:
            values["enabled"] = True
        return values


_READERS: dict[type, _Reader] = {}


def _reader(settings: Any, desc: Any) -> _Reader:
    reader = _READERS.get(settings)
    if reader is None:
        fields_ = desc.fields_by_name
        taken = [fields_[name] for name in settings._fields if name in fields_]
        names = tuple(f.name for f in taken if not f.is_repeated and f.cpp_type != FieldDescriptor.CPPTYPE_FLOAT)
        getter = _getter(operator.attrgetter, names)
        floats = tuple((f.name, _spelled(f.default_value)) for f in taken
                       if not f.is_repeated and f.cpp_type == FieldDescriptor.CPPTYPE_FLOAT)
        lists = tuple(f.name for f in taken if f.is_repeated)
        reader = _READERS[settings] = _Reader(names, getter, floats, lists, "enabled" in settings._fields)
    return reader


def _spelled(value: float) -> float:
    """A float32 field's value as the file spells it: 0.8, not 0.800000011920929."""
    if value.is_integer() and abs(value) < 1e6:
        return value  # a whole float32 below a million is exact and short already
    return float(support.short_float(value, single=True))


class _Types(NamedTuple):
    """The result types, imported when resolution first builds one (checking alone needs none of them)."""

    resolved: Any
    mp: Any
    sharding: Any
    pipeline: Any
    amp: Any
    recompute: Any
    # (switch, its configs message field, its settings type, how to read them, the settings when the configs are left out)
    training: tuple[tuple[str, str, Any, _Reader, Any], ...]
    sharding_fields: tuple[str, ...]  # the sharding flags' settings attributes ShardingSettings has a field for
    mp_unset: tuple[Any, ...]  # MpSettings of a file without mp_configs, by whether mp is active (mp_degree > 1)
    sharding_unset: tuple[Any, ...]  # ShardingSettings of a file without sharding_configs, by whether sharding is active


@functools.cache
def _types() -> _Types:
    from .resolved import Resolved
    from .settings import (AmpSettings, GradientMergeSettings, MpSettings, PipelineSettings, RecomputeSettings,
                           ShardingSettings)

    training = tuple(_training_entry(switch, configs, settings, settings is AmpSettings) for switch, configs, settings in (
        ("amp", "amp_configs", AmpSettings), ("gradient_merge", "gradient_merge_configs", GradientMergeSettings),
        ("recompute", "recompute_configs", RecomputeSettings)))
    plan = _plan()
    sharding_fields = _taken(ShardingSettings)
    mp_unset = tuple(MpSettings(**_unset(plan.mp, degree)) for degree in (1, 2))
    sharding_unset = tuple(ShardingSettings(**{k: flags[k] for k in sharding_fields})
                           for flags in (_unset(plan.sharding, degree) for degree in (1, 2)))
    return _Types(Resolved, MpSettings, ShardingSettings, PipelineSettings, AmpSettings, RecomputeSettings, training,
                  sharding_fields, mp_unset, sharding_unset)


def _unset(group: _Group, degree: int) -> dict[str, Any]:
    """The effective flags of a file that leaves `group`'s configs out, at this degree of its axis."""
    degrees = {group.gate: degree} if group.gate else {}
    return _gate(group, None, group.active(degrees), degrees, [], {})


def _training_entry(switch: str, configs: str, settings: Any, amp: bool) -> tuple[str, str, Any, _Reader, Any]:
    default = getattr(DistributedStrategy(), configs)
    reader = _reader(settings, default.DESCRIPTOR)
    values = reader.read(default)
    if amp:
        values.update(_amp_dtype(default, []))
    return switch, configs, settings, reader, settings(**values)


def _taken(settings: Any) -> tuple[str, ...]:
    """The sharding flags' settings attributes the settings type has a field for."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(settings)}
    return tuple(flag.setting for flag in _plan().sharding.flags if flag.setting in names)


def _amp_dtype(configs: Any, notes: list[Note]) -> dict[str, Any]:
    bf16 = configs.use_pure_bf16 or configs.dtype == "bfloat16"
    if bf16:
        for name in _SCALER_FIELDS:
            if configs.HasField(name):
                notes.append(Note(f"amp_configs.{name}", Kind.NO_EFFECT, "bfloat16 needs no loss scaling"))
    return {"dtype": "bfloat16" if bf16 else "float16", "pure": configs.use_pure_bf16 or configs.use_pure_fp16,
            "loss_scaling": not bf16}


_SCALER_FIELDS = ("init_loss_scaling", "incr_every_n_steps", "decr_every_n_nan_or_inf", "incr_ratio", "decr_ratio",
                  "use_dynamic_loss_scaling")


def _warn_legacy_env() -> None:
    if not layout.env_any(_legacy_env_names()):
        return  # the common case, in one set test
    for path, name in _legacy_env():
        if layout.env_is_set(name):
            on = os.environ[name].strip().lower() in ("1", "true")
            warn(
                None,
                f"environment variable {name} is no longer read; set {path}: {str(on).lower()} in the strategy file "
                "instead (`strategy migrate-env` writes it for you)",
                stacklevel=5,
            )


@functools.cache
def _legacy_env_names() -> tuple[str, ...]:
    return tuple(name for _, name in _legacy_env())


@functools.cache
def _legacy_env() -> tuple[tuple[str, str], ...]:
    """(field path, environment variable) for each (legacy_env) in the schema."""
    return tuple((path, name) for path, _, name in schema.fields_with("legacy_env"))
