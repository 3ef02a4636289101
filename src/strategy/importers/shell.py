"""Just enough of a shell to read a launcher script without running it: words, quotes, assignments, expansions.

`flags(text)` gives every `--flag [value]` of the script in order, with `NAME=value` / `NAME=${NAME:-default}`
assignments followed line by line and `$NAME` / `${NAME}` / `$((...))` in values expanded. Nothing is executed: both
branches of an `if` count (the last assignment or flag wins, as in argparse), and what cannot be known without running
(`$1`, `$(cmd)`, the environment) stays unexpanded, with the reason.
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

__all__ = ["Flag", "Unexpanded", "flags"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_RESERVED = {"then", "else", "do", "{", "!", "elif", "if", "while", "until", "time"}
_DECLARE = {"export", "local", "declare", "readonly", "typeset"}
_OPERATORS = set(";&|()\n")


class Flag(NamedTuple):
    name: str  # without the leading dashes
    value: str | bool | Unexpanded  # True for a flag given alone
    where: Location


class _Part(NamedTuple):
    kind: str  # "text", "var", "cmd", "arith"
    text: str  # text; the variable name; the command; the expression
    quoted: bool = False
    op: str = ""  # for "var": "", ":-", "-", ":=", "=", ":+", "+", or "unsupported"
    default: tuple[_Part, ...] = ()


class _Word(NamedTuple):
    parts: tuple[_Part, ...]
    where: Location
    raw: str  # the source text of the word
    array: tuple[_Word, ...] | None = None  # NAME=( ... ) elements

    def literal(self) -> str:
        """The leading unquoted-or-quoted literal text, up to the first expansion."""
        out = []
        for p in self.parts:
            if p.kind != "text":
                break
            out.append(p.text)
        return "".join(out)


class _Lexer:
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

    def statements(self) -> Iterator[list[_Word]]:
        words: list[_Word] = []
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

    def word(self, stop: str = "") -> _Word:
        """One word: quotes, escapes and expansions up to unquoted whitespace or an operator (or `stop`)."""
        start = self.pos
        parts: list[_Part] = []
        array = None
        while self.pos < len(self.text):
            c = self.peek()
            if c in " \t\r\n" or (c in _OPERATORS and c != "(") or (stop and c in stop):
                break
            if c == "(":
                if parts and _ASSIGN.fullmatch("".join(p.text for p in parts if p.kind == "text")) and \
                        all(p.kind == "text" and not p.quoted for p in parts):
                    self.pos += 1
                    array = tuple(self.elements())
                    break
                break
            if c == "\\":
                if self.peek(1) == "\n":
                    self.pos += 2
                    continue
                parts.append(_Part("text", self.peek(1)))
                self.pos += 2
            elif c == "'":
                parts.append(_Part("text", self.until("'"), quoted=True))
            elif c == '"':
                parts += self.double_quoted()
            elif c == "$":
                parts.append(self.dollar(quoted=False))
            elif c == "`":
                parts.append(_Part("cmd", self.until("`")))
            else:
                m = re.compile(r"[^\s\\'\"$`;&|()#" + re.escape(stop) + r"]+").match(self.text, self.pos)
                chunk = m.group() if m else c
                parts.append(_Part("text", chunk))
                self.pos += len(chunk)
        return _Word(tuple(parts), self.where(start), self.text[start:self.pos], array)

    def until(self, quote: str) -> str:
        """The text up to the closing `quote` (a ' or ` at self.pos opens it), which is passed."""
        end = self.text.find(quote, self.pos + 1)
        if end < 0:
            raise self.fail(f"unterminated {quote} quote", self.pos)
        text, self.pos = self.text[self.pos + 1:end], end + 1
        return text

    def elements(self) -> Iterator[_Word]:
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

    def double_quoted(self) -> list[_Part]:
        start = self.pos
        self.pos += 1
        parts: list[_Part] = []
        text: list[str] = []
        while self.pos < len(self.text):
            c = self.peek()
            if c == '"':
                self.pos += 1
                if text or not parts:
                    parts.append(_Part("text", "".join(text), quoted=True))
                return parts
            if c == "\\" and self.peek(1) in '"\\$`\n':
                if self.peek(1) != "\n":
                    text.append(self.peek(1))
                self.pos += 2
            elif c == "$":
                if text:
                    parts.append(_Part("text", "".join(text), quoted=True))
                    text = []
                parts.append(self.dollar(quoted=True))
            elif c == "`":
                parts.append(_Part("cmd", self.until("`"), quoted=True))
            else:
                text.append(c)
                self.pos += 1
        raise self.fail('unterminated " quote', start)

    def dollar(self, *, quoted: bool) -> _Part:
        start = self.pos
        nxt = self.peek(1)
        if self.text.startswith("$((", self.pos):
            end = self.closing(self.pos + 3, "((", "))")
            part = _Part("arith", self.text[self.pos + 3:end], quoted)
            self.pos = end + 2
            return part
        if nxt == "(":
            end = self.closing(self.pos + 2, "(", ")")
            part = _Part("cmd", self.text[self.pos + 2:end], quoted)
            self.pos = end + 1
            return part
        if nxt == "{":
            end = self.closing(self.pos + 2, "{", "}")
            self.pos = end + 1
            return self.braced(self.text[start + 2:end], quoted, start + 2)
        m = _NAME.match(self.text, self.pos + 1)
        if m:
            self.pos = m.end()
            return _Part("var", m.group(), quoted)
        if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
            self.pos += 2
            return _Part("var", nxt, quoted)
        self.pos += 1
        return _Part("text", "$", quoted)

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

    def braced(self, inner: str, quoted: bool, at: int) -> _Part:
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(:?[-=+]|)", inner)
        if not m:
            return _Part("var", inner, quoted, op="unsupported")
        name, op = m.group(1), m.group(2)
        rest = inner[m.end():]
        if not op:
            return _Part("var", name, quoted, op="" if not rest else "unsupported")
        here = self.where(at + m.end())
        sub = _Lexer(rest, self.source, here.line or 1, here.column or 1)
        default = sub.word(stop="") if rest else _Word((), self.where(at), "")
        return _Part("var", name, quoted, op=op, default=default.parts)


class _Env:
    """The script's variables as assigned so far: text, or why the text cannot be known."""

    def __init__(self) -> None:
        self.values: dict[str, str | Unexpanded] = {}

    def expand(self, parts: tuple[_Part, ...]) -> str:
        return "".join(self.part(p) for p in parts)

    def part(self, p: _Part) -> str:
        if p.kind == "text":
            return p.text
        if p.kind == "cmd":
            raise _Unknown(f"$({p.text.strip()}) is a command's output, known only when the script runs")
        if p.kind == "arith":
            return str(self.arithmetic(p.text))
        if p.op == "unsupported":
            raise _Unknown(f"${{{p.text}}} is an expansion this reader does not follow")
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
            raise _Unknown(value.reason)
        if value is None:
            if p.text.isdigit() or p.text in "@*#":
                raise _Unknown(f"${p.text} is an argument of the script, known only when it runs")
            raise _Unknown(f"${p.text} is not set in the script (it comes from the environment)")
        return value

    def arithmetic(self, expression: str) -> int:
        text = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"\1", expression)
        names = {n: self.part(_Part("var", n)) for n in _NAME.findall(text)}
        try:
            return _evaluate(ast.parse(text.strip(), mode="eval").body, {n: int(v) for n, v in names.items()})
        except (SyntaxError, ValueError, KeyError, ZeroDivisionError):
            raise _Unknown(f"$(({expression})) is not arithmetic this reader follows") from None


