"""Checks that need the whole message: value ranges, allowed values and `requires` rules from the schema.

Run after every load (with field locations) and again by `resolve` (for messages built in code).
"""

from __future__ import annotations

from google.protobuf.message import Message

from . import schema
from .errors import Location, StrategyError, warn

__all__ = ["POLICIES", "check", "check_policy", "requires_violations"]

POLICIES = ("strict", "warn")


def check_policy(policy: str) -> None:
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(map(repr, POLICIES))}, got {policy!r}")


def check(msg: Message, positions: dict[str, Location], *, policy: str, source: str | None = None) -> None:
    """Raise on out-of-range values; raise (strict) or warn (warn) on broken `requires` rules."""
    _values(msg, "", positions, source)
    for path, needed in requires_violations(msg):
        where = positions.get(path) or Location(source)
        text = f"{path} requires {needed}: true"
        if policy == "strict":
            raise StrategyError.at(where, text, field=path)
        warn(where, f"{text}; resolving {path.rsplit('.', 1)[-1]} off (policy 'warn')", stacklevel=5)


def requires_violations(msg: Message, prefix: str = "") -> list[tuple[str, str]]:
    """(dependent path, required path) for every bool set true whose required sibling is false."""
    found = []
    for field in msg.DESCRIPTOR.fields:
        path = prefix + field.name
        if schema.is_message(field) and not schema.is_repeated(field):
            if msg.HasField(field.name):
                found += requires_violations(getattr(msg, field.name), path + ".")
            continue
        needed = schema.option(field, "requires")
        if needed and getattr(msg, field.name) is True and not getattr(msg, needed):
            found.append((path, prefix + needed))
    return found


def _values(msg: Message, prefix: str, positions: dict[str, Location], source: str | None) -> None:
    for field in msg.DESCRIPTOR.fields:
        path = prefix + field.name
        if schema.is_repeated(field) or not msg.HasField(field.name):
            continue
        value = getattr(msg, field.name)
        if schema.is_message(field):
            _values(value, path + ".", positions, source)
            continue
        where = positions.get(path) or Location(source)
        low, infer = schema.option(field, "min_value"), schema.option(field, "infer_value")
        if low is not None and value < low and value != infer:
            also = f", or {infer} to infer it" if infer is not None else ""
            raise StrategyError.at(where, f"{path} must be >= {low}{also}; got {value}", field=path)
        allowed = schema.option(field, "allowed")
        if allowed and value not in allowed:
            choices = ", ".join(f'"{a}"' for a in allowed)
            hint = schema.did_you_mean(value, allowed) if value else ""
            hint = hint if hint.startswith("; did") else ""
            raise StrategyError.at(where, f'{path} must be one of {choices}; got "{value}"{hint}', field=path)
