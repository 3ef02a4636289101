"""What this project does with each field a strategy sets: implemented, no effect in PyTorch, or not implemented.

Every field declares `(support)` and a `(hint)` in the schema; nothing here names a field.
"""

from __future__ import annotations

import functools
import struct
from collections import OrderedDict
from dataclasses import dataclass, field as dc_field
from typing import Any, NamedTuple

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from . import schema
from ._generated.strategy_options_pb2 import IMPLEMENTED, NO_EFFECT, NOT_IMPLEMENTED, Support
from .errors import Location, StrategyError

__all__ = ["Finding", "Review", "combined", "effective", "recall", "remember", "review", "status"]

STATUS_NAMES = {IMPLEMENTED: "implemented", NO_EFFECT: "no effect", NOT_IMPLEMENTED: "not implemented"}


class Status(NamedTuple):
    support: int  # a Support value
    hint: str


class Finding(NamedTuple):
    """A set field that is not implemented and not at its default."""

    path: str
    error: StrategyError


@dataclass(slots=True)
class Review:
    """What a strategy sets that the runtime does not act on.

    Attributes:
        unsupported: not-implemented fields set to something other than their default, each with its error.
        notes: one sentence per set field that has no effect (and why).
        effects: for each set field the runtime does not act on, by dotted path: "no effect in PyTorch: why",
            "no effect: pp_degree is 1" or "not implemented: what to use instead" (for explain).
    """

    unsupported: list[Finding] = dc_field(default_factory=list)
    notes: list[str] = dc_field(default_factory=list)
    effects: dict[str, str] = dc_field(default_factory=dict)


def status(chain: tuple[FieldDescriptor, ...]) -> Status:
    """The support of the last field of `chain` (a path from the root): the nearest status on the path that
    is not IMPLEMENTED, with its hint (the field's, else its message's `fields_hint`)."""
    for f in reversed(chain):
        support = schema.option(f, "support")
        if support not in (None, IMPLEMENTED):
            return Status(support, _hint(f))
    return Status(IMPLEMENTED, "")


@functools.cache
def _hint(f: FieldDescriptor) -> str:
    return schema.option(f, "hint") or schema.message_option(f.containing_type, "fields_hint") or ""


def review(msg: Message, *, positions: dict[str, Location] | None = None, source: str | None = None) -> Review:
    """Walk the set fields of `msg`: notes for those without effect, findings for unimplemented non-defaults.

    A setting inside an inactive message (pp_configs while pp_degree is 1, amp_configs while amp is false)
    takes no effect whatever its status, so it gets a note, not an error.
    """
    out = Review()
    _walk(msg, "", (), None, positions or {}, source, out)
    return out


def _walk(msg: Message, prefix: str, chain: tuple[FieldDescriptor, ...], inactive: str | None,
          positions: dict[str, Location], source: str | None, out: Review) -> None:
    for f, value in msg.ListFields():
        path = prefix + f.name
        here = chain + (f,)
        if f.message_type is not None:
            reason = inactive or _inactive(msg, f, prefix)
            if f.is_repeated:
                for k, item in enumerate(value):
                    _walk(item, f"{path}[{k}].", here, reason, positions, source, out)
            else:
                _walk(value, path + ".", here, reason, positions, source, out)
            continue
        st = status(here)
        if inactive:
            out.effects[path] = f"no effect: {inactive}"
            if st.support != IMPLEMENTED:  # resolution notes the implemented ones it gates off
                out.notes.append(f"{path} is set but has no effect: {inactive}.")
            continue
        if st.support == NO_EFFECT:
            out.effects[path] = f"no effect in PyTorch: {st.hint}"
            out.notes.append(f"{path} is set but has no effect in PyTorch: {st.hint}.")
        elif st.support == NOT_IMPLEMENTED and _differs(f, value):
            out.effects[path] = f"not implemented: {st.hint}"
            where = positions.get(_unindexed(path)) or Location(source)
            text = f"{path} = {show(f, value)} is not implemented by this project; {st.hint}"
            out.unsupported.append(Finding(path, StrategyError.at(where, text, field=path)))


