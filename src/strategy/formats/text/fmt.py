"""Canonical layout for text-format strategy files that keeps every comment where it stands.

protobuf's text_format drops comments, so this works on tokens: one field per line, two-space indent,
`name: value` and `name {`, no `;`/`,` separators, at most one blank line in a row. A comment on its own
line stays on its own line before the same field; a comment after a field stays after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import Location, StrategyError
from .literals import BOOLS
from .located import Token, parse, tokenize
from ..tree import Mapping, Sequence

__all__ = ["format_text"]

_BOOLS = {word: str(value).lower() for word, value in BOOLS.items()}  # each spelling -> true or false
_CLOSE = {"{": "}", "<": ">"}


@dataclass
class _Sig:
    """A significant token with the comments and blank lines around it."""

    tok: Token
    leading: list[str] = field(default_factory=list)  # own-line comments, and "" for a blank line
    trailing: list[str] = field(default_factory=list)  # comments later on the same line


def _annotate(text: str, source: str) -> list[_Sig]:
    sigs: list[_Sig] = []
    pending: list[str] = []
    for tok in tokenize(text, source):
        if tok.kind == "ws":
            if (sigs or pending) and tok.text.count("\n") >= 2 and (not pending or pending[-1] != ""):
                pending.append("")  # a blank line (several collapse into one)
            continue
        if tok.kind == "comment":
            text = tok.text.rstrip("\r")  # CRLF files come out with \n line ends throughout
            if sigs and sigs[-1].tok.line == tok.line and not pending:
                sigs[-1].trailing.append(text)
            else:
                pending.append(text)
            continue
        sigs.append(_Sig(tok, pending))
        pending = []
    return sigs


class _Printer:
    def __init__(self, sigs: list[_Sig], source: str) -> None:
        self.sigs, self.i, self.source = sigs, 0, source
        self.lines: list[str] = []

    def fail(self, message: str) -> StrategyError:
        tok = self.sigs[self.i].tok
        return StrategyError.at(Location(self.source, tok.line, tok.column), message)

    def peek(self) -> _Sig:
        return self.sigs[self.i]

    def next(self) -> _Sig:
        sig = self.sigs[self.i]
        self.i += 1
        return sig

    def emit_leading(self, leading: list[str], indent: str) -> None:
        for entry in leading:
            if entry == "":
                if self.lines and self.lines[-1] != "" and not self.lines[-1].endswith("{"):
                    self.lines.append("")
            else:
                self.lines.append(indent + entry)

    def line(self, text: str, comments: list[str]) -> None:
        self.lines.append(text + "".join(f"  {c}" for c in comments))

    def message(self, close: str | None, indent: str) -> list[str]:
        """Print fields until `close`; returns the trailing comments of the closing token."""
        while True:
            sig = self.peek()
            if sig.tok.kind == "eof" or (close and sig.tok.text == close):
                if close and sig.tok.kind == "eof":
                    raise self.fail(f"expected '{close}' before end of file")
                self.emit_leading(sig.leading, indent)
                self.i += 1
                return sig.trailing
            if sig.tok.kind != "ident":
                raise self.fail(f"expected a field name, got {sig.tok.text!r}")
            self.field(indent)

    def field(self, indent: str) -> None:
        name = self.next()
        self.emit_leading(name.leading, indent)
        comments = list(name.trailing)
        if self.peek().tok.text == ":":
            colon = self.next()
            comments += [c for c in colon.leading if c] + colon.trailing
        opener = self.peek()
        if opener.tok.text in _CLOSE:
            self.i += 1
            self.line(f"{indent}{name.tok.text} {{", comments + [c for c in opener.leading if c] + opener.trailing)
            closing = self.message(_CLOSE[opener.tok.text], indent + "  ")
            self.line(f"{indent}}}", closing + self.separator())
            return
        if opener.tok.text == "[":
            value, more = self.list_value()
        else:
            value, more = self.scalar()
        self.line(f"{indent}{name.tok.text}: {value}", comments + more + self.separator())

    def separator(self) -> list[str]:
        sig = self.peek()
        if sig.tok.text in (";", ","):
            self.i += 1
            return [c for c in sig.leading if c] + sig.trailing
        return []

    def scalar(self) -> tuple[str, list[str]]:
        parts, comments = [], []
        sig = self.next()
        comments += [c for c in sig.leading if c] + sig.trailing
        if sig.tok.text == "-":
            num = self.next()
            comments += [c for c in num.leading if c] + num.trailing
            return "-" + num.tok.text, comments
        if sig.tok.kind == "string":
            parts.append(sig.tok.text)
            while self.peek().tok.kind == "string":
                nxt = self.next()
                comments += [c for c in nxt.leading if c] + nxt.trailing
                parts.append(nxt.tok.text)
            return " ".join(parts), comments
        if sig.tok.kind in ("number", "ident"):
            return _BOOLS.get(sig.tok.text, sig.tok.text), comments
        self.i -= 1
        raise self.fail(f"expected a value, got {sig.tok.text!r}")

    def list_value(self) -> tuple[str, list[str]]:
        opener = self.next()
        comments = [c for c in opener.leading if c] + opener.trailing
        values: list[str] = []
        while self.peek().tok.text != "]":
            if self.peek().tok.kind == "eof":
                raise self.fail("expected ']' before end of file")
            if values:
                comma = self.next()
                if comma.tok.text != ",":
                    self.i -= 1
                    raise self.fail("expected ',' or ']' in a list")
                comments += [c for c in comma.leading if c] + comma.trailing
            if self.peek().tok.text in _CLOSE:
                raise self.fail("lists of messages are not used in strategy files")
            value, more = self.scalar()
            values.append(value)
            comments += more
        closer = self.next()
        comments += [c for c in closer.leading if c] + closer.trailing
        return "[" + ", ".join(values) + "]", comments


def format_text(text: str, source: str = "<string>") -> str:
    """The canonical layout of a text-format document; syntax errors are StrategyErrors with locations.

    The input is parsed first (so invalid files are refused, never rewritten), and so is the output.
    """
    before = parse(text, source)
    printer = _Printer(_annotate(text, source), source)
    printer.message(None, "")
    while printer.lines and printer.lines[-1] == "":
        printer.lines.pop()
    out = "\n".join(printer.lines) + "\n" if printer.lines else ""
    if _shape(parse(out, source)) != _shape(before):  # an internal invariant: never write a different document
        raise StrategyError("the formatter would change the document's meaning; file left as it is", source=source)
    return out


def _shape(node):
    """A located tree without its locations, to compare two parses."""
    if isinstance(node, Mapping):
        return tuple((key, _shape(value)) for key, _, value in node.items)
    if isinstance(node, Sequence):
        return tuple(_shape(item) for item in node.items)
    return node.value
