"""`explain`: what each setting of a strategy is, where it came from, and whether it takes effect."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from . import layout, memory
from ..schema import rules, support
from .. import schema
from .._generated.distributed_strategy_pb2 import DistributedStrategy
from .._generated.strategy_options_pb2 import IMPLEMENTED
from ..errors import StrategyError
from .resolver import resolve_with_reasons
from .resolved import Resolved
from .topology import Topology

__all__ = ["explain", "show_value"]


def show_value(value: object) -> str:
    """A value as a strategy file spells it: true/false, quoted strings."""
    return support.show_scalar(None, value)


def explain(s: DistributedStrategy, *, world_size: int | None = None, params: float | None = None) -> str:
    """A table of every field the strategy sets and every implemented setting (value, set or default, effect and
    why not), broken rules, notes, and the process groups of every axis of degree > 1 for the world size, as the
    file lays them out (also axes not implemented yet, marked). With pp_degree > 1, the torch schedule, each pp rank's
    stages and what a step takes. With `params`, each rank's model-state memory for a model of that many parameters
    (`Resolved.model_state_memory`). A strategy that breaks a `requires` rule, sets what is not implemented or
    whose pipeline cannot run (too few micro-batches, ...) is explained, not rejected.

    Raises:
        StrategyError: the degrees do not fit the world size.
        ValueError: `params` is not a positive number.
    """
    problems: list[StrategyError] = []
    resolved, reasons = resolve_with_reasons(s, world_size=world_size, requires=False, unsupported="report",
                                             problems=problems)
    review = support.review(s)
    try:  # what the file asks for: a run resolves a degree that is not implemented yet as 1
        asked: Topology | str = layout.requested(s, world_size)
    except StrategyError as e:
        asked = e.message
    degrees = {a.field: asked.degrees[a.name] for a in layout.plan().axes} if isinstance(asked, Topology) else {}
    rows = [("field", "value", "source", "effect")]
    for path, chain, value, is_set in _rows(s, "", ()):
        field = chain[-1]
        gated = f"no effect: {reasons[path]}" if path in reasons else None
        effect = gated or review.effects.get(path) or _effect(s, chain, value, resolved, degrees)
        rows.append((path, support.show(field, value), "set" if is_set else "default", effect))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    for path, needed in rules.requires_violations(s):
        lines += ["", f"rule broken: {path} requires {needed}: true (an error under policy 'strict'; Paddle turns it off)"]
    if resolved.notes:
        lines += ["", "notes:"] + [f"  {n}" for n in resolved.notes]
    groups = _groups(asked, review) if isinstance(asked, Topology) else [f"process groups: none, {asked}"]
    stages = [""] + _pipeline(resolved, problems) if resolved.pp_degree > 1 else []
    state = [""] + _memory(resolved, params) if params is not None else []
    return "\n".join(lines + [""] + groups + stages + state)


def _pipeline(resolved: Resolved, problems: list[StrategyError]) -> list[str]:
    """The torch schedule that runs, each pp rank's stages, and what a step takes; what keeps it from running."""
    p = resolved.pipeline
    shape = "in a V" if p.placement == "v" else "in a loop" if p.virtual_pp_degree > 1 else "one per rank"
    lines = [f"pipeline: torch.distributed.pipelining.{p.schedule}, {p.num_stages} stages over pp {p.pp_degree} "
             f"({shape})"]
    lines += [f"  pp rank {r}: stage{'s' * (p.virtual_pp_degree > 1)} {', '.join(map(str, p.stages_of(r)))}"
              for r in range(p.pp_degree)]
    data = resolved.dp_degree * resolved.sharding_degree
    lines.append(f"  a step: {_count(p.accumulate_steps, 'micro-batch')} (accumulate_steps) × "
                 f"{_count(p.micro_batch_size, 'sample')} (micro_batch_size) = {_count(p.samples_per_step, 'sample')} "
                 f"per data rank, {p.samples_per_step * data} over {_count(data, 'data rank')} (dp × sharding)")
    lines += [f"  cannot run (an error when resolved): {e}" for e in problems]
    return lines


def _count(n: int, word: str) -> str:
    """"1 sample", "4 samples", "2 micro-batches"."""
    return f"{n} {word}" if n == 1 else f"{n} {word}{'es' if word.endswith('h') else 's'}"


