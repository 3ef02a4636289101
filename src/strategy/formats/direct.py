"""Filling a message straight from a plain document: what every text format tries first.

The located readers (`text.located`, `json.located`, `yaml.located`, then the builder) record where each field came from and own
every error message; most of their time goes into those locations. A direct reader fills the message without
them and gives up (`GiveUp`) on anything it is not sure the located reader reads the same way: an unknown or
repeated name, a value of the wrong type or breaking its rule, anything outside its format's plain subset. The
caller then starts over with the located reader. The text and YAML readers record locations as they read (a line
number and an indent); JSON's are found only when something asks for one (`Positions`). Values are converted by
the builder's own `scalar` and checked by the rules' own predicates (`Checks`), so both readers agree on both.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): a NamedTuple's string annotations are
# compiled at class creation, which every `strategy` command pays at start.

import functools
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, NamedTuple

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from ..schema import rules
from .builder import INT_RANGES, scalar
from ..errors import Location, StrategyError
from .tree import Scalar

__all__ = ["Checks", "GiveUp", "Positions", "Slot", "assign", "fields", "value"]


class GiveUp(Exception):
    """This document needs the located reader (it may be fine: the located reader decides)."""


class Slot(NamedTuple):
    """What a direct reader needs of one field, read from its descriptor once (descriptor attributes are slow)."""

    field: FieldDescriptor
    name: str
    repeated: bool
    message: Descriptor | None  # the type of a message field
    plain: type | None  # the Python type the builder keeps as it is (bool, int, str, float); None: always convert
    low: Any  # an int field's range
    high: Any
    rule: Any  # the field's value rule (rules.value_rule), None when it has none
    checked: bool  # has a rule, or is a message list whose items must set a field: tell `Checks.seen`


@functools.cache
def fields(desc: Descriptor, json_names: bool) -> dict[str, Slot]:
    """The names a document may give `desc`'s fields: proto names, and with `json_names` lowerCamelCase names too,
    resolved as the builder resolves them (a proto name first, else the first field with that JSON name)."""
    slots = {f.name: _slot(f) for f in desc.fields}
    out: dict[str, Slot] = {}
    if json_names:
        for f in desc.fields:
            out.setdefault(f.json_name, slots[f.name])
    out.update(slots)
    return out


def _slot(f: FieldDescriptor) -> Slot:
    cpp = f.cpp_type
    plain: type | None = None
    low = high = None
    if cpp == FieldDescriptor.CPPTYPE_BOOL:
        plain = bool
    elif cpp in INT_RANGES:
        plain, (low, high) = int, INT_RANGES[cpp]
    elif cpp == FieldDescriptor.CPPTYPE_STRING:
        plain = str
    elif cpp in (FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE):
        plain = float
    rule = rules.value_rule(f)
    must = f.message_type is not None and f.is_repeated and bool(rules.must_set(f.message_type))
    return Slot(f, f.name, bool(f.is_repeated), f.message_type, plain, low, high, rule, rule is not None or must)


_new = tuple.__new__


def value(field: FieldDescriptor, raw: Any, text: bool) -> Any:
    """`raw` converted for `field` exactly as the builder converts it; GiveUp where the builder would refuse it."""
    try:
        return scalar(field, _new(Scalar, (raw, None)), "", text)
    except StrategyError:
        raise GiveUp from None


def assign(msg: Message, slot: Slot, raw: Any, text: bool) -> None:
    """Set (or, for a repeated field, append) one scalar value: as it is when the builder keeps it as it is (a bool
    for a bool field, an int in range for an int field, ASCII text for a string, a float for a float field), else
    converted by the builder."""
    kind = type(raw)
    if kind is not slot.plain or (kind is int and not slot.low <= raw <= slot.high) or (kind is str and not raw.isascii()):
        raw = value(slot.field, raw, text)
    try:
        if slot.repeated:
            getattr(msg, slot.name).append(raw)
        else:
            setattr(msg, slot.name, raw)
    except (TypeError, ValueError):
        raise GiveUp from None


class Checks:
    """The rules (`rules`) a direct read checks as it reads: each value's range and allowed values as it is set, a
    flag's `requires`, a list's items and the fields each item of a message list must set once the whole document
    is read. A value that breaks one is a GiveUp (the located reader reports it); a broken `requires` is for
    `rules.report` (an error, or under "warn" a warning)."""

    __slots__ = ("flags", "lists")

    def __init__(self) -> None:
        self.flags: list[tuple[Message, Slot, str]] = []  # a flag set true that requires another, with its prefix
        self.lists: dict[tuple[int, str], tuple[Message, Slot]] = {}  # each repeated field to check once read

    def seen(self, msg: Message, slot: Slot, prefix: str) -> None:
        """`slot`, which has a rule or items to check, was just set (or appended to) in `msg`."""
        if slot.repeated:
            self.lists[id(msg), slot.name] = (msg, slot)
            return
        rule = slot.rule
        value = getattr(msg, slot.name)  # as stored (a float field rounds to 32 bits)
        if rules.violates(rule, value):
            raise GiveUp
        if rule.requires and value is True:
            self.flags.append((msg, slot, prefix))

    def broken(self) -> list[tuple[str, str]]:
        """(dependent path, required path) for each broken `requires` rule; GiveUp for a list that breaks its rule."""
        for msg, slot in self.lists.values():
            items = getattr(msg, slot.name)
            if slot.message is not None:
                needed = rules.must_set(slot.message)
                if any(not item.HasField(f.name) for item in items for f in needed):
                    raise GiveUp
            elif rules.items_violate(slot.rule, items):
                raise GiveUp
        return [(prefix + slot.name, prefix + slot.rule.requires) for msg, slot, prefix in self.flags
                if not getattr(msg, slot.rule.requires)]


class Positions(MutableMapping[str, Location]):
    """Where each field a document set came from, by dotted path, found when first asked (an error or a warning to
    point at, `strategy explain`), and only as far into the document as the path asked for: a directly read file
    pays for locations only then, and only for the paths asked for does an offset become a line and column.

    `locate` gives (path, offset) pairs in document order, each path once; `where` turns an offset into its
    Location. Locations set later (--set overrides) win over the document's, as in a dict.
    """

    __slots__ = ("_added", "_locate", "_rest", "_table", "_where")

    def __init__(self, locate: Callable[[], Iterator[tuple[str, int]]], where: Callable[[int], Location]) -> None:
        self._locate: Callable[[], Iterator[tuple[str, int]]] | None = locate
        self._where = where
        self._rest: Iterator[tuple[str, int]] | None = None  # what is not read yet
        self._table: dict[str, Location | int] = {}  # what is: an offset until asked for
        self._added: dict[str, Location] = {}

    def _pending(self) -> Iterator[tuple[str, int]] | None:
        if self._locate is not None:
            self._rest, self._locate = self._locate(), None
        return self._rest

    def _found(self) -> dict[str, Location | int]:
        """All of it."""
        rest = self._pending()
        if rest is not None:
            self._table.update(rest)
            self._table.update(self._added)
            self._rest = None
        return self._table

    def __getitem__(self, path: str) -> Location:
        if path in self._added:
            return self._added[path]
        table = self._table
        if path not in table and (rest := self._pending()) is not None:
            for found, offset in rest:
                table[found] = offset
                if found == path:
                    break
            else:
                self._found()
        where = table[path]
        if where.__class__ is int:
            where = table[path] = self._where(where)  # type: ignore[arg-type]
        return where  # type: ignore[return-value]

    def __iter__(self) -> Iterator[str]:
        return iter(self._found())

    def __len__(self) -> int:
        return len(self._found())

    def __setitem__(self, path: str, where: Location) -> None:
        self._added[path] = where
        self._table[path] = where

    def __delitem__(self, path: str) -> None:
        del self._found()[path]
