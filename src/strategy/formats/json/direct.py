"""JSON read straight into a message by the standard library's C decoder.

Objects come back as tuples of (key, value) pairs, so a repeated key is seen; the located reader (`json.located`)
takes over for anything it would read differently or refuse: a repeated or unknown name, NaN and Infinity (not
JSON), an over-long number, a value of the wrong type (see `direct`). Positions are found only when asked
(`json.positions`).
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf.message import Message

from ..direct import Checks, GiveUp, Positions, assign, fields
from .positions import locate, location_of
from ..limits import MAX_NODES, MAX_NUMBER_CHARS

__all__ = ["fill"]

_WIDEST_INT = 2**64  # wider integers fit no integer field; the located reader decides what a float field does


def _float(literal: str) -> float:
    if len(literal) > MAX_NUMBER_CHARS:
        raise GiveUp  # the located reader's error
    return float(literal)


def _constant(name: str) -> Any:
    raise GiveUp  # NaN, Infinity: Python's extension to JSON, which json.located refuses


_decode = json.JSONDecoder(object_pairs_hook=tuple, parse_float=_float, parse_constant=_constant).decode


def fill(msg: Message, text: str, source: str) -> tuple[Positions, list[tuple[str, str]]] | None:
    """Fill `msg` from `text`, checking the rules as it goes; returns where each field was set (found when first
    asked) and the broken `requires` rules (`Checks`). None (msg then half filled: discard it) when the located
    reader must read it."""
    if len(text) >= MAX_NODES:  # fewer characters than the node limit: never too many values
        return None
    checks = Checks()
    try:
        document = _decode(text)
        if type(document) is not tuple:
            return None  # null, a list, a scalar: the located reader's
        _fill(msg, document, "", checks)
        broken = checks.broken()
    except (GiveUp, ValueError, RecursionError):  # json.JSONDecodeError is a ValueError
        return None
    return Positions(lambda: locate(text, msg.DESCRIPTOR, document), location_of(text, source)), broken


def _fill(msg: Message, pairs: tuple[tuple[str, Any], ...], prefix: str, checks: Checks) -> None:
    names = fields(msg.DESCRIPTOR, True)
    seen: set[str] = set()
    for key, value in pairs:
        slot = names.get(key)
        if slot is None or slot.name in seen:
            raise GiveUp
        seen.add(slot.name)
        if value is None:
            continue  # null: not set, as protobuf's JSON mapping reads it
        if slot.repeated:
            items = value if type(value) is list else (value,)
            if slot.message is not None:
                target = getattr(msg, slot.name)
                for item in items:
                    if type(item) is not tuple:
                        raise GiveUp
                    here = f"{prefix}{slot.name}[{len(target)}]."
                    _fill(target.add(), item, here, checks)
            else:
                for item in items:
                    if type(item) is int and not -_WIDEST_INT < item < _WIDEST_INT:
                        raise GiveUp
                    assign(msg, slot, item, False)
        elif slot.message is not None:
            if type(value) is not tuple:
                raise GiveUp
            child = getattr(msg, slot.name)
            _fill(child, value, f"{prefix}{slot.name}.", checks)
            child.SetInParent()
        elif type(value) is int and not -_WIDEST_INT < value < _WIDEST_INT:
            raise GiveUp
        else:
            assign(msg, slot, value, False)
        if slot.checked:
            checks.seen(msg, slot, prefix)
