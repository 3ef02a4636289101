"""`explain`: what each setting of a strategy is, where it came from, whether it takes effect, and what a run builds
of it (the process groups, the pipeline, the model-state memory), as text for people and as one JSON document."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from . import experts, layout, memory
from .experts import ExpertLayout
from .fold import fill, fold, table
from ..schema import rules, support
from .. import schema
from .._generated.distributed_strategy_pb2 import DistributedStrategy
from .._generated.strategy_options_pb2 import IMPLEMENTED
from ..errors import StrategyError
from ..notes import NO_EFFECT_KINDS, Effect, Kind, Note
from .resolver import resolve_with_reasons
from .resolved import Resolved
from .topology import Topology

__all__ = ["Explanation", "Row", "explain", "explanation", "show_value"]


def show_value(value: object) -> str:
    """A value as a strategy file spells it: true/false, quoted strings."""
    return support.show_scalar(None, value)


class Row(NamedTuple):
    """One field: `value` as a file spells it, `data` as JSON holds it, `source` "set" or "default", `effect` what
    the run does with it ("" when the value is simply used), `changed`: shown by default (set, an inferred degree, or
    a setting that (decides) how an axis runs while its message takes effect: sharding_configs.stage at
    sharding_degree 2)."""

    path: str
    value: str
    data: Any
    source: str
    effect: str
    changed: bool
    kind: Kind | None = None  # what `effect` says, as data (None: the value is used, or on / off)


class Explanation:
    """Everything `explain` says of one strategy at one world size; `text()` and `as_dict()` render it."""

    __slots__ = ("groups", "memory", "notes", "pipeline", "problems", "resolved", "rows", "rules_broken", "topology",
                 "world_size")

    def __init__(self, *, rows: list[Row], rules_broken: list[tuple[str, str]], notes: list[Note],
                 topology: Topology | str, pending: list[str], resolved: Resolved, problems: list[StrategyError],
                 params: float | None, expert_params: float | None = None) -> None:
        self.rows, self.rules_broken, self.notes = rows, rules_broken, notes
        self.topology, self.resolved, self.problems = topology, resolved, problems
        self.world_size = resolved.world_size
        self.groups = _groups(topology, pending)
        self.pipeline = _pipeline(resolved, problems) if resolved.pp_degree > 1 else None
        self.memory = _memory(resolved, params, expert_params) if params is not None else None

    def text(self, *, all_fields: bool = False) -> str:
        """The table of fields (only those `Row.changed` marks, unless `all_fields`), the broken rules, the notes no
        row already says, the groups, the pipeline and the memory, folded to 100 columns."""
        lines = table([("field", "value", "source", "effect")] + [
            (r.path, r.value, r.source, r.effect) for r in self.rows if all_fields or r.changed])
        for path, needed in self.rules_broken:
            lines += ["", f"rule broken: {path} requires {needed}: true (an error under policy 'strict'; Paddle turns "
                          "it off)"]
        shown = {r.path: r.kind for r in self.rows if all_fields or r.changed}
        notes = [n for n in self.notes if not _said_by_row(n, shown)]
        if notes:
            lines += ["", "notes:"] + [f"  {n}" for n in notes]
        lines += [""] + self.groups[1]
        for section in (self.pipeline, self.memory):
            if section is not None:
                lines += [""] + section[1]
        return "\n".join(folded for line in lines for folded in fold(line))

    def as_dict(self) -> dict[str, Any]:
        """All of it as plain data (`json.dumps` writes it): every field, the rules, notes, groups, pipeline, memory."""
        return {
            "world_size": self.world_size,
            "fields": [{"path": r.path, "value": r.data, "source": r.source, "effect": r.effect, "changed": r.changed}
                       for r in self.rows],
            "rules_broken": [{"field": path, "requires": needed} for path, needed in self.rules_broken],
            "notes": list(self.notes),
            "groups": self.groups[0],
            "pipeline": None if self.pipeline is None else self.pipeline[0],
            "memory": None if self.memory is None else self.memory[0],
        }


def explain(s: DistributedStrategy, *, world_size: int | None = None, params: float | None = None,
            all_fields: bool = False, expert_params: float | None = None) -> str:
    """What a run does with `s`, within 100 columns: the fields it sets, the degrees inferred, and the settings that
    decide how an axis runs while it is on (schema option `decides`: sharding_configs.stage at sharding_degree > 1)
    (every field with `all_fields`: every one it sets and every implemented one), each with its value, set or
    default, effect and why not; broken rules, notes, and the process groups of every axis of degree > 1 for the
    world size, as the file lays them out (also axes not implemented yet, marked). With pp_degree > 1, the torch
    schedule, each pp rank's stages and what a step takes. With `params`, each rank's model-state memory for a model
    of that many parameters (`Resolved.model_state_memory`). A strategy that breaks a `requires` rule, sets what is
    not implemented or whose pipeline cannot run (too few micro-batches, ...) is explained, not rejected.

    Raises:
        StrategyError: the degrees do not fit the world size.
        ValueError: `params` is not a positive number.
    """
    return explanation(s, world_size=world_size, params=params, expert_params=expert_params).text(all_fields=all_fields)


def explanation(s: DistributedStrategy, *, world_size: int | None = None, params: float | None = None,
                expert_params: float | None = None) -> Explanation:
    """`explain`'s content as an `Explanation` (for `--json`, editors and scripts); raises as `explain` does."""
    problems: list[StrategyError] = []
    resolved, reasons = resolve_with_reasons(s, world_size=world_size, requires=False, unsupported="report",
                                             problems=problems)
    review = support.review(s)
    try:  # what the file asks for: a run resolves a degree that is not implemented yet as 1
        asked: Topology | str = layout.requested(s, world_size)
    except StrategyError as e:
        asked = e.message
    expert: ExpertLayout | str | None = None
    if isinstance(asked, Topology) and layout.has_experts(s.hybrid_configs):
        try:
            expert = experts.requested(s, world_size)
        except StrategyError as e:
            expert = e.message
        if isinstance(expert, ExpertLayout):  # Paddle lays the dense axes out around the expert ones
            asked = Topology.of(asked.degrees, expert.dense_order)
    degrees = {a.field: asked.degrees[a.name] for a in layout.plan().axes} if isinstance(asked, Topology) else {}
    folded = {n.path: n.effect for n in resolved.notes if n.kind in NO_EFFECT_KINDS}
    rows = []
    for path, chain, value, is_set in _fields(s, "", ()):
        field = chain[-1]
        said: Effect | str | None = Effect(Kind.NO_EFFECT, reasons[path]) if path in reasons else None
        said = said or review.effects.get(path) or _effect(s, chain, value, resolved, degrees)
        if path in folded and (not said or isinstance(said, Effect) and said.kind in NO_EFFECT_KINDS):
            said = said or folded[path]  # a note's reason, on the row it is about
        kind = said.kind if isinstance(said, Effect) else None
        decides = schema.option(field, "decides") and not support.inactive(s, chain)
        changed = bool(is_set or kind is Kind.INFERRED or decides)
        rows.append(Row(path, support.show(field, value), _data(field, value), "set" if is_set else "default",
                        str(said or ""), changed, kind))
    found = Explanation(rows=rows, rules_broken=list(rules.requires_violations(s)), notes=list(resolved.notes),
                        topology=asked, pending=_pending(asked, review), resolved=resolved, problems=problems,
                        params=params, expert_params=expert_params)
    if expert is not None:
        _add_expert_groups(found, expert, review)
    return found