class _Unknown(Exception):
    pass


_OPS: dict[type, Callable[[int, int], int]] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                                               ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv,
                                               ast.Mod: operator.mod}


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


def flags(text: str, source: str, *, bare: Callable[[str], bool] = lambda name: False) -> list[Flag]:
    """Every `--flag [value]` of a script in order; `bare(name)` says a flag never takes a value."""
    env = _Env()
    out: list[Flag] = []
    for words in _Lexer(text, source).statements():
        i = 0
        while i < len(words) and words[i].raw in _RESERVED:
            i += 1
        if i < len(words) and words[i].raw in _DECLARE:  # export NAME=..., declare -a NAME=(...)
            i += 1
            while i < len(words) and words[i].raw.startswith("-"):
                i += 1
        while i < len(words) and words[i].parts and (m := _ASSIGN.match(words[i].raw)) \
                and words[i].parts[0].kind == "text" and not words[i].parts[0].quoted:
            _assign(env, words[i], m, out, source, bare)
            i += 1
        out += _scan(env, words[i:], source, bare)
    return out


def _assign(env: _Env, word: _Word, m: re.Match[str], out: list[Flag], source: str,
            bare: Callable[[str], bool]) -> None:
    name, append = m.group(1), m.group(2)
    if word.array is not None:
        out += _scan(env, list(word.array), source, bare)
        return
    value_parts = _strip_prefix(word.parts, len(m.group()))
    try:
        text = env.expand(value_parts)
        previous = env.values.get(name, "")
        env.values[name] = (previous if isinstance(previous, str) else "") + text if append else text
    except _Unknown as e:
        env.values[name] = Unexpanded(word.raw[len(m.group()):], str(e))
    if any(p.kind == "text" and "--" in p.text for p in value_parts):  # GPT_ARGS="--num-layers 24 ..."
        quoted = next((p for p in value_parts if p.quoted), None)
        inner = word.raw[len(m.group()):]
        if quoted is not None and inner[:1] in "\"'" and inner[-1:] == inner[:1]:
            inner = inner[1:-1]
        where = word.where
        sub = _Lexer(inner, source, where.line or 1, (where.column or 1) + len(m.group()) + 1)
        out += _scan(env, [w for ws in sub.statements() for w in ws], source, bare)


