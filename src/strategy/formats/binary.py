"""Binary (wire format) reading: protobuf parses, this rejects garbage and unknown field numbers."""

from __future__ import annotations

from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from .. import schema
from ..errors import Location, StrategyError, warn

__all__ = ["parse"]

_WIRE_TYPES = {0: "varint", 1: "64-bit", 2: "length-delimited", 3: "group", 4: "group end", 5: "32-bit"}


def parse(msg: Message, data: bytes, *, source: str, policy: str) -> None:
    """Merge wire bytes into `msg`; unknown fields are an error (strict) or dropped with a warning (warn)."""
    try:
        msg.MergeFromString(data)
    except (DecodeError, RecursionError) as e:
        raise StrategyError(
            f"not a binary DistributedStrategy ({e or 'truncated or corrupt'}); "
            "pass format= if the file is in another format",
            source=source,
        ) from None
    size = msg.ByteSize()
    msg.DiscardUnknownFields()
    if msg.ByteSize() == size:
        return  # nothing unknown (unknown fields count in the size): the common case, without walking the message
    probe = type(msg)()
    probe.MergeFromString(data)
    unknown = _unknown(probe, "")
    for path, number, wire_type in unknown:
        where = f"in {path}" if path else "at the top level"
        text = (
            f"unknown field number {number} ({_WIRE_TYPES.get(wire_type, wire_type)}) {where}: "
            "written by another schema, or a field with the wrong type"
        )
        if policy == "strict":
            raise StrategyError.at(Location(source), text + "; policy 'warn' drops it", field=path or None)
        warn(Location(source), text + "; dropped (policy 'warn')", stacklevel=5)


def _unknown(msg: Message, path: str) -> list[tuple[str, int, int]]:
    found = [(path, f.field_number, f.wire_type) for f in UnknownFieldSet(msg)]
    for field, value in msg.ListFields():
        if not schema.is_message(field):
            continue
        where = f"{path}.{field.name}" if path else field.name
        if schema.is_repeated(field):
            for k, item in enumerate(value):
                found += _unknown(item, f"{where}[{k}]")
        else:
            found += _unknown(value, where)
    return found
