"""Fill a message from a located tree, strictly: unknown keys, duplicates and wrong types are StrategyErrors.

Every field it sets is recorded with its location, so later rules can point at the line that set it.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from .. import schema
from ..errors import Location, StrategyError, warn
from .tree import Ident, Mapping, Node, Scalar, Sequence

__all__ = ["Positions", "build", "scalar"]

Positions = dict[str, Location]

INT_RANGES = {
    FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}


class _Ctx:
    """One build's settings and the positions it records (a plain class: no dataclass machinery at start-up)."""

    __slots__ = ("errors", "json_names", "policy", "positions", "text")

    def __init__(self, policy: str, *, json_names: bool, text: bool, errors: list[StrategyError] | None = None) -> None:
        self.policy = policy
        self.json_names = json_names  # JSON, YAML and dicts may also use lowerCamelCase names, as protobuf's JSON mapping does
        self.text = text  # text format repeats a repeated field's name once per element
        self.errors = errors  # collect and go on (validate reports every problem), or raise
        self.positions: Positions = {}

    def fail(self, error: StrategyError) -> None:
        if self.errors is None:
            raise error
        self.errors.append(error)


def build(
    msg: Message, node: Node, *, policy: str, text: bool = False, errors: list[StrategyError] | None = None
) -> Positions:
    """Merge `node` into `msg`; returns the location of every field it set, by dotted path.

    With `errors`, problems are appended there and the rest of the document is still checked.
    """
    ctx = _Ctx(policy, json_names=not text, text=text, errors=errors)
    if isinstance(node, Scalar) and node.value is None:
        return ctx.positions  # an empty YAML document or JSON null: nothing set
    if not isinstance(node, Mapping):
        raise StrategyError.at(node.where, f"the top level must be a mapping of fields, got {_kind(node)}")
    _fill(msg, node, "", ctx)
    return ctx.positions


@functools.cache
def _fields_by_name(desc: Descriptor) -> dict[str, FieldDescriptor]:
    return dict(desc.fields_by_name)


def _fill(msg: Message, node: Mapping, prefix: str, ctx: _Ctx) -> None:
    desc = msg.DESCRIPTOR
    fields = _fields_by_name(desc)
    seen: dict[str, Location] = {}
    for key, where, value in node.items:
        field = fields.get(key)
        if field is None and ctx.json_names:
            field = next((f for f in desc.fields if f.json_name == key), None)
        path = prefix + (field.name if field else key)
        if field is None:
            names = [f.name for f in desc.fields]
            text = f"unknown field {prefix}{key}" + schema.did_you_mean(key, names)
            if ctx.policy == "strict":
                ctx.fail(StrategyError.at(where, text, field=path))
            else:
                warn(where, text + " (ignored under policy 'warn')", stacklevel=6)
            continue
        if field.name in seen and not (ctx.text and field.is_repeated):
            first = seen[field.name]
            at = f" (first set at line {first.line})" if first.line else ""
            ctx.fail(StrategyError.at(where, f"{path} is set twice{at}; keep one", field=path))
            continue
        seen[field.name] = where
        ctx.positions[path] = where
        try:
            _set(msg, field, value, path, ctx, where)
        except StrategyError as e:
            ctx.fail(e)


def _set(msg: Message, field: FieldDescriptor, node: Node, path: str, ctx: _Ctx, key_where: Location | None = None) -> None:
    if isinstance(node, Scalar) and node.value is None:
        return  # null means "not set", as in protobuf's JSON mapping
    if field.is_repeated:
        items = node.items if isinstance(node, Sequence) else (node,)
        target = getattr(msg, field.name)
        for item in items:
            where = f"{path}[{len(target)}]"
            # Text format repeats the field name per element: point there, not inside the braces.
            ctx.positions[where] = key_where if key_where is not None and not isinstance(node, Sequence) else item.where
            if schema.is_message(field):
                _fill(target.add(), _expect_mapping(item, where), where + ".", ctx)
            else:
                target.append(scalar(field, item, path, ctx.text))
        return
    if isinstance(node, Sequence):
        raise StrategyError.at(node.where, f"{path} takes a single value, got a list", field=path)
    if field.message_type is not None:
        _fill(getattr(msg, field.name), _expect_mapping(node, path), path + ".", ctx)
        getattr(msg, field.name).SetInParent()
    else:
        setattr(msg, field.name, scalar(field, node, path, ctx.text))


def _expect_mapping(node: Node, path: str) -> Mapping:
    if not isinstance(node, Mapping):
        raise StrategyError.at(node.where, f"{path} is a message: expected a mapping of its fields, got {_kind(node)}", field=path)
    return node


def _kind(node: Node) -> str:
    if isinstance(node, Mapping):
        return "a mapping"
    if isinstance(node, Sequence):
        return "a list"
    return _describe(node.value)


def _describe(value: Any) -> str:
    if isinstance(value, Ident):
        return f"the bare word {value.name}"
    if isinstance(value, bool):
        return f"the bool {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    return type(value).__name__


