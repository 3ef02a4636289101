"""YAML read straight into a message, for the block style `strategy.dump` and people write: one `key: value`,
`key:` (a block follows), `- value` or `- key: value` (a message in a list) a line, plain or simply quoted
scalars, `{}` and `[]`.

Plain scalars are typed by PyYAML's own implicit resolvers (YAML 1.1: `on` is true, `010` is octal); anything
else (flow collections, anchors, tags, block scalars, multi-line values, tabs, non-ASCII text) and every error is
the located reader's (`located`, see `..direct`).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import yaml
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from ..direct import Checks, GiveUp, Slot, assign, fields
from ...errors import Location
from ..limits import MAX_NODES, MAX_NUMBER_CHARS

__all__ = ["fill"]

# A line without its indentation: a key with or without its value, or a sequence item (its dash, then a scalar or a
# key and its value); then a comment or nothing.
_VALUE = r"""\{\}|\[\]|'[ -&(-~]*'|"[ !#-\[\]-~]*"|(?:[A-Za-z0-9_.+~]|-(?=[0-9]))[A-Za-z0-9_.+\-]*"""
_KEY = r"([A-Za-z_][A-Za-z0-9_]*):(?:[ ]+(" + _VALUE + r"))?"  # a key, its value
_END = r"(?:[ ]++#.*|[ ]*+)$"
# Every line at once (findall: one tuple a line, when each line is one): its indent, then a comment or nothing, or
# an item (its dash, then a scalar or a key and its value), or a key and its value. Space runs are possessive, so a
# line that fails fails without backtracking over them.
_LINES = re.compile(r"^([ ]*+)(?:#.*$|(-[ ]++)(?:(" + _VALUE + r")|" + _KEY + r")" + _END + "|" + _KEY + _END + "|$)",
                    re.MULTILINE)
_BOOLS = {w: True for w in ("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")}
_BOOLS.update({w: False for w in ("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")})
_NULLS = {"~", "null", "Null", "NULL"}
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?[0-9]+\.[0-9]+(?:[eE][-+][0-9]+)?")
_EMPTY: dict[str, Any] = {"{}": (), "[]": []}
_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER = yaml.resolver.Resolver()  # the safe loader's


def _plain(word: str) -> Any:
    """A plain scalar's value as PyYAML's safe loader types it (None for null); GiveUp for what it types otherwise."""
    if word in _BOOLS:
        return _BOOLS[word]
    if word in _NULLS:
        return None
    head = word[0]
    if head.isalpha() or head == "_":
        return word  # no implicit type starts with a letter but bools and nulls
    if _INT.fullmatch(word):
        if len(word) > MAX_NUMBER_CHARS:
            raise GiveUp  # int() of thousands of digits is refused: the located reader names the place
        return int(word)
    if _FLOAT.fullmatch(word):
        return float(word)
    if _RESOLVER.resolve(yaml.ScalarNode, word, (True, False)) == _STR_TAG:
        return word  # "1F1B"
    raise GiveUp  # octal, sexagesimal, .inf, timestamps ...: the located reader constructs them


def _scalar(raw: str) -> Any:
    head = raw[0]
    if head in "'\"":
        return raw[1:-1]
    if raw in _EMPTY:
        return _EMPTY[raw]
    return _plain(raw)


@functools.cache
def _names(desc: Descriptor) -> dict[str, Slot]:
    """The keys that name `desc`'s fields in YAML: as JSON's, less any that YAML reads as a bool or null (`on`)."""
    return {key: slot for key, slot in fields(desc, True).items() if key not in _BOOLS and key not in _NULLS}


class _Level:
    """One open block: a mapping (a message's fields) or a sequence (a repeated field's items)."""

    __slots__ = ("indent", "msg", "names", "path", "slot")

    def __init__(self, indent: int, msg: Message, path: str, slot: Slot | None = None) -> None:
        self.indent = indent
        self.msg = msg
        self.path = path  # a mapping's prefix ("hybrid_configs."), a sequence's field path
        self.slot = slot  # a sequence's field
        self.names = _names(msg.DESCRIPTOR) if slot is None else {}


def fill(msg: Message, text: str, source: str) -> tuple[dict[str, Location], list[tuple[str, str]]] | None:
    """Fill `msg` from `text`, checking the rules as it goes; returns where each field was set (as the builder
    records it) and the broken `requires` rules (`Checks`). None (msg then half filled: discard it) when the
    located reader must read it."""
    if len(text) >= MAX_NODES or not text.isascii() or "\t" in text or "\r" in text:
        return None
    checks = Checks()
    try:
        positions = _fill(msg, text, source, checks)
        return None if positions is None else (positions, checks.broken())
    except GiveUp:
        return None


def _fill(root: Message, text: str, source: str, checks: Checks) -> dict[str, Location] | None:
    """One loop over the lines (the load path); the rarer lines (a block opening, a change of level, a sequence's
    item) are the steps below it, which raise GiveUp where the located reader must read the document."""
    lines = _LINES.findall(text)  # a tuple of strings a line ("" for a part it lacks), while every line is one
    if len(lines) != text.count("\n") + 1:
        return None  # a scalar alone on its line (a continued value), flow style, a tag ...
    levels = [_Level(0, root, "")]
    opener: tuple[Slot, int, str] | None = None  # `key:` awaiting its block: field, key's indent, path
    positions: dict[str, Location] = {}
    for number, (spaces, dash, item, item_key, item_raw, key, raw) in enumerate(lines, 1):
        if not dash:
            if not key:
                continue  # blank, or a comment
        elif not item:
            key, raw = item_key, item_raw
        indent = len(spaces)
        if opener is not None:
            _open(levels, opener, dash, indent)
            opener = None
        level = levels[-1]
        if indent != level.indent or (not dash) != (level.slot is None):
            level = _enclosing(levels, indent, dash)
        if level.slot is not None:
            indent += len(dash)
            opened = _item(levels, level, level.slot, item, indent, _new(Location, (source, number, indent + 1)),
                           positions, checks)
            if opened is None:
                continue
            level = opened
        named = level.names.get(key)
        if named is None:
            return None  # unknown, or a key YAML reads as a bool or null
        path = level.path + named.name
        if path in positions:
            return None  # set twice (by its name and its JSON name, say): the located reader says so
        where = positions[path] = _new(Location, (source, number, indent + 1))
        if not raw:
            opener = (named, indent, path)
            continue
        value: Any
        if raw in _BOOLS:
            value = _BOOLS[raw]
        elif raw.isdigit() and (raw[0] != "0" or len(raw) == 1) and len(raw) <= MAX_NUMBER_CHARS:
            value = int(raw)  # the common cases, as _scalar reads them
        else:
            value = _scalar(raw)
        if value is None:
            continue  # null: not set
        if named.message is None and not named.repeated:
            assign(level.msg, named, value, False)  # the common case
        else:
            _set(level.msg, named, value, path, where, positions)
        if named.checked:
            checks.seen(level.msg, named, level.path)
    return positions if positions and opener is None else None


def _open(levels: list[_Level], opener: tuple[Slot, int, str], dash: str, indent: int) -> None:
    """The block a `key:` line opens, as the next line shows it: a sequence (indented or not) or a message."""
    slot, at, path = opener
    parent = levels[-1]
    if dash and indent >= at and slot.repeated:
        levels.append(_Level(indent, parent.msg, path, slot))  # a sequence, indented or not
    elif not dash and indent > at and slot.message is not None and not slot.repeated:
        child = getattr(parent.msg, slot.name)
        child.SetInParent()
        levels.append(_Level(indent, child, path + "."))
    else:
        raise GiveUp  # a null value, or a block the field cannot take: the located reader says which


def _enclosing(levels: list[_Level], indent: int, dash: str) -> _Level:
    """The level a line at another indent (or of another kind) belongs to, the levels it closes popped."""
    while indent < levels[-1].indent or (not dash and levels[-1].slot is not None and indent == levels[-1].indent):
        levels.pop()  # dedented; or a key after a sequence written at its key's indent
    level = levels[-1]
    if indent != level.indent or (not dash) != (level.slot is None):
        raise GiveUp  # not a level's indent; an item where a key belongs, or a key where an item does
    return level


def _item(levels: list[_Level], level: _Level, slot: Slot, item: str, indent: int, where: Location,
          positions: dict[str, Location], checks: Checks) -> _Level | None:
    """A sequence's `- ...` line: its scalar item set (None), or the message it opens, whose first field is on this
    line (its level, pushed)."""
    target = getattr(level.msg, slot.name)
    here = f"{level.path}[{len(target)}]"
    positions[here] = where
    if slot.checked:
        checks.seen(level.msg, slot, "")  # a list: checked once read
    if item:
        if slot.message is None:
            assign(level.msg, slot, _scalar(item), False)
        elif _scalar(item) == ():
            target.add()  # - {}
        else:
            raise GiveUp
        return None
    if slot.message is None:
        raise GiveUp
    opened = _Level(indent, target.add(), here + ".")  # - key: ...: a message, its first field on this line
    levels.append(opened)
    return opened


def _set(msg: Message, slot: Slot, value: Any, path: str, where: Location, positions: dict[str, Location]) -> None:
    """One `key: value` line's value, as the builder sets a mapping's value (a lone value of a repeated field is
    its one item, at the key; `{}` an empty message)."""
    if slot.repeated and type(value) is not list:
        positions[f"{path}[{len(getattr(msg, slot.name))}]"] = where
    if slot.message is not None:
        if value != ():
            raise GiveUp
        child = getattr(msg, slot.name)
        if slot.repeated:
            child.add()
        else:
            child.SetInParent()
        return
    if slot.repeated:
        for item in value if type(value) is list else (value,):
            assign(msg, slot, item, False)
        return
    assign(msg, slot, value, False)


_new = tuple.__new__
