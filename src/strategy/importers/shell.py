"""Just enough of a shell to read a launcher script without running it: words, quotes and expansions.

`Lexer` cuts a script into statements of words (quotes, escapes, `$NAME`, `${NAME:-default}`, `$(...)`, `$((...))`,
`NAME=( ... )` arrays, comments, line continuations); `Env` expands a word with the variables assigned so far, and
says why when it cannot (`$1`, `$(cmd)`, the environment). Nothing is executed.
"""

from __future__ import annotations

import ast
import bisect
import operator
import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

from ..errors import Location, StrategyError
from .common import Unexpanded

__all__ = ["ASSIGN", "Env", "Lexer", "Part", "Unknown", "Word"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")  # NAME= or NAME+= opening a word
_OPERATORS = set(";&|()\n")


class Part(NamedTuple):
    kind: str  # "text", "var", "cmd", "arith"
    text: str  # text; the variable name; the command; the expression
    quoted: bool = False
    op: str = ""  # for "var": "", ":-", "-", ":=", "=", ":+", "+", or "unsupported"
    default: tuple[Part, ...] = ()


class Word(NamedTuple):
    parts: tuple[Part, ...]
    where: Location
    raw: str  # the source text of the word
    array: tuple[Word, ...] | None = None  # NAME=( ... ) elements

    def literal(self) -> str:
        """The leading unquoted-or-quoted literal text, up to the first expansion."""
        out = []
        for p in self.parts:
            if p.kind != "text":
                break
            out.append(p.text)
        return "".join(out)


class Lexer:
    def __init__(self, text: str, source: str, line: int = 1, column: int = 1) -> None:
        self.text, self.source, self.pos = text, source, 0
        self.line0, self.column0 = line, column
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def where(self, pos: int) -> Location:
        line = bisect.bisect_right(self.starts, pos) - 1
        column = pos - self.starts[line] + 1
        return Location(self.source, self.line0 + line, column + (self.column0 - 1 if line == 0 else 0))

    def fail(self, message: str, pos: int) -> StrategyError:
        return StrategyError.at(self.where(pos), message)

    def peek(self, n: int = 0) -> str:
        return self.text[self.pos + n: self.pos + n + 1]

    def blank(self, *, newlines: bool) -> bool:
        """Skip one blank, line continuation or comment (to its line's end); False when none is next."""
        c = self.peek()
        if c in " \t\r" or (newlines and c == "\n"):
            self.pos += 1
        elif c == "\\" and self.peek(1) == "\n":
            self.pos += 2
        elif c == "#":
            end = self.text.find("\n", self.pos)
            self.pos = len(self.text) if end < 0 else end
        else:
            return False
        return True

    def statements(self) -> Iterator[list[Word]]:
        words: list[Word] = []
        while self.pos < len(self.text):
            c = self.peek()
            if self.blank(newlines=False):
                continue
            if c in _OPERATORS:
                self.pos += 1
                if words:
                    yield words
                words = []
            else:
                words.append(self.word())
        if words:
            yield words

    def word(self, stop: str = "") -> Word:
        """One word: quotes, escapes and expansions up to unquoted whitespace or an operator (or `stop`)."""
        start = self.pos
        parts: list[Part] = []
        array = None
        while self.pos < len(self.text):
            c = self.peek()
            if c in " \t\r\n" or (c in _OPERATORS and c != "(") or (stop and c in stop):
                break
            if c == "(":
                if parts and ASSIGN.fullmatch("".join(p.text for p in parts if p.kind == "text")) and \
                        all(p.kind == "text" and not p.quoted for p in parts):
                    self.pos += 1
                    array = tuple(self.elements())
                    break
                break
            if c == "\\":
                if self.peek(1) == "\n":
                    self.pos += 2
                    continue
                parts.append(Part("text", self.peek(1)))
                self.pos += 2
            elif c == "'":
                parts.append(Part("text", self.until("'"), quoted=True))
            elif c == '"':
                parts += self.double_quoted()
            elif c == "$":
                parts.append(self.dollar(quoted=False))
            elif c == "`":
                parts.append(Part("cmd", self.until("`")))
            else:
                m = re.compile(r"[^\s\\'\"$`;&|()#" + re.escape(stop) + r"]+").match(self.text, self.pos)
                chunk = m.group() if m else c
                parts.append(Part("text", chunk))
                self.pos += len(chunk)
        return Word(tuple(parts), self.where(start), self.text[start:self.pos], array)

    def until(self, quote: str) -> str:
        """The text up to the closing `quote` (a ' or ` at self.pos opens it), which is passed."""
        end = self.text.find(quote, self.pos + 1)
        if end < 0:
            raise self.fail(f"unterminated {quote} quote", self.pos)
        text, self.pos = self.text[self.pos + 1:end], end + 1
        return text

    def elements(self) -> Iterator[Word]:
        """The words of `( ... )` up to its `)`; newlines and comments inside are blanks."""
        while self.pos < len(self.text):
            c = self.peek()
            if self.blank(newlines=True):
                continue
            if c == ")":
                self.pos += 1
                return
            elif c in _OPERATORS:
                self.pos += 1
            else:
                yield self.word(stop=")")
        raise self.fail("unterminated ( array", self.pos)

    def double_quoted(self) -> list[Part]:
        start = self.pos
        self.pos += 1
        parts: list[Part] = []
        text: list[str] = []
        while self.pos < len(self.text):
            c = self.peek()
            if c == '"':
                self.pos += 1
                if text or not parts:
                    parts.append(Part("text", "".join(text), quoted=True))
                return parts
            if c == "\\" and self.peek(1) in '"\\$`\n':
                if self.peek(1) != "\n":
                    text.append(self.peek(1))
                self.pos += 2
            elif c == "$":
                if text:
                    parts.append(Part("text", "".join(text), quoted=True))
                    text = []
                parts.append(self.dollar(quoted=True))
            elif c == "`":
                parts.append(Part("cmd", self.until("`"), quoted=True))
            else:
                text.append(c)
                self.pos += 1
        raise self.fail('unterminated " quote', start)

    def dollar(self, *, quoted: bool) -> Part:
        start = self.pos
        nxt = self.peek(1)
        if self.text.startswith("$((", self.pos):
            end = self.closing(self.pos + 3, "((", "))")
            part = Part("arith", self.text[self.pos + 3:end], quoted)
            self.pos = end + 2
            return part
        if nxt == "(":
            end = self.closing(self.pos + 2, "(", ")")
            part = Part("cmd", self.text[self.pos + 2:end], quoted)
            self.pos = end + 1
            return part
        if nxt == "{":
            end = self.closing(self.pos + 2, "{", "}")
            self.pos = end + 1
            return self.braced(self.text[start + 2:end], quoted, start + 2)
        m = _NAME.match(self.text, self.pos + 1)
        if m:
            self.pos = m.end()
            return Part("var", m.group(), quoted)
        if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
            self.pos += 2
            return Part("var", nxt, quoted)
        self.pos += 1
        return Part("text", "$", quoted)

    def closing(self, pos: int, opening: str, close: str) -> int:
        """The index of the `close` matching an already opened `opening`, skipping quotes."""
        depth = 1
        while pos < len(self.text):
            if self.text.startswith(close, pos):
                depth -= 1
                if depth == 0:
                    return pos
                pos += len(close)
            elif self.text.startswith(opening, pos):
                depth += 1
                pos += len(opening)
            elif self.text[pos] in "'\"":
                end = self.text.find(self.text[pos], pos + 1)
                pos = len(self.text) if end < 0 else end + 1
            elif self.text[pos] == "\\":
                pos += 2
            else:
                pos += 1
        raise self.fail(f"unterminated {opening}", pos)

    def braced(self, inner: str, quoted: bool, at: int) -> Part:
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(:?[-=+]|)", inner)
        if not m:
            return Part("var", inner, quoted, op="unsupported")
        name, op = m.group(1), m.group(2)
        rest = inner[m.end():]
        if not op:
            return Part("var", name, quoted, op="" if not rest else "unsupported")
        here = self.where(at + m.end())
        sub = Lexer(rest, self.source, here.line or 1, here.column or 1)
        default = sub.word(stop="") if rest else Word((), self.where(at), "")
        return Part("var", name, quoted, op=op, default=default.parts)


class Env:
    """The script's variables as assigned so far: text, or why the text cannot be known."""

    def __init__(self) -> None:
        self.values: dict[str, str | Unexpanded] = {}
        self.where: dict[str, Location] = {}  # where each variable was last assigned

    def expand(self, parts: tuple[Part, ...]) -> str:
        return "".join(self.part(p) for p in parts)

    def part(self, p: Part) -> str:
        if p.kind == "text":
            return p.text
        if p.kind == "cmd":
            raise Unknown(f"$({p.text.strip()}) is a command's output, known only when the script runs")
        if p.kind == "arith":
            return str(self.arithmetic(p.text))
        if p.op == "unsupported":
            raise Unknown(f"${{{p.text}}} is an expansion this reader does not follow")
        value = self.values.get(p.text)
        if p.op in (":-", "-", ":=", "="):
            unset = value is None or (p.op.startswith(":") and value == "")
            if unset:
                text = self.expand(p.default)
                if "=" in p.op:
                    self.values[p.text] = text
                return text
        if p.op in (":+", "+"):
            return self.expand(p.default) if isinstance(value, str) and (value or p.op == "+") else ""
        if isinstance(value, Unexpanded):
            raise Unknown(value.reason)
        if value is None:
            if p.text.isdigit() or p.text in "@*#":
                raise Unknown(f"${p.text} is an argument of the script, known only when it runs")
            raise Unknown(f"${p.text} is not set in the script (it comes from the environment)")
        return value

    def arithmetic(self, expression: str) -> int:
        text = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"\1", expression)
        names = {n: self.part(Part("var", n)) for n in _NAME.findall(text)}
        try:
            return _evaluate(ast.parse(text.strip(), mode="eval").body, {n: int(v) for n, v in names.items()})
        except (SyntaxError, ValueError, KeyError, ZeroDivisionError):
            raise Unknown(f"$(({expression})) is not arithmetic this reader follows") from None


class Unknown(Exception):
    pass


def _divide(a: int, b: int) -> int:
    """a / b as $((...)) computes it (C's division): truncated toward zero, so $((-7/2)) is -3 (Python's // gives -4)."""
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _remainder(a: int, b: int) -> int:
    """a % b as $((...)) computes it: with the sign of a, so $((-7%2)) is -1 (Python's % gives 1)."""
    return a - b * _divide(a, b)


_OPS: dict[type, Callable[[int, int], int]] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                                               ast.FloorDiv: operator.floordiv, ast.Div: _divide, ast.Mod: _remainder}


def _evaluate(node: ast.expr, names: dict[str, int]) -> int:
    """Integer arithmetic on names and literals: + - * / %, as $((...)) does (nothing else is evaluated)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left, names), _evaluate(node.right, names))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, names)
    raise ValueError("not integer arithmetic")