def _memory(resolved: Resolved, params: float) -> list[str]:
    """Each rank's model-state memory next to one process holding it all, and the assumptions behind it."""
    m = resolved.model_state_memory(params)
    amp = resolved.amp
    if amp.enabled and amp.pure:
        bytes_ = f"{amp.dtype} weights and gradients, fp32 master weights and Adam moments: 2 + 2 + 12 bytes a parameter"
    else:
        autocast = " (autocast keeps fp32 weights)" if amp.enabled else ""
        bytes_ = f"fp32 weights, gradients and Adam moments{autocast}: 4 + 4 + 8 bytes a parameter"
    n, stage = resolved.sharding_degree, resolved.sharding.stage
    sharded = ("optimizer state", "optimizer state and gradients", "optimizer state, gradients and parameters")[stage - 1]
    zero = f"ZeRO stage {stage} shards the {sharded} over sharding {n}" if n > 1 else "no sharding (sharding_degree 1)"
    rows = [("", "per rank", "one process")] + [
        (name, memory.human_bytes(getattr(m.per_rank, key)), memory.human_bytes(getattr(m.unsharded, key)))
        for name, key in (("parameters", "parameters"), ("gradients", "gradients"), ("Adam state", "optimizer"),
                          ("total", "total"))
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"model-state memory for {params:,.0f} parameters (ZeRO's formulas):", f"  {bytes_}",
             f"  split over mp {resolved.mp_degree} × pp {resolved.pp_degree}; {zero}"]
    lines += ["  " + "  ".join([r[0].ljust(widths[0]), r[1].rjust(widths[1]), r[2].rjust(widths[2])]) for r in rows]
    if n > 1 and stage == 1:
        lines.append("  (stage 1 as ZeRO counts it: full gradients, which FSDP2 holds only while gradient merge "
                     "accumulates; between steps they are sharded)")
    return lines


def _groups(topology: Topology, review: support.Review) -> list[str]:
    """The groups of each axis of degree > 1, in order; those of an axis not implemented yet marked."""
    plan = layout.plan()
    fields = {a.name: f"{plan.hybrid}.{a.field}" for a in plan.axes}
    n, order = topology.world_size, topology.order
    lines = [f"process groups for {n} rank{'s' * (n != 1)} (order {', '.join(order)}; {order[-1]} innermost):"]
    pending = []
    for axis, degree in topology.degrees.items():
        if degree > 1:
            later = review.effects.get(fields[axis], "").startswith("not implemented")
            pending += [axis] * later
            lines.append(f"  {axis} groups: " + " ".join(str(g) for g in topology.groups(axis)) + "  (not implemented yet)" * later)
    sep = topology.degrees.get("sep", 1)
    if sep > 1:  # what each sep rank holds of a row
        shares = ", ".join(f"rank {r} tokens [{r}/{sep}, {r + 1}/{sep})" for r in range(sep))
        lines.append(f"  each sep group splits every row into {sep} contiguous chunks ({shares} of its length); "
                     "they read the same batch")
    if len(lines) == 1:
        lines.append("  none: every axis has degree 1")
    if pending:
        lines.append(f"  ({', '.join(pending)}: not implemented yet; policy 'strict' rejects the file, 'warn' runs "
                     f"{'them' if len(pending) > 1 else 'it'} at degree 1, which the notes assume)")
    return lines


def _rows(msg: Message, prefix: str, chain: tuple[FieldDescriptor, ...]) -> Iterator[tuple[str, tuple[FieldDescriptor, ...], Any, bool]]:
    """(path, its fields from the root, value, is set) for each field that is set, and for each implemented one
    (or degree) left at its default, in schema order."""
    for field in msg.DESCRIPTOR.fields:
        path, here = prefix + field.name, chain + (field,)
        value = getattr(msg, field.name)
        if field.message_type is not None:
            if field.is_repeated:
                for k, item in enumerate(value):
                    yield from _rows(item, f"{path}[{k}].", here)
            elif msg.HasField(field.name) or support.status(here).support == IMPLEMENTED:
                yield from _rows(value, path + ".", here)
            continue
        is_set = len(value) > 0 if field.is_repeated else msg.HasField(field.name)
        shown = support.status(here).support == IMPLEMENTED or schema.option(field, "axis")
        if is_set or (shown and not prefix.endswith("].")):
            yield path, here, value, is_set


def _effect(s: DistributedStrategy, chain: tuple[FieldDescriptor, ...], value: object, resolved: Resolved,
            degrees: dict[str, int]) -> str:
    """`degrees`: the file's own, by field name (also those not implemented yet), when they fit the world size."""
    field = chain[-1]
    if schema.option(field, "always_on"):  # on whatever the value, while its message takes effect
        return "off" if support.inactive(s, chain) else "always on"
    if schema.option(field, "axis_order"):
        return "outermost first: " + ", ".join(resolved.order)
    if schema.option(field, "axis"):
        actual = degrees.get(field.name, getattr(resolved, field.name))
        return f"inferred: {actual}" if actual != value else ""
    if isinstance(value, bool):
        return "on" if value else "off"
    return ""