def _add_expert_groups(found: Explanation, expert: ExpertLayout | str, review: support.Review) -> None:
    """The expert topology's groups after the dense ones: ep, moe_sharding and the experts' replicas (edp)."""
    facts, lines = found.groups
    if isinstance(expert, str):
        facts["experts"] = {"error": expert}
        lines.append(f"  expert groups: none, {expert}")
        return
    t = expert.topology
    p = layout.plan()
    pending = {a.name for a in p.expert_axes if _not_implemented(review, f"hybrid_configs.{a.field}")}
    lines.append(f"  expert groups (order {', '.join(t.order)}; {t.order[-1]} innermost; {experts.REPLICAS}: the ranks "
                 "beyond pp × moe_sharding × ep, replicas of the same experts):")
    facts["experts"] = {"order": list(t.order), "axes": {}}
    for axis, degree in t.degrees.items():
        if degree > 1:
            later = axis in pending
            facts["experts"]["axes"][axis] = {"degree": degree, "groups": t.groups(axis), "implemented": not later}
            lines += _group_lines(f"    {axis} groups: ", t.groups(axis), later)


def _not_implemented(review: support.Review, path: str) -> bool:
    effect = review.effects.get(path)
    return effect is not None and effect.kind is Kind.NOT_IMPLEMENTED


