"""Protobuf text format (prototxt) reader that keeps the line and column of every field.

protobuf's own text_format parser reports no positions for what it accepts; this one feeds the shared
builder so text files get the same checks and `file:line:col` errors as JSON and YAML. Comments are
kept as tokens for the formatter.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

from google.protobuf import text_encoding

from .errors import Location, StrategyError
from .limits import MAX_DEPTH, MAX_NODES
from .tree import Ident, Mapping, Node, Scalar, Sequence

__all__ = ["Token", "parse", "tokenize"]

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\n\f\v]+)
      | (?P<comment>\#[^\n]*)
      | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?)
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<punct>[{}<>\[\]:;,\-/.])""",
    re.VERBOSE,
)
_INT = re.compile(r"0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*")
_BOOLS = {"true": True, "True": True, "t": True, "false": False, "False": False, "f": False}
_FLOATS = {"inf": float("inf"), "infinity": float("inf"), "nan": float("nan")}
_CLOSE = {"{": "}", "<": ">"}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # ws, comment, string, number, ident, punct, eof
    text: str
    offset: int
    line: int  # 1-based
    column: int  # 1-based


def tokenize(text: str, source: str) -> Iterator[Token]:
    """All tokens, whitespace and comments included, ending with an `eof` token."""
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def locate(offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(starts, offset)
        return line, offset - starts[line - 1] + 1

    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            line, col = locate(pos)
            what = "unterminated string" if text[pos] in "\"'" else f"unexpected character {text[pos]!r}"
            raise StrategyError(what, source=source, line=line, column=col)
        yield Token(m.lastgroup or "", m.group(), pos, *locate(pos))
        pos = m.end()
    yield Token("eof", "", pos, *locate(pos))


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self.tokens = [t for t in tokenize(text, source) if t.kind not in ("ws", "comment")]
        self.i = 0
        self.nodes = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def where(self, tok: Token | None = None) -> Location:
        tok = tok or self.tok
        return Location(self.source, tok.line, tok.column)

    def fail(self, message: str, tok: Token | None = None) -> StrategyError:
        return StrategyError.at(self.where(tok), message)

    def take(self, text: str) -> bool:
        if self.tok.kind == "punct" and self.tok.text == text:
            self.i += 1
            return True
        return False

    def describe(self, tok: Token) -> str:
        return "end of file" if tok.kind == "eof" else repr(tok.text)

    def message(self, close: str | None, depth: int) -> Mapping:
        if depth > MAX_DEPTH:
            raise self.fail(f"nesting deeper than {MAX_DEPTH} levels")
        start = self.where()
        items = []
        while not (self.tok.kind == "eof" if close is None else self.take(close)):
            if self.tok.kind == "eof":
                raise self.fail(f"expected '{close}' before end of file")
            name_tok = self.tok
            if name_tok.kind != "ident":
                hint = " (extensions and Any are not used in strategy files)" if name_tok.text == "[" else ""
                raise self.fail(f"expected a field name, got {self.describe(name_tok)}{hint}")
            self.i += 1
            items.append((name_tok.text, self.where(name_tok), self.field_value(name_tok, depth)))
            self.take(";") or self.take(",")
        return Mapping(tuple(items), start)

    def field_value(self, name_tok: Token, depth: int) -> Node:
        colon = self.take(":")
        tok = self.tok
        if tok.kind == "punct" and tok.text in _CLOSE:
            self.i += 1
            return self.message(_CLOSE[tok.text], depth + 1)
        if not colon:
            raise self.fail(f"expected ':' or '{{' after {name_tok.text}, got {self.describe(tok)}")
        if self.take("["):
            items: list[Node] = []
            while not self.take("]"):
                if items and not self.take(","):
                    raise self.fail(f"expected ',' or ']' in the list for {name_tok.text}")
                if self.tok.kind == "punct" and self.tok.text in _CLOSE:
                    opener = self.tok.text
                    self.i += 1
                    items.append(self.message(_CLOSE[opener], depth + 1))
                else:
                    items.append(self.scalar())
            return Sequence(tuple(items), self.where(tok))
        return self.scalar()

    def scalar(self) -> Scalar:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail(f"more than {MAX_NODES} values")
        tok = self.tok
        where = self.where(tok)
        if tok.kind == "string":
            parts = []
            while self.tok.kind == "string":
                parts.append(self.unquote(self.tok))
                self.i += 1
            return Scalar("".join(parts), where)
        negative = self.take("-")
        tok = self.tok
        self.i += 1
        if tok.kind == "number":
            value = self.number(tok.text)
            return Scalar(-value if negative else value, where)
        if tok.kind == "ident":
            lowered = tok.text.lower()
            if lowered in _FLOATS:
                return Scalar(-_FLOATS[lowered] if negative else _FLOATS[lowered], where)
            if not negative and tok.text in _BOOLS:
                return Scalar(_BOOLS[tok.text], where)
            if not negative:
                return Scalar(Ident(tok.text), where)
        self.i -= 1
        raise self.fail(f"expected a value, got {self.describe(tok)}")

    def number(self, text: str) -> int | float:
        if _INT.fullmatch(text):
            if text[:2].lower() == "0x":
                return int(text, 16)
            return int(text, 8) if len(text) > 1 and text[0] == "0" else int(text)
        return float(text.rstrip("fF"))

    def unquote(self, tok: Token) -> str:
        try:
            return text_encoding.CUnescape(tok.text[1:-1]).decode("utf-8")
        except (ValueError, UnicodeDecodeError) as e:
            raise self.fail(f"invalid string literal {tok.text}: {e}", tok) from None


def parse(text: str, source: str = "<string>") -> Mapping:
    """Parse text format into a located tree (no schema checks yet)."""
    return _Parser(text, source).message(None, 0)
