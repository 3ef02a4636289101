"""The text format read straight into a message: one statement a line, as protobuf and Paddle write it.

The line pattern and literals are `literals`'; there is no tree and no location but each field's line;
anything else, and every error, is the located reader's (see `direct`).
"""

from __future__ import annotations

from google.protobuf.message import Message

from ..direct import Checks, GiveUp, Slot, assign, fields
from ...errors import Location
from ..limits import MAX_DEPTH, MAX_NODES, MAX_NUMBER_CHARS
from .literals import BOOLS as _BOOLS
from .literals import LINES, LONGEST_LINE, NONE, line_value

__all__ = ["fill"]


def fill(msg: Message, text: str, source: str) -> tuple[dict[str, Location], list[tuple[str, str]]] | None:
    """Fill `msg` from `text`, checking the rules as it goes; returns where each field was set (as the builder
    records it: at its name) and the broken `requires` rules (`Checks`). None (msg then half filled: discard it)
    when the located reader must read it."""
    lines = _lines(text)
    if lines is None:
        return None
    positions: dict[str, Location] = {}  # also what each message has set so far: its fields' paths
    checks = Checks()
    try:
        return (positions, checks.broken()) if _read(msg, lines, source, positions, checks) else None
    except GiveUp:
        return None


def _lines(text: str) -> list[tuple[str, ...]] | None:
    """Each line's parts (`LINES`' groups, "" for a part it lacks), or None when a line is not one plain statement."""
    if len(text) >= MAX_NODES:  # fewer characters than the node limit: never too many values
        return None
    if len(text) > LONGEST_LINE and max(map(len, text.split("\n"))) > LONGEST_LINE:
        return None  # the located reader reads long lines token by token
    lines = LINES.findall(text)  # a tuple of strings a line, while every line is one
    return lines if len(lines) == text.count("\n") + 1 else None


def _read(msg: Message, lines: list[tuple[str, ...]], source: str, positions: dict[str, Location],
          checks: Checks) -> bool:
    """Set each line's field in `msg` (one loop for the whole document: it is the load path), recording where;
    False where the located reader must read it."""
    names = fields(msg.DESCRIPTOR, False)
    prefix = ""
    stack: list[tuple[Message, dict[str, Slot], str]] = []
    for number, (indent, name, raw, opened, bare_open, closed) in enumerate(lines, 1):
        if not name:
            if closed:
                if not stack:
                    return False
                msg, names, prefix = stack.pop()
            continue  # else blank, or a comment
        slot = names.get(name)
        path = prefix + name
        if slot is None or (path in positions and not slot.repeated):
            return False  # unknown, or set twice: the located reader says so
        where = positions[path] = _new(Location, (source, number, len(indent) + 1))
        if slot.repeated:
            path = f"{path}[{len(getattr(msg, name))}]"
            positions[path] = where
        if opened or bare_open:
            if slot.message is None or len(stack) >= MAX_DEPTH:
                return False
            if slot.checked:
                checks.seen(msg, slot, prefix)
            stack.append((msg, names, prefix))
            child = getattr(msg, name)
            if slot.repeated:
                msg = child.add()
            else:
                child.SetInParent()
                msg = child
            names, prefix = fields(slot.message, False), path + "."
            continue
        value: object
        if raw in _BOOLS:
            value = _BOOLS[raw]
        elif raw.isdigit() and (raw[0] != "0" or len(raw) == 1) and len(raw) <= MAX_NUMBER_CHARS:
            value = int(raw)  # the common cases, as line_value reads them
        else:
            value = line_value(raw)
        if value is NONE or slot.message is not None:
            return False
        if value.__class__ is bool and slot.plain is bool and not slot.repeated:
            setattr(msg, name, value)  # a flag: what assign does with it, without the call
        else:
            assign(msg, slot, value, True)
        if slot.checked:
            checks.seen(msg, slot, prefix)
    return not stack


_new = tuple.__new__