def _said_by_row(note: Note, shown: dict[str, Kind | None]) -> bool:
    """A note that only says what a shown row's effect already says (that the field has no effect)."""
    return note.kind in NO_EFFECT_KINDS and shown.get(note.path) in NO_EFFECT_KINDS


def _data(field: FieldDescriptor, value: Any) -> Any:
    """A value as JSON holds it: enum names, lists, floats as a file spells them (0.8, not 0.800000011920929)."""
    if field.is_repeated:
        return [_data_scalar(field, v) for v in value]
    return _data_scalar(field, value)


def _data_scalar(field: FieldDescriptor, value: Any) -> Any:
    if field.enum_type is not None or isinstance(value, float):
        shown = support.show_scalar(field, value)
        return shown if field.enum_type is not None else float(shown)
    return value


def _pipeline(resolved: Resolved, problems: list[StrategyError]) -> tuple[dict[str, Any], list[str]]:
    """The torch schedule that runs, each pp rank's stages, and what a step takes; what keeps it from running."""
    p = resolved.pipeline
    shape = "in a V" if p.placement == "v" else "in a loop" if p.virtual_pp_degree > 1 else "one per rank"
    lines = [f"pipeline: torch.distributed.pipelining.{p.schedule}, {p.num_stages} stages over pp {p.pp_degree} "
             f"({shape})"]
    lines += [f"  pp rank {r}: stage{'s' * (p.virtual_pp_degree > 1)} {', '.join(map(str, p.stages_of(r)))}"
              for r in range(p.pp_degree)]
    data = resolved.dp_degree * resolved.sharding_degree
    # accumulate_steps × micro_batch_size: the table shows both fields (they decide what runs) whenever pp > 1
    lines.append(f"  a step: {_count(p.accumulate_steps, 'micro-batch')} × {_count(p.micro_batch_size, 'sample')} = "
                 f"{_count(p.samples_per_step, 'sample')} per data rank, {p.samples_per_step * data} over "
                 f"{_count(data, 'data rank')} (dp × sharding)")
    lines += [f"  cannot run (an error when resolved): {e}" for e in problems]
    facts = {"schedule": p.schedule, "pp_degree": p.pp_degree, "num_stages": p.num_stages,
             "virtual_pp_degree": p.virtual_pp_degree, "placement": p.placement,
             "stages_of_pp_rank": [list(p.stages_of(r)) for r in range(p.pp_degree)],
             "accumulate_steps": p.accumulate_steps, "micro_batch_size": p.micro_batch_size,
             "samples_per_step": p.samples_per_step, "data_ranks": data, "problems": [str(e) for e in problems]}
    return facts, lines


def _count(n: int, word: str) -> str:
    """"1 sample", "4 samples", "2 micro-batches"."""
    return f"{n} {word}" if n == 1 else f"{n} {word}{'es' if word.endswith('h') else 's'}"


_STATES = (("parameters", "parameters"), ("gradients", "gradients"), ("Adam state", "optimizer"), ("total", "total"))


