"""YAML reader (safe loader only) that keeps the line and column of every key and rejects duplicates.

Works on PyYAML's node graph, so no tag ever constructs an object, and aliases are counted as they
expand so an alias bomb stops early. libyaml's composer (PyYAML's C binding) reads ASCII documents when it is
installed, 10x faster; the pure-Python one reads the rest and reports every error.
"""

from __future__ import annotations

import yaml

from ...errors import Location, StrategyError
from ..limits import MAX_DEPTH, MAX_NODES, MAX_NUMBER_CHARS
from ..tree import Mapping, Node, Scalar, Sequence

__all__ = ["parse"]

_PLAIN_TAGS = {
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:str",
}


def _where(node: yaml.Node, source: str) -> Location:
    mark = node.start_mark
    return Location(source, mark.line + 1, mark.column + 1)


class _Converter:
    """Turns PyYAML's node graph into the located tree. An alias is the anchored node itself, so a
    collection met again is reused from `built` (its size and height counted against the limits as
    if expanded) instead of being converted again: an alias bomb costs its distinct nodes, not its
    expansion. A reuse that would cross a limit walks the subtree, so the error names the same node."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.loader = yaml.constructor.SafeConstructor()  # builds scalars only: no reader or scanner needed
        self.count = 0
        self.reach = 0  # deepest level converted so far
        self.built: dict[int, tuple[Node, int, int]] = {}  # id(collection node) -> (tree, values, levels below)

    def convert(self, node: yaml.Node, depth: int, path: str = "") -> Node:
        if isinstance(node, yaml.ScalarNode):
            return self._convert(node, depth, path)
        seen = self.built.get(id(node))
        if seen is not None and self.count + seen[1] <= MAX_NODES and depth + seen[2] <= MAX_DEPTH:
            self.count += seen[1]
            self.reach = max(self.reach, depth + seen[2])
            return seen[0]
        count, reach = self.count, self.reach
        self.reach = depth
        tree = self._convert(node, depth, path)
        self.built[id(node)] = (tree, self.count - count, self.reach - depth)
        self.reach = max(reach, self.reach)
        return tree

    def _convert(self, node: yaml.Node, depth: int, path: str) -> Node:
        where = _where(node, self.source)
        self.count += 1
        self.reach = max(self.reach, depth)
        if self.count > MAX_NODES:
            raise StrategyError.at(where, f"more than {MAX_NODES} values (after expanding aliases)")
        if depth > MAX_DEPTH:
            raise StrategyError.at(where, f"nesting deeper than {MAX_DEPTH} levels")
        if node.tag not in _PLAIN_TAGS:
            raise StrategyError.at(where, f"unsupported YAML tag {node.tag}; strategy files hold plain values only")
        if isinstance(node, yaml.MappingNode):
            items = []
            seen: dict[str, Location] = {}
            for key_node, value_node in node.value:
                key_at = _where(key_node, self.source)
                key = self.convert(key_node, depth + 1)
                if not isinstance(key, Scalar) or not isinstance(key.value, str):
                    raise StrategyError.at(key_at, "keys must be field names (plain strings)")
                if key.value in seen:
                    dotted = f"{path}.{key.value}" if path else key.value
                    raise StrategyError.at(key_at, f"duplicate key {dotted} (first at line {seen[key.value].line}); keep one", field=dotted)
                seen[key.value] = key_at
                items.append((key.value, key_at, self.convert(value_node, depth + 1, f"{path}.{key.value}" if path else key.value)))
            return Mapping(tuple(items), where)
        if isinstance(node, yaml.SequenceNode):
            return Sequence(tuple(self.convert(n, depth + 1, path) for n in node.value), where)
        if isinstance(node, yaml.ScalarNode) and len(node.value) > MAX_NUMBER_CHARS and node.value.lstrip("-").isdigit():
            raise StrategyError.at(where, f"number {node.value[:24]}... ({len(node.value)} characters) is out of range "
                                   "for any field", field=path or None)  # (int() of thousands of digits is refused)
        try:
            return Scalar(self.loader.construct_object(node), where)
        except (ValueError, yaml.YAMLError) as e:
            raise StrategyError.at(where, f"{path or 'value'}: cannot read {node.value[:24]!r}: {str(e).splitlines()[0]}", field=path or None) from None


_FAST_LOADER = getattr(yaml, "CSafeLoader", None)


def parse(text: str, source: str = "<string>") -> Node:
    """Parse one YAML document into a located tree (no schema checks yet)."""
    if _FAST_LOADER is not None and text.isascii():  # libyaml counts columns in bytes: ASCII only
        try:
            root = yaml.compose(text, Loader=_FAST_LOADER)
            return Scalar(None, Location(source, 1, 1)) if root is None else _Converter(source).convert(root, 0)
        except (yaml.YAMLError, StrategyError, RecursionError, ValueError):
            pass  # the pure-Python reader below reports it, in its words
    loader = None
    try:
        loader = yaml.SafeLoader(text)  # its reader already refuses unprintable characters
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        message = " ".join(p for p in (e.context, e.problem) if p) or "invalid YAML"
        line = mark.line + 1 if mark else None
        column = mark.column + 1 if mark else None
        raise StrategyError(message, source=source, line=line, column=column) from None
    except yaml.YAMLError as e:
        raise StrategyError(f"invalid YAML: {e}", source=source) from None
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise StrategyError(f"nesting deeper than {MAX_DEPTH} levels", source=source) from None
    except ValueError as e:  # PyYAML's scanner turns an escape past U+10FFFF (e.g. "\\U10010000") into chr()'s error
        if loader is None:
            raise StrategyError(f"invalid YAML: {e}", source=source) from None
        mark = loader.get_mark()  # the reader stops at the escape's digits
        raise StrategyError(f"invalid escape in a quoted string ({e}); a \\U escape names a code point up to 0010FFFF",
                            source=source, line=mark.line + 1, column=mark.column + 1) from None
    finally:
        if loader is not None:
            loader.dispose()
    if root is None:
        return Scalar(None, Location(source, 1, 1))
    return _Converter(source).convert(root, 0)