def _strip_prefix(parts: tuple[_Part, ...], n: int) -> tuple[_Part, ...]:
    """The parts after the first `n` characters of literal text (the `NAME=` of an assignment)."""
    first = parts[0]
    rest = (first._replace(text=first.text[n:]),) if len(first.text) > n else ()
    return rest + parts[1:]


def _tokens(words: list[_Word], source: str) -> list[_Word]:
    """Words, with a quoted `"--flag value"` (an array element) split into its own words."""
    out: list[_Word] = []
    for w in words:
        lit = w.literal()
        if w.parts and w.parts[0].quoted and lit.lstrip().startswith("--") and re.search(r"\s", w.raw.strip()[1:-1]):
            inner = w.raw.strip()
            sub = _Lexer(inner[1:-1] if inner[0] in "\"'" else inner, source, w.where.line or 1, (w.where.column or 1) + 1)
            out += [x for ws in sub.statements() for x in ws]
        else:
            out.append(w)
    return out


def _is_flag(word: _Word) -> bool:
    lit = word.literal()
    return lit.startswith("--") and len(lit) > 2 and lit[2] not in "-="


def _takes(word: _Word) -> bool:
    """Whether a word after a flag is its value: not another option, not the program a launcher runs."""
    lit = word.literal()
    if lit.startswith("-") and not re.fullmatch(r"-[0-9.]+(e-?[0-9]+)?", lit):
        return False
    return not re.search(r"\.(py|sh)$", word.raw.strip("\"'"))


def _scan(env: _Env, words: list[_Word], source: str, bare: Callable[[str], bool]) -> list[Flag]:
    tokens = _tokens(words, source)
    out = []
    for j, w in enumerate(tokens):
        if not _is_flag(w):
            continue
        lit = w.literal()
        if "=" in lit:  # --flag=value
            name, rest = lit[2:].split("=", 1)
            lead = next((k for k, p in enumerate(w.parts) if p.kind != "text"), len(w.parts))
            value = _Word((_Part("text", rest),) + w.parts[lead:], w.where, w.raw.split("=", 1)[1])
            out.append(Flag(name, _value(env, value), w.where))
            continue
        nxt = tokens[j + 1] if j + 1 < len(tokens) else None
        if nxt is not None and not bare(lit[2:]) and _takes(nxt):
            out.append(Flag(lit[2:], _value(env, nxt), w.where))
        else:
            out.append(Flag(lit[2:], True, w.where))
    return out


def _value(env: _Env, word: _Word) -> str | Unexpanded:
    try:
        return env.expand(word.parts)
    except _Unknown as e:
        return Unexpanded(word.raw, str(e))