def _memory(resolved: Resolved, params: float, expert_params: float | None = None) -> tuple[dict[str, Any], list[str]]:
    """Each rank's model-state memory next to one process holding it all, and the assumptions behind it; with
    `expert_params` (the experts' share of `params`), the dense and the expert parts apart: experts ÷ ep."""
    if expert_params is not None and not 0 < expert_params < params:
        raise ValueError(f"expert_params must be a positive part of params ({params:,.0f}), got {expert_params!r}")
    dense = params - (expert_params or 0)
    m = resolved.model_state_memory(dense)
    experts = resolved.expert_state_memory(expert_params) if expert_params else None
    amp = resolved.amp
    if resolved.sharding_degree > 1:
        bytes_ = "fp32 weights (master copies under pure amp), gradients, Adam moments: 4 + 4 + 8 bytes a parameter"
    elif amp.enabled and amp.pure:
        bytes_ = f"{amp.dtype} weights and gradients, fp32 master weights and Adam moments: 2 + 2 + 12 bytes a parameter"
    else:
        autocast = " (autocast keeps fp32 weights)" if amp.enabled else ""
        bytes_ = f"fp32 weights, gradients and Adam moments{autocast}: 4 + 4 + 8 bytes a parameter"
    n, stage = resolved.sharding_degree, resolved.sharding.stage
    zero = (f"FSDP2 keeps fp32 shards of weights, gradients and Adam state over sharding {n} between steps (stage "
            f"{stage}; below 3 the whole weights are gathered from forward to backward)") if n > 1 else \
        "no sharding (sharding_degree 1)"
    whose = [("per rank", m.per_rank), ("one process", m.unsharded)]
    if experts is not None:
        both = memory.ModelStateBytes(*(getattr(m.per_rank, k) + getattr(experts.per_rank, k)
                                        for k in ("parameters", "gradients", "optimizer")))
        whole = memory.ModelStateBytes(*(getattr(m.unsharded, k) + getattr(experts.unsharded, k)
                                         for k in ("parameters", "gradients", "optimizer")))
        whose = [("dense per rank", m.per_rank), ("experts per rank", experts.per_rank), ("per rank", both),
                 ("one process", whole)]
    table = [[""] + [name for name, _ in _STATES]] + [
        [who] + [memory.human_bytes(getattr(state, key)) for _, key in _STATES] for who, state in whose]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = [f"model-state memory for {params:,.0f} parameters (as this runtime holds them after a step):", f"  {bytes_}",
             f"  split over mp {resolved.mp_degree} × pp {resolved.pp_degree}; {zero}"]
    if experts is not None:
        moe = resolved.experts.moe_sharding_degree
        held = (f"each rank its block, sharded over moe_sharding {moe} at stage {stage}, whole on the replicas beyond"
                if moe > 1 else "each rank its block, whole on the replicas beyond ep")
        lines.append(f"  of them {expert_params:,.0f} in experts, split over ep {resolved.experts.ep_degree} × pp "
                     f"{resolved.pp_degree} ({held})")
    lines += ["  " + "  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]).rstrip()
              for r in table]
    lines.append("  (activations and the weights FSDP2 gathers during a step come on top: strategy plan and "
                 "strategy.estimate_memory count them for a model)")
    facts = {"params": params, "expert_params": expert_params,
             "bytes": {who.replace(" ", "_"): {key: getattr(state, key) for _, key in _STATES} for who, state in whose},
             "sharding_degree": n, "stage": stage, "mp_degree": resolved.mp_degree, "pp_degree": resolved.pp_degree}
    return facts, lines


def _pending(topology: Topology | str, review: support.Review) -> list[str]:
    """The axes of degree > 1 that are not implemented yet."""
    if not isinstance(topology, Topology):
        return []
    fields = {a.name: f"hybrid_configs.{a.field}" for a in layout.plan().axes}
    return [axis for axis, degree in topology.degrees.items()
            if degree > 1 and _not_implemented(review, fields[axis])]


