"""The four file formats: names, extensions, and turning text or bytes into a checked message and back."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, MutableMapping
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from .text import direct as textdirect
from .._generated.distributed_strategy_pb2 import DistributedStrategy
from .builder import build
from ..errors import Location, StrategyError

__all__ = ["EXTENSIONS", "FORMATS", "decode", "format_for", "parse", "serialize"]

FORMATS = ("prototxt", "json", "yaml", "binary")
EXTENSIONS = {
    ".prototxt": "prototxt",
    ".pbtxt": "prototxt",
    ".txtpb": "prototxt",
    ".textproto": "prototxt",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".pb": "binary",
    ".binpb": "binary",
    ".bin": "binary",
}


def check_format(format: str, source: str | None = None) -> str:
    if format not in FORMATS:
        raise StrategyError(f"unknown format {format!r}; known formats: {', '.join(FORMATS)}", source=source)
    return format


def format_for(path: str | os.PathLike[str], format: str | None = None) -> str:
    """The explicit format, else the one the file's extension names."""
    if format is not None:
        return check_format(format, os.fspath(path))
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in EXTENSIONS:
        known = " ".join(EXTENSIONS)
        what = f"unknown extension {ext!r}" if ext else "no file extension"
        raise StrategyError(f"{what}: cannot tell the format; use one of {known}, or name the format (format=, or --from/--to)", source=os.fspath(path))
    return EXTENSIONS[ext]


_BOM = b"\xef\xbb\xbf"


def decode(data: bytes, source: str) -> str:
    """UTF-8 text (a BOM is allowed); a bad byte is an error at its line and column."""
    if data[:3] == _BOM:
        data = data[3:]  # what "utf-8-sig" does, without loading that codec at every start
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[: e.start]
        line = before.count(b"\n") + 1
        column = e.start - (before.rfind(b"\n") + 1) + 1
        raise StrategyError(f"not UTF-8 text (byte 0x{data[e.start]:02x}); is this a binary file?", source=source, line=line, column=column) from None


def parse(
    data: str | bytes, format: str, *, source: str, policy: str, errors: list[StrategyError] | None = None
) -> tuple[DistributedStrategy, MutableMapping[str, Location], list[tuple[str, str]] | None]:
    """Parse one document into a message, with the location of every field it sets (for JSON read directly: found
    when first asked), and, when the document was read directly (which checks the rules as it goes: `direct.Checks`),
    its broken `requires` rules; None when the rules are still to check (`rules.check`).

    Syntax errors always raise; with `errors`, schema problems are collected there and parsing goes on.
    """
    msg = DistributedStrategy()
    if format == "binary":
        if isinstance(data, str):
            raise StrategyError("binary input must be bytes, got str", source=source)
        from . import binary  # imported on first use, as the readers below

        binary.parse(msg, data, source=source, policy=policy)
        return msg, {}, None  # the wire format has no lines
    text = decode(data, source) if isinstance(data, bytes) else data
    direct = textdirect if format == "prototxt" else importlib.import_module(_DIRECT[format], __package__)
    read = direct.fill(msg, text, source)
    if read is not None:
        return msg, read[0], read[1]
    msg = DistributedStrategy()  # the direct reader gave up half way: start over, with the located reader
    return msg, located(msg, text, format, source=source, policy=policy, errors=errors), None


# Imported on first use: the CLI starts faster when a run needs neither YAML nor JSON.
_DIRECT = {"json": ".json.direct", "yaml": ".yaml.direct"}
_LOCATED = {"prototxt": ".text.located", "json": ".json.located", "yaml": ".yaml.located"}


def located(msg: DistributedStrategy, text: str, format: str, *, source: str, policy: str,
            errors: list[StrategyError] | None = None) -> dict[str, Location]:
    """Fill `msg` from a text document with its format's located reader: every field's location, and every
    error's."""
    reader = importlib.import_module(_LOCATED[format], __package__)
    return build(msg, reader.parse(text, source), policy=policy, text=format == "prototxt", errors=errors)


def serialize(msg: DistributedStrategy, format: str) -> str | bytes:
    """The message in `format`, set fields only; binary is bytes, the rest text."""
    check_format(format)
    if format == "binary":
        return msg.SerializeToString()
    from google.protobuf import json_format, text_format
    from google.protobuf.internal import api_implementation

    if format == "prototxt":
        if api_implementation.Type() == "upb":
            # upb's printer writes floats as C++ protobuf does (1024, not 1024.0): Paddle's files, byte for byte.
            return str(msg)
        return text_format.MessageToString(msg)
    if format == "json":
        return json_format.MessageToJson(msg, preserving_proto_field_name=True, indent=2) + "\n"
    import yaml

    as_dict = to_plain_dict(msg)
    return yaml.safe_dump(as_dict, sort_keys=False, default_flow_style=False) if as_dict else "{}\n"


def to_plain_dict(msg: Message) -> dict[str, Any]:
    """The set fields as nested dicts with proto field names and Python values: protobuf's JSON mapping, with
    the numbers it writes as strings for JSON's sake (64-bit integers, "Infinity", "NaN") turned back."""
    from google.protobuf import json_format

    return _unquote(msg.DESCRIPTOR, json_format.MessageToDict(msg, preserving_proto_field_name=True))


def _unquote(desc: Descriptor, d: dict[str, Any]) -> dict[str, Any]:
    for name, value in d.items():
        f = desc.fields_by_name[name]
        if f.message_type is not None:
            for item in value if f.is_repeated else [value]:
                _unquote(f.message_type, item)
        elif f.cpp_type in _QUOTED:
            d[name] = [_QUOTED[f.cpp_type](v) for v in value] if f.is_repeated else _QUOTED[f.cpp_type](value)
    return d


_QUOTED: dict[int, Callable[[Any], Any]] = {
    FieldDescriptor.CPPTYPE_INT64: int,
    FieldDescriptor.CPPTYPE_UINT64: int,
    FieldDescriptor.CPPTYPE_FLOAT: float,
    FieldDescriptor.CPPTYPE_DOUBLE: float,
}
