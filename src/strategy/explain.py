"""`explain`: what each setting of a strategy is, where it came from, and whether it takes effect."""

from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor

from . import rules, schema
from ._generated.distributed_strategy_pb2 import DistributedStrategy
from .resolution import Resolved, resolve_with_reasons

__all__ = ["explain", "show_value"]


def show_value(value: object) -> str:
    """A value as a strategy file spells it: true/false, quoted strings."""
    if isinstance(value, bool):
        return str(value).lower()
    return f'"{value}"' if isinstance(value, str) else str(value)


def explain(s: DistributedStrategy, *, world_size: int | None = None) -> str:
    """A table of every field (value, set or default, effect and why not), broken rules, notes, and the
    process groups for the world size. A strategy that breaks a `requires` rule is explained, not rejected.

    Raises:
        StrategyError: the degrees do not fit the world size, or a degree is unsupported.
    """
    resolved, reasons = resolve_with_reasons(s, world_size=world_size, requires=False)
    rows = [("field", "value", "source", "effect")]
    for path, field in schema.walk():
        if schema.is_message(field):
            continue
        owner, value, is_set = s, None, True
        for name in path.split("."):
            is_set = is_set and owner.HasField(name)
            value = getattr(owner, name)
            owner = value
        rows.append((path, show_value(value), "set" if is_set else "default", _effect(path, value, field, reasons, resolved)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    for path, needed in rules.requires_violations(s):
        lines += ["", f"rule broken: {path} requires {needed}: true (an error under policy 'strict'; Paddle turns it off)"]
    if resolved.notes:
        lines += ["", "notes:"] + [f"  {n}" for n in resolved.notes]
    mp_groups, dp_groups = resolved.process_groups()
    lines += [
        "",
        f"process groups for {resolved.world_size} ranks (dp outermost, mp innermost):",
        "  mp groups: " + " ".join(str(g) for g in mp_groups),
        "  dp groups: " + " ".join(str(g) for g in dp_groups),
    ]
    return "\n".join(lines)


def _effect(path: str, value: object, field: FieldDescriptor, reasons: dict[str, str], resolved: Resolved) -> str:
    if path in reasons:
        return f"no effect: {reasons[path]}"
    if schema.option(field, "axis"):
        actual = getattr(resolved, field.name)
        return f"inferred: {actual}" if actual != value else ""
    if isinstance(value, bool):
        return "on" if value else "off"
    return ""
