"""A JSON Schema (draft 2020-12) for strategy files, generated from the proto descriptors.

Editors use it to complete and check YAML/JSON strategy files: types, ranges, allowed values, defaults,
the field comments as descriptions, `requires` rules as if/then, and no unknown keys.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from . import descriptors as schema

__all__ = ["json_schema"]

_INT_BOUNDS = {
    FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}


def _field(field: FieldDescriptor) -> dict[str, Any]:
    out: dict[str, Any] = {"description": schema.doc(field)}
    cpp = field.cpp_type
    if cpp == FieldDescriptor.CPPTYPE_MESSAGE:
        out["$ref"] = f"#/$defs/{field.message_type.name}"
        return out
    if cpp == FieldDescriptor.CPPTYPE_BOOL:
        out["type"] = "boolean"
    elif cpp in _INT_BOUNDS:
        low, high = _INT_BOUNDS[cpp]
        minimum, infer = schema.option(field, "min_value"), schema.option(field, "infer_value")
        maximum = schema.option(field, "max_value")
        out.update(type="integer", minimum=low if minimum is None else minimum, maximum=high if maximum is None else maximum)
        if infer is not None:
            out = {"description": out["description"], "anyOf": [{"const": infer}, {k: v for k, v in out.items() if k != "description"}]}
        if cpp in (FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64):  # protobuf's JSON quotes them
            out = {"description": out["description"], "anyOf": [{k: v for k, v in out.items() if k != "description"},
                                                                 {"type": "string", "pattern": "^-?[0-9]+$"}]}
    elif cpp in (FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE):
        out["anyOf"] = [{"type": "number"}, {"enum": ["Infinity", "-Infinity", "NaN"]}]
    elif cpp == FieldDescriptor.CPPTYPE_ENUM:
        out["enum"] = [v.name for v in field.enum_type.values]
    else:
        out["type"] = "string"
        if schema.option(field, "allowed"):
            out["enum"] = list(schema.option(field, "allowed"))
    if field.has_default_value or cpp != FieldDescriptor.CPPTYPE_STRING:
        out["default"] = field.default_value
    return out


def _array(field: FieldDescriptor) -> dict[str, Any]:
    out = {"type": "array", "items": _field(field)}
    return {**out, "uniqueItems": True} if schema.option(field, "distinct") else out


def _message(desc: Descriptor) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {f.name: _field(f) if not f.is_repeated else _array(f) for f in desc.fields},
    }
    rules = []
    for f in desc.fields:
        needed = schema.option(f, "requires")
        if needed:
            rules.append({
                "if": {"properties": {f.name: {"const": True}}, "required": [f.name]},
                "then": {"properties": {needed: {"const": True}}, "required": [needed]},
            })
    if rules:
        out["allOf"] = rules
    return out


def _messages(desc: Descriptor, found: dict[str, Descriptor]) -> dict[str, Descriptor]:
    for f in desc.fields:
        if f.message_type is not None and f.message_type.name not in found:
            found[f.message_type.name] = f.message_type
            _messages(f.message_type, found)
    return found


def json_schema() -> dict[str, Any]:
    """The schema of a DistributedStrategy document with proto field names."""
    root = _message(schema.ROOT)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://distributed-strategy.dev/schema/distributed_strategy.json",
        "title": schema.ROOT.name,
        "description": "A distributed training strategy (PaddlePaddle fleet compatible). Generated from proto/distributed_strategy.proto.",
        **root,
        "$defs": {name: _message(desc) for name, desc in _messages(schema.ROOT, {}).items()},
    }
