"""Protobuf text format (prototxt) reader that keeps the line and column of every field.

protobuf's own text_format parser reports no positions for what it accepts; this one feeds the shared
builder so text files get the same checks and `file:line:col` errors as JSON and YAML. Comments are
kept as tokens for the formatter.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from google.protobuf import text_encoding

from ...errors import Location, StrategyError
from ..limits import MAX_DEPTH, MAX_NODES, MAX_NUMBER_CHARS
from ..tree import Ident, Mapping, Node, Scalar, Sequence
from .literals import BOOLS

__all__ = ["Token", "parse", "tokenize"]

# One token per match, with the whitespace before it: findall then yields plain (ws, token) tuples, the
# fastest way to lex in Python. A token's kind follows from its first character (_FIRST).
_TOKEN = re.compile(
    r"""([ \t\r\n\f\v]*)
      ( \#[^\n]*
      | "(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'
      | (?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?)[A-Za-z0-9_.]*
      | [A-Za-z_][A-Za-z0-9_]*
      | [{}<>\[\]:;,\-/.]
      | $)""",  # an empty token at the end carries the trailing whitespace
    re.VERBOSE,
)
_SPACE = re.compile(r"[ \t\r\n\f\v]*")
_FIRST = {"#": "comment", '"': "string", "'": "string"}
_FIRST.update(dict.fromkeys("0123456789", "number"))
_FIRST.update(dict.fromkeys("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_", "ident"))
_INT = re.compile(r"0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*")
_FLOAT = re.compile(r"(?:\d+\.\d*|\.\d+|\d+(?=[eEfF]))(?:[eE][+-]?\d+)?[fF]?|\d+\.?\d*[eE][+-]?\d+[fF]?")
_FLOATS = {"inf": float("inf"), "infinity": float("inf"), "nan": float("nan")}
_CLOSE = {"{": "}", "<": ">"}


# tuple.__new__(Cls, values) builds a NamedTuple in C, skipping its Python-level __new__: the lexer and
# parser make one per token and field, and this halves their cost.
_new = tuple.__new__


class Token(NamedTuple):
    kind: str  # ws, comment, string, number, ident, punct, eof
    text: str
    offset: int
    line: int  # 1-based
    column: int  # 1-based


def tokenize(text: str, source: str, *, trivia: bool = True) -> list[Token]:
    """All tokens, ending with an `eof` token; whitespace and comments only when `trivia`."""
    out: list[Token] = []
    append = out.append
    line, line_start, pos = 1, 0, 0
    for ws, value in _TOKEN.findall(text):
        if ws:
            if trivia:
                append(_new(Token, ("ws", ws, pos, line, pos - line_start + 1)))
            if "\n" in ws:
                line += ws.count("\n")
                line_start = pos + ws.rindex("\n") + 1
            pos += len(ws)
        if not value:
            break  # the end of the text
        kind = _FIRST.get(value[0], "punct")
        if kind == "punct" and value[0] == "." and len(value) > 1:
            kind = "number"  # .5
        if trivia or kind != "comment":
            append(_new(Token, (kind, value, pos, line, pos - line_start + 1)))
        pos += len(value)
    if pos != len(text):  # findall skipped something no token matches
        _raise_at_bad_character(text, source)
    append(_new(Token, ("eof", "", pos, line, pos - line_start + 1)))
    return out


def _raise_at_bad_character(text: str, source: str) -> None:
    pos = 0
    while (m := _TOKEN.match(text, pos)) is not None:
        pos = m.end()
    pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]  # `*` always matches
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    what = "unterminated string" if text[pos] in "\"'" else f"unexpected character {text[pos]!r}"
    raise StrategyError(what, source=source, line=line, column=column)


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self.tokens = tokenize(text, source, trivia=False)
        self.i = 0
        self.nodes = 0

    def where(self, tok: Token | None = None) -> Location:
        tok = tok or self.tokens[self.i]
        return _new(Location, (self.source, tok.line, tok.column))

    def fail(self, message: str, tok: Token | None = None) -> StrategyError:
        return StrategyError.at(self.where(tok), message)

    def take(self, text: str) -> bool:
        """Consume the punctuation `text` if it comes next (no other token kind can have that text)."""
        if self.tokens[self.i].text == text:
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
        while not (self.tokens[self.i].kind == "eof" if close is None else self.take(close)):
            if self.tokens[self.i].kind == "eof":
                raise self.fail(f"expected '{close}' before end of file")
            name_tok = self.tokens[self.i]
            if name_tok.text in ("}", ">") and close is not None:
                raise self.fail(f"expected '{close}' to close this block, got {name_tok.text!r}")
            if name_tok.kind != "ident":
                hint = " (extensions and Any are not used in strategy files)" if name_tok.text == "[" else ""
                raise self.fail(f"expected a field name, got {self.describe(name_tok)}{hint}")
            self.i += 1
            items.append((name_tok.text, self.where(name_tok), self.field_value(name_tok, depth)))
            if self.tokens[self.i].text in (";", ","):
                self.i += 1
        return _new(Mapping, (tuple(items), start))

    def field_value(self, name_tok: Token, depth: int) -> Node:
        colon = self.take(":")
        tok = self.tokens[self.i]
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
                if self.tokens[self.i].kind == "punct" and self.tokens[self.i].text in _CLOSE:
                    opener = self.tokens[self.i].text
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
        tok = self.tokens[self.i]
        where = self.where(tok)
        if tok.kind == "string":
            parts = []
            while self.tokens[self.i].kind == "string":
                parts.append(self.unquote(self.tokens[self.i]))
                self.i += 1
            return _new(Scalar, ("".join(parts), where))
        negative = self.take("-")
        tok = self.tokens[self.i]
        self.i += 1
        if tok.kind == "number":
            value = self.number(tok)
            if negative:
                # "-0" is how protobuf prints a float's negative zero; the builder reads it as 0 for integers.
                value = -0.0 if value == 0 and isinstance(value, int) else -value
            return _new(Scalar, (value, where))
        if tok.kind == "ident":
            lowered = tok.text.lower()
            if lowered in _FLOATS:
                return Scalar(-_FLOATS[lowered] if negative else _FLOATS[lowered], where)
            if not negative and tok.text in BOOLS:
                return _new(Scalar, (BOOLS[tok.text], where))
            if not negative:
                return Scalar(Ident(tok.text), where)  # rare: enum names and typos
        self.i -= 1
        raise self.fail(f"expected a value, got {self.describe(tok)}")

    def number(self, tok: Token) -> int | float:
        text = tok.text
        if len(text) > MAX_NUMBER_CHARS:
            raise self.fail(f"number {text[:24]}... ({len(text)} characters) is out of range for any field", tok)
        if _INT.fullmatch(text):
            if text[:2].lower() == "0x":
                return int(text, 16)
            return int(text, 8) if len(text) > 1 and text[0] == "0" else int(text)
        if not _FLOAT.fullmatch(text):  # e.g. 08: not octal, not a float
            raise self.fail(f"invalid number {text}", tok)
        return float(text.rstrip("fF"))

    def unquote(self, tok: Token) -> str:
        try:
            return text_encoding.CUnescape(tok.text[1:-1]).decode("utf-8")
        except (ValueError, UnicodeDecodeError) as e:
            raise self.fail(f"invalid string literal {tok.text}: {e}", tok) from None


def parse(text: str, source: str = "<string>") -> Mapping:
    """Parse text format into a located tree (no schema checks yet). Plain files never get here: the direct reader
    (`text.direct`) takes them; this located reader owns rare syntax and every error."""
    return _Parser(text, source).message(None, 0)
