"""JSON reader that keeps the line and column of every key and rejects duplicate keys.

The standard `json` module reports neither positions of what it accepts nor duplicates; this small
recursive-descent parser reuses its string and number scanners.
"""

from __future__ import annotations

import bisect
import json.decoder
import json.scanner
import re

from ...errors import Location, StrategyError
from ..limits import MAX_DEPTH, MAX_NODES, MAX_NUMBER_CHARS
from ..tree import Mapping, Node, Scalar, Sequence

__all__ = ["parse"]

_WS = re.compile(r"[ \t\n\r]*")
_LITERALS = {"true": True, "false": False, "null": None}


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.pos = 0
        self.nodes = 0

    def where(self, pos: int) -> Location:
        line = bisect.bisect_right(self.starts, pos)
        return Location(self.source, line, pos - self.starts[line - 1] + 1)

    def fail(self, message: str, pos: int | None = None) -> StrategyError:
        return StrategyError.at(self.where(self.pos if pos is None else pos), message)

    def skip_ws(self) -> str:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]  # `*` always matches
        return self.text[self.pos : self.pos + 1]

    def expect(self, char: str, context: str) -> None:
        got = self.skip_ws()
        if got != char:
            raise self.fail(f"expected '{char}' {context}, got {repr(got) if got else 'end of file'}")
        self.pos += 1

    def value(self, depth: int, path: str = "") -> Node:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail(f"more than {MAX_NODES} values")
        if depth > MAX_DEPTH:
            raise self.fail(f"nesting deeper than {MAX_DEPTH} levels")
        char = self.skip_ws()
        start = self.pos
        where = self.where(start)
        if char == "{":
            return self.object(depth, path)
        if char == "[":
            self.pos += 1
            items: list[Node] = []
            if self.skip_ws() == "]":
                self.pos += 1
                return Sequence((), where)
            while True:
                items.append(self.value(depth + 1, path))
                if self.skip_ws() == ",":
                    self.pos += 1
                    continue
                self.expect("]", "after a list item")
                return Sequence(tuple(items), where)
        if char == '"':
            return Scalar(self.string(), where)
        m = json.scanner.NUMBER_RE.match(self.text, self.pos)
        if m:
            integer, frac, exp = m.groups()
            if m.end() - m.start() > MAX_NUMBER_CHARS:  # int() of thousands of digits is refused
                raise self.fail(f"number {m.group()[:24]}... ({m.end() - m.start()} characters) is out of range for any field")
            self.pos = m.end()
            value = float(integer + (frac or "") + (exp or "")) if frac or exp else int(integer)
            return Scalar(value, where)
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return Scalar(literal, where)
        raise self.fail(f"expected a JSON value, got {repr(char) if char else 'end of file'}")

    def object(self, depth: int, path: str) -> Mapping:
        where = self.where(self.pos)
        self.pos += 1
        items = []
        seen: dict[str, Location] = {}
        if self.skip_ws() == "}":
            self.pos += 1
            return Mapping((), where)
        while True:
            if self.skip_ws() != '"':
                raise self.fail("expected a quoted key")
            key_at = self.where(self.pos)
            key = self.string()
            if key in seen:
                dotted = f"{path}.{key}" if path else key
                raise StrategyError.at(key_at, f"duplicate key {dotted} (first at line {seen[key].line}); keep one", field=dotted)
            seen[key] = key_at
            self.expect(":", f"after key '{key}'")
            items.append((key, key_at, self.value(depth + 1, f"{path}.{key}" if path else key)))
            if self.skip_ws() == ",":
                self.pos += 1
                continue
            self.expect("}", "or ',' after a value")
            return Mapping(tuple(items), where)

    def string(self) -> str:
        try:
            value, self.pos = json.decoder.scanstring(self.text, self.pos + 1, True)  # type: ignore[attr-defined]
        except json.JSONDecodeError as e:
            raise self.fail(e.msg, e.pos) from None
        return value


def parse(text: str, source: str = "<string>") -> Node:
    """Parse one JSON document into a located tree (no schema checks yet)."""
    parser = _Parser(text, source)
    node = parser.value(0)
    if parser.skip_ws():
        raise parser.fail("extra data after the JSON document")
    return node
