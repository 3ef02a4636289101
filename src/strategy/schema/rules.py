"""Checks that need the whole message: value ranges, allowed values and `requires` rules from the schema.

Run after every load (with field locations) and again by `resolve` (for messages built in code).
"""

# Annotations stay evaluated (no `from __future__ import annotations`): a NamedTuple's string annotations are
# compiled at class creation, which every `strategy` command pays at start.

from collections.abc import Mapping
import functools
from typing import Any, NamedTuple

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from . import descriptors as schema, support
from ..errors import Location, StrategyError, warn

__all__ = ["POLICIES", "check", "check_policy", "items_violate", "must_set", "report", "requires_violations", "value_rule",
           "violates"]

POLICIES = ("strict", "warn")


def check_policy(policy: str) -> None:
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(map(repr, POLICIES))}, got {policy!r}")


def check(
    msg: Message,
    positions: Mapping[str, Location],
    *,
    policy: str,
    source: str | None = None,
    requires: bool = True,
    errors: list[StrategyError] | None = None,
) -> None:
    """Raise on out-of-range values; raise (strict) or warn (warn) on broken `requires` rules (unless not `requires`).

    With `errors`, every problem is appended there instead of raising the first.
    """
    broken: list[tuple[str, str]] = []
    _walk(msg, "", positions, source, broken, errors=errors)
    report(broken, positions, policy=policy, source=source, requires=requires, errors=errors, stacklevel=6)


def report(broken: list[tuple[str, str]], positions: Mapping[str, Location], *, policy: str, source: str | None = None,
           requires: bool = True, errors: list[StrategyError] | None = None, stacklevel: int = 5) -> None:
    """Raise (strict) or warn (warn) on each broken `requires` rule, (dependent path, required path), at its line:
    the end of `check`, and all a document the direct readers checked as they read it needs."""
    for path, needed in broken if requires else ():
        where = positions.get(path) or Location(source)
        text = f"{path} requires {needed}: true"
        if policy == "strict":
            _report(StrategyError.at(where, text, field=path), errors)
        else:
            warn(where, f"{text}; resolving {path.rsplit('.', 1)[-1]} off (policy 'warn')", stacklevel=stacklevel)


def requires_violations(msg: Message) -> list[tuple[str, str]]:
    """(dependent path, required path) for every bool set true whose required sibling is false."""
    broken: list[tuple[str, str]] = []
    _walk(msg, "", {}, None, broken, values=False)
    return broken


class _Rule(NamedTuple):
    low: int | None
    high: int | None
    infer: int | None
    allowed: tuple[str, ...]
    requires: str | None
    distinct: bool | None


_OPTIONS = ("min_value", "max_value", "infer_value", "allowed", "requires", "distinct")
_NO_RULE = _Rule(None, None, None, (), None, None)
_MESSAGE, _MESSAGES, _PLAIN = object(), object(), object()  # what a field holds, when it has no rule
_RULES: dict[FieldDescriptor, _Rule | object] = {}  # the schema's rules, read per field the first time one is set


def _rule(field: FieldDescriptor) -> _Rule | object:
    """The field's rule from its options, else what it holds (_MESSAGE, _MESSAGES, _PLAIN); read once per process,
    when a file first sets it (descriptor attributes are slow to read on every walk)."""
    rule: _Rule | object = _Rule(*(schema.option(field, n) for n in _OPTIONS))
    if field.message_type is not None:
        rule = _MESSAGES if field.is_repeated else _MESSAGE
    elif rule == _NO_RULE:
        rule = _PLAIN
    _RULES[field] = rule
    return rule


def value_rule(field: FieldDescriptor) -> _Rule | None:
    """The rule on a field's values (range, allowed values, `requires`, no repeats), None when it has none."""
    rule = _RULES.get(field) or _rule(field)
    return rule if isinstance(rule, _Rule) else None


def violates(rule: _Rule, value: Any) -> bool:
    """Whether a single value breaks its rule's range or allowed values (what `check` reports, and how)."""
    below = rule.low is not None and value < rule.low
    if below and value != rule.infer and rule.high is None:
        return True
    if rule.high is not None and (below or value > rule.high) and value != rule.infer:
        return True
    return bool(rule.allowed) and value not in rule.allowed


def items_violate(rule: _Rule, values: Any) -> bool:
    """Whether a repeated field's items break its rule: a value not allowed, or one repeated where it must not."""
    if rule.allowed and any(item not in rule.allowed for item in values):
        return True
    return bool(rule.distinct) and len(set(values)) != len(values)