def _groups(topology: Topology | str, pending: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The groups of each axis of degree > 1, in order; those of an axis not implemented yet marked."""
    if not isinstance(topology, Topology):
        return {"error": topology}, [f"process groups: none, {topology}"]
    n, order = topology.world_size, topology.order
    lines = [f"process groups for {n} rank{'s' * (n != 1)} (order {', '.join(order)}; {order[-1]} innermost):"]
    axes = {}
    for axis, degree in topology.degrees.items():
        if degree > 1:
            later = axis in pending
            axes[axis] = {"degree": degree, "groups": topology.groups(axis), "implemented": not later}
            lines += _group_lines(f"  {axis} groups: ", topology.groups(axis), later)
    sep = topology.degrees.get("sep", 1)
    if sep > 1:  # what each sep rank holds of a row
        shares = ", ".join(f"rank {r} tokens [{r}/{sep}, {r + 1}/{sep})" for r in range(sep))
        lines.append(f"  each sep group splits every row into {sep} contiguous chunks ({shares} of its length); "
                     "they read the same batch")
    cp = topology.degrees.get("cp", 1)
    if cp > 1:  # the causal load balance: every cp rank does the same attention work
        shares = ", ".join(f"rank {r} chunks {r} and {2 * cp - 1 - r}" for r in range(cp))
        lines.append(f"  each cp group cuts every row into {2 * cp} chunks ({shares}); they read the same batch")
    if len(lines) == 1:
        lines.append("  none: every axis has degree 1")
    if pending:
        lines.append(f"  ({', '.join(pending)}: not implemented yet; policy 'strict' rejects the file, 'warn' runs "
                     f"{'them' if len(pending) > 1 else 'it'} at degree 1, which the notes assume)")
    return {"world_size": n, "order": list(order), "axes": axes}, lines


def _group_lines(head: str, groups: list[list[int]], later: bool) -> list[str]:
    """An axis's groups after `head`, folded under the first group, whole groups a line."""
    return fill([str(g) for g in groups] + ["(not implemented yet)"] * later, head, " " * len(head))


def _fields(msg: Message, prefix: str, chain: tuple[FieldDescriptor, ...]) -> Iterator[tuple[str, tuple[FieldDescriptor, ...], Any, bool]]:
    """(path, its fields from the root, value, is set) for each field that is set, and for each implemented one
    (or degree) left at its default, in schema order."""
    for field in msg.DESCRIPTOR.fields:
        path, here = prefix + field.name, chain + (field,)
        value = getattr(msg, field.name)
        if field.message_type is not None:
            if field.is_repeated:
                for k, item in enumerate(value):
                    yield from _fields(item, f"{path}[{k}].", here)
            elif msg.HasField(field.name) or support.status(here).support == IMPLEMENTED:
                yield from _fields(value, path + ".", here)
            continue
        is_set = len(value) > 0 if field.is_repeated else msg.HasField(field.name)
        shown = support.status(here).support == IMPLEMENTED or schema.option(field, "axis")
        if is_set or (shown and not prefix.endswith("].")):
            yield path, here, value, is_set


def _effect(s: DistributedStrategy, chain: tuple[FieldDescriptor, ...], value: object, resolved: Resolved,
            degrees: dict[str, int]) -> Effect | str:
    """`degrees`: the file's own, by field name (also those not implemented yet), when they fit the world size."""
    field = chain[-1]
    if schema.option(field, "always_on"):  # on whatever the value, while its message takes effect
        return "off" if support.inactive(s, chain) else "always on" if value else Effect(Kind.FALSE_HAS_NO_EFFECT, "")
    if schema.option(field, "axis_order"):
        return "outermost first: " + ", ".join(resolved.order)
    if schema.option(field, "axis"):
        actual = degrees.get(field.name, getattr(resolved, field.name))
        return Effect(Kind.INFERRED, str(actual)) if actual != value else ""
    if isinstance(value, bool):
        return "on" if value else "off"
    return ""
