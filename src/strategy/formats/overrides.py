"""`a.b.c=value` overrides (the `--set` flag), typed by the schema and merged after the file.

A repeated field takes a list, `a.b=["x", "y"]` (a bare value is a one-item list), replacing the file's items.
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from .. import schema
from .builder import Positions, build
from ..errors import Location, StrategyError
from .tree import Ident, Mapping, Node, Scalar, Sequence

__all__ = ["apply"]

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def apply(msg: Message, overrides: Iterable[str], *, policy: str, errors: list[StrategyError] | None = None) -> Positions:
    """Apply each override in order; returns the location (the override text) of each field set.

    With `errors`, a bad override is recorded there and the next one is still applied.
    """
    positions: Positions = {}
    if isinstance(overrides, str):
        overrides = (overrides,)
    for text in overrides:
        try:
            positions.update(_apply_one(msg, text, policy, errors))
        except StrategyError as e:
            if errors is None:
                raise
            errors.append(e)
    return positions


def _apply_one(msg: Message, text: str, policy: str, errors: list[StrategyError] | None) -> Positions:
    """One `path=value` override merged into `msg`."""
    where = Location(f"--set {text}")
    path, sep, raw = text.partition("=")
    path = path.strip()
    if not sep or not path:
        raise StrategyError.at(where, "an override reads path.to.field=value, e.g. hybrid_configs.mp_degree=2")
    try:
        chain = schema.field_by_path(path)
    except KeyError as e:
        raise StrategyError.at(where, f"unknown field: {e.args[0]}", field=path) from None
    leaf, raw = chain[-1], raw.strip()
    node: Node
    if leaf.is_repeated:
        if leaf.message_type is not None:
            raise StrategyError.at(where, f"{path} is a list of {leaf.message_type.name} messages; --set takes values "
                                          "only: write them in the strategy file", field=path)
        items = _items(raw, path, where) if raw.startswith("[") else [raw]
        node = Sequence(tuple(Scalar(_typed(leaf, item), where) for item in items), where)
        _owner(msg, chain).ClearField(leaf.name)  # the override replaces the file's items
    else:
        node = Scalar(_typed(leaf, raw), where)
    for field in reversed(chain):
        node = Mapping(((field.name, where, node),), where)
    return build(msg, node, policy=policy, errors=errors)


def _items(raw: str, path: str, where: Location) -> list[str]:
    """The items of `[a, "b, c", 3]`, each as written (quotes kept, so `_typed` reads them as strings)."""
    if not raw.endswith("]"):
        raise StrategyError.at(where, f'{path} takes a list written [a, b] (quote items with commas: ["a,b"]); '
                                      f"got {raw}", field=path)
    items: list[str] = []
    current, quote = "", ""
    for char in raw[1:-1]:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == ",":
            items.append(current.strip())
            current = ""
            continue
        current += char
    if quote:
        raise StrategyError.at(where, f"{path}: a quote ({quote}) is not closed in {raw}", field=path)
    items.append(current.strip())
    if items == [""]:
        return []  # [] clears the field
    if "" in items:
        raise StrategyError.at(where, f"{path}: an empty item in {raw}; quote an empty string (\"\")", field=path)
    return items


def _owner(msg: Message, chain: list[FieldDescriptor]) -> Message:
    """The message holding the last field of `chain` (created on the way, as setting it would)."""
    for field in chain[:-1]:
        msg = getattr(msg, field.name)
    return msg


def _typed(field: FieldDescriptor, raw: str) -> object:
    """The override's text as the field's type; left as text when it does not parse, so the builder explains."""
    cpp = field.cpp_type
    if cpp == FieldDescriptor.CPPTYPE_BOOL:
        lowered = raw.lower()
        return True if lowered in _TRUE else False if lowered in _FALSE else raw
    if cpp == FieldDescriptor.CPPTYPE_ENUM:
        return Ident(raw)
    if cpp == FieldDescriptor.CPPTYPE_STRING:
        quoted = len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'"
        return raw[1:-1] if quoted else raw
    if cpp in (FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE):
        try:
            return float(raw)
        except ValueError:
            return raw
    if cpp != FieldDescriptor.CPPTYPE_MESSAGE:
        try:
            return int(raw, 0)
        except ValueError:
            return raw
    return raw