def _inactive(owner: Message, f: FieldDescriptor, prefix: str) -> str | None:
    """Why nothing inside the message field `f` of `owner` takes effect, or None when it is active."""
    degree = schema.option(f, "active_when_parallel")
    if degree and getattr(owner, degree) <= 1:
        return f"{prefix}{degree} is {getattr(owner, degree)}"
    flag = schema.option(f, "active_when")
    if flag and not getattr(owner, flag):
        return f"{prefix}{flag} is false"
    return None


def _differs(f: FieldDescriptor, value: Any) -> bool:
    return len(value) > 0 if f.is_repeated else value != f.default_value


def _unindexed(path: str) -> str:
    return ".".join(part.split("[", 1)[0] for part in path.split("."))


def show(f: FieldDescriptor, value: Any) -> str:
    """A value as a strategy file spells it: true/false, quoted strings, enum names, [lists]."""
    if f.is_repeated:
        return "[" + ", ".join(show_scalar(f, v) for v in value) + "]"
    return show_scalar(f, value)


def show_scalar(f: FieldDescriptor | None, value: Any) -> str:
    if f is not None and f.enum_type is not None and isinstance(value, int):
        known = f.enum_type.values_by_number.get(value)
        return known.name if known else str(value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return _short_float(value, f is not None and f.cpp_type == FieldDescriptor.CPPTYPE_FLOAT)
    return f'"{value}"' if isinstance(value, str) else str(value)


def _short_float(value: float, single: bool) -> str:
    """The shortest spelling that reads back as the same float (32-bit for float fields), as protobuf writes it."""
    if not single or value != value or value in (float("inf"), float("-inf")):
        return repr(value).removesuffix(".0")
    for digits in range(6, 10):
        text = f"{value:.{digits}g}"
        if struct.pack("<f", float(text)) == struct.pack("<f", value):
            return text
    return repr(value)


def combined(findings: list[Finding]) -> StrategyError:
    """One error for several findings: located at the first, every other one on its own line after it."""
    first = findings[0].error
    if len(findings) == 1:
        return first
    rest = "\n".join(str(f.error) for f in findings[1:])
    return StrategyError(f"{first.message}\n{rest}", source=first.source, line=first.line, column=first.column,
                         field=first.field)


def effective(msg: Message, paths: list[str]) -> Message:
    """A copy of `msg` with the fields at `paths` cleared (what policy "warn" resolves instead)."""
    if not paths:
        return msg
    copy = type(msg)()
    copy.CopyFrom(msg)
    for path in paths:
        owner: Any = copy
        *parents, leaf = path.split(".")
        for part in parents:
            name, _, index = part.partition("[")
            owner = getattr(owner, name)
            if index:
                owner = owner[int(index.rstrip("]"))]
        owner.ClearField(leaf)
    return copy


# Where each field of a loaded message came from, so resolve (which gets only the message) can point at
# the line. Protobuf messages take no weak references: keep the last few, by identity, with the message.
_REMEMBERED: OrderedDict[int, tuple[Message, dict[str, Location], str | None]] = OrderedDict()
_REMEMBER_AT_MOST = 64


def remember(msg: Message, positions: dict[str, Location], source: str | None) -> None:
    _REMEMBERED[id(msg)] = (msg, positions, source)
    _REMEMBERED.move_to_end(id(msg))
    while len(_REMEMBERED) > _REMEMBER_AT_MOST:
        _REMEMBERED.popitem(last=False)


def recall(msg: Message) -> tuple[dict[str, Location], str | None]:
    """The positions and source `msg` was loaded with; empty when it was built in code (or long ago)."""
    entry = _REMEMBERED.get(id(msg))
    if entry is None or entry[0] is not msg:
        return {}, None
    return entry[1], entry[2]


assert set(STATUS_NAMES) == set(Support.values()), "every Support value needs a name"