@functools.cache
def must_set(desc: Descriptor) -> tuple[FieldDescriptor, ...]:
    """The fields each item of a repeated message of type `desc` must set."""
    return tuple(f for f in desc.fields if schema.option(f, "must_set"))


def _report(error: StrategyError, errors: list[StrategyError] | None) -> None:
    if errors is None:
        raise error
    errors.append(error)


def _walk(msg: Message, prefix: str, positions: Mapping[str, Location], source: str | None,
          broken: list[tuple[str, str]], values: bool = True, errors: list[StrategyError] | None = None) -> None:
    for field, value in msg.ListFields():  # only set fields: defaults satisfy every rule
        rule = _RULES.get(field) or _rule(field)
        if rule is _PLAIN:
            continue
        if rule is _MESSAGE:
            _walk(value, f"{prefix}{field.name}.", positions, source, broken, values, errors)
            continue
        if rule is _MESSAGES:
            for k, item in enumerate(value):
                here = f"{prefix}{field.name}[{k}]"
                for needed in must_set(field.message_type) if values else ():
                    if not item.HasField(needed.name):
                        where = positions.get(here) or Location(source)
                        _report(StrategyError.at(where, f"{here} needs {needed.name}", field=f"{here}.{needed.name}"), errors)
                _walk(item, here + ".", positions, source, broken, values, errors)
            continue
        assert isinstance(rule, _Rule)
        path = prefix + field.name
        if field.is_repeated:
            if values:
                _check_items(field, value, rule, path, positions, source, errors)
            continue
        if rule.requires and value is True and not getattr(msg, rule.requires):
            broken.append((path, prefix + rule.requires))
        if not values or not violates(rule, value):
            continue  # the common case: nothing to report
        if rule.low is not None and value < rule.low and value != rule.infer and rule.high is None:
            also = f", or {rule.infer} to infer it" if rule.infer is not None else ""
            where = positions.get(path) or Location(source)
            text = f"{path} must be >= {rule.low}{also}; got {value}"
            if field.enum_type is not None:  # an enum whose low values are placeholders: name the real ones
                names = ", ".join(v.name for v in field.enum_type.values if v.number >= rule.low)
                text = f"{path} must be one of {names}; got {field.enum_type.values_by_number[value].name}"
            _report(StrategyError.at(where, text, field=path), errors)
        below = rule.low is not None and value < rule.low
        if rule.high is not None and (below or value > rule.high) and value != rule.infer:
            where = positions.get(path) or Location(source)
            _report(StrategyError.at(where, f"{path} must be {_range(rule.low, rule.high)}; got {value}", field=path), errors)
        if rule.allowed and value not in rule.allowed:
            where = positions.get(path) or Location(source)
            _report(StrategyError.at(where, _not_allowed(path, value, rule.allowed), field=path), errors)


def _range(low: int | None, high: int) -> str:
    """"one of 1, 2, 3" for a few values, "between 1 and 64" for more, "<= 3" without a lower bound."""
    if low is None:
        return f"<= {high}"
    if high - low < 5:
        return "one of " + ", ".join(map(str, range(low, high + 1)))
    return f"between {low} and {high}"


def _not_allowed(path: str, value: str, allowed: tuple[str, ...]) -> str:
    choices = ", ".join(f'"{a}"' for a in allowed)
    hint = schema.did_you_mean(value, list(allowed)) if value else ""
    hint = hint if hint.startswith("; did") else ""
    return f'{path} must be one of {choices}; got "{value}"{hint}'


def _check_items(field: FieldDescriptor, value: Any, rule: _Rule, path: str, positions: Mapping[str, Location],
                 source: str | None, errors: list[StrategyError] | None) -> None:
    """A repeated scalar's rules, item by item, each error at its item: allowed values, no repeats."""
    first: dict[Any, int] = {}
    for k, item in enumerate(value):
        here = f"{path}[{k}]"
        where = positions.get(here) or positions.get(path) or Location(source)
        if rule.allowed and item not in rule.allowed:
            _report(StrategyError.at(where, _not_allowed(here, item, rule.allowed), field=here), errors)
        elif rule.distinct and item in first:
            text = f"{here} = {support.show_scalar(field, item)} repeats {path}[{first[item]}]; keep one"
            _report(StrategyError.at(where, text, field=here), errors)
        first.setdefault(item, k)