def scalar(field: FieldDescriptor, node: Node, path: str, text: bool = False) -> Any:
    """The node's value for `field`; `text` applies the text format's stricter and wider literal rules."""
    if not isinstance(node, Scalar):
        raise StrategyError.at(node.where, f"{path} expects {_expected(field)}, got {_kind(node)}", field=path)
    value = node.value
    cpp = field.cpp_type
    kind = type(value)
    if kind is bool and cpp == _BOOL:
        return value  # the common cases first
    if kind is str and cpp == _STRING:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise StrategyError.at(node.where, f"{path} is not valid UTF-8 text", field=path) from None
        return value
    if text and kind is int and cpp == _BOOL and value in (0, 1):
        return bool(value)  # the text format spells bools 0 and 1 too
    if text and kind is float and cpp in INT_RANGES and not (value == 0 and str(value) == "-0.0"):
        raise StrategyError.at(node.where, f"{path} expects an integer, got the number {value!r}", field=path)
    if kind is int and cpp in INT_RANGES:
        low, high = INT_RANGES[cpp]
        if not low <= value <= high:
            raise StrategyError.at(node.where, f"{path} = {value} is out of range [{low}, {high}]", field=path)
        return value
    if not text and kind is str and cpp in _QUOTED_IN_JSON:
        value = _json_number(value)  # protobuf's JSON mapping quotes 64-bit integers and spells "Infinity"
    ok: Any = _MISSING
    if cpp == FieldDescriptor.CPPTYPE_BOOL and isinstance(value, bool):
        ok = value
    elif cpp in INT_RANGES and isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**64:
            value = int(value)
        if isinstance(value, int):
            low, high = INT_RANGES[cpp]
            if not low <= value <= high:
                raise StrategyError.at(node.where, f"{path} = {value} is out of range [{low}, {high}]", field=path)
            ok = value
    elif cpp in (FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE) and isinstance(value, (int, float)):
        try:
            ok = float(value) if not isinstance(value, bool) else _MISSING
        except OverflowError:
            shown = str(value) if len(str(value)) <= 24 else f"{str(value)[:24]}... ({len(str(value))} digits)"
            raise StrategyError.at(node.where, f"{path} = {shown} is out of range for a floating-point number", field=path) from None
    elif cpp == FieldDescriptor.CPPTYPE_STRING and isinstance(value, str):
        ok = value
    elif cpp == FieldDescriptor.CPPTYPE_ENUM and not (text and kind is str):  # text format names values bare
        name = value.name if isinstance(value, Ident) else value
        enum = field.enum_type
        if isinstance(name, str) and name in enum.values_by_name:
            ok = enum.values_by_name[name].number
        elif kind is int and value in enum.values_by_number:
            ok = value  # the number of a known value, as protobuf's readers accept
    if ok is _MISSING:
        raise StrategyError.at(node.where, f"{path} expects {_expected(field)}, got {_describe(value)}{_hint(field, value)}",
                               field=path)
    return ok


def _hint(field: FieldDescriptor, value: Any) -> str:
    """What a word was meant as: the bool or enum value it misspells (`flase`, a quoted "false", `colwise`: bare, as
    every format but a string spells them), or a quoted string when it is a bare word given to a string field."""
    word = value.name if isinstance(value, Ident) else value
    if not isinstance(word, str):
        return ""
    if field.cpp_type == _BOOL:
        close = schema.closest(word, ["true", "false"])
    elif field.cpp_type == FieldDescriptor.CPPTYPE_ENUM:
        close = schema.closest(word, [v.name for v in field.enum_type.values])
    else:
        return " (quote strings)" if isinstance(value, Ident) and field.cpp_type == _STRING else ""
    return f"; did you mean {close}?" if close else ""


_MISSING = object()
_QUOTED_IN_JSON = {
    FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64, FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE
}
_JSON_FLOATS = {"Infinity": float("inf"), "-Infinity": float("-inf"), "NaN": float("nan")}
_JSON_INT = re.compile(r"-?(0|[1-9][0-9]*)")
_JSON_FLOAT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _json_number(text: str) -> Any:
    """A number protobuf's JSON mapping wrote (or YAML 1.1 left) as a string, or `text` unchanged when it is none."""
    if text in _JSON_FLOATS:
        return _JSON_FLOATS[text]
    if len(text) <= 40 and _JSON_INT.fullmatch(text):
        return int(text)
    if len(text) <= 40 and _JSON_FLOAT.fullmatch(text):
        return float(text)  # only reaches float fields: an integer field then says it wants an integer
    return text
_BOOL = FieldDescriptor.CPPTYPE_BOOL
_STRING = FieldDescriptor.CPPTYPE_STRING


def _expected(field: FieldDescriptor) -> str:
    cpp = field.cpp_type
    if cpp == FieldDescriptor.CPPTYPE_BOOL:
        return "true or false"
    if cpp in INT_RANGES:
        return "an integer"
    if cpp in (FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE):
        return "a number"
    if cpp == FieldDescriptor.CPPTYPE_ENUM:
        return "one of " + ", ".join(v.name for v in field.enum_type.values)
    if cpp == FieldDescriptor.CPPTYPE_MESSAGE:
        return "a mapping of fields"
    return "a quoted string"
