"""A parsed document before it meets the schema: values with the place each came from.

The JSON, YAML and text-format readers and `from_dict` all produce this, so one builder checks them all.
NamedTuples keep parsing cheap; `isinstance` still tells the node kinds apart.
"""

from __future__ import annotations

from collections.abc import Mapping as AbcMapping
from typing import Any, NamedTuple, Union

from ..errors import Location, StrategyError
from .limits import MAX_DEPTH

__all__ = ["Ident", "Mapping", "Node", "Scalar", "Sequence", "from_python"]


class Ident(NamedTuple):
    """A bare identifier in text format that is not a bool (an enum name, or a typo for a quoted string)."""

    name: str


class Scalar(NamedTuple):
    value: Any  # None, bool, int, float, str or Ident
    where: Location


class Sequence(NamedTuple):
    items: tuple[Node, ...]
    where: Location


class Mapping(NamedTuple):
    """Keys in file order, duplicates kept so the builder can report them."""

    items: tuple[tuple[str, Location, Node], ...]
    where: Location


Node = Union[Scalar, Sequence, Mapping]


def from_python(value: Any, source: str = "<dict>", _path: str = "", _depth: int = 0) -> Node:
    """Wrap plain Python data (from_dict's input) without copying or touching it."""
    here = Location(source)
    if _depth > MAX_DEPTH:
        raise StrategyError.at(here, f"{_path}: nesting deeper than {MAX_DEPTH} levels", field=_path or None)
    if isinstance(value, AbcMapping):
        items = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise StrategyError.at(here, f"{_path or 'top level'}: keys must be strings, got {key!r}", field=_path or None)
            items.append((key, here, from_python(item, source, f"{_path}.{key}" if _path else key, _depth + 1)))
        return Mapping(tuple(items), here)
    if isinstance(value, (list, tuple)):
        return Sequence(tuple(from_python(v, source, _path, _depth + 1) for v in value), here)
    return Scalar(value, here)
