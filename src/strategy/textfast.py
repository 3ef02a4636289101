"""A fast path for the text format's common case: `name: value` and `name { ... }` with plain literals.

Strategy files are small and plain; most of the parser's time goes into its generality (token objects,
one method per grammar rule). Two loops build the same located tree: one statement per line (what protobuf
and Paddle write: one regex match a line), else straight from the lexer's matches. Each gives up on anything
less common — escapes, lists, special numbers, `<...>`, any error — so `textproto.parse` falls back to the
full parser, which owns every error message.
"""

from __future__ import annotations

import re

from .errors import Location
from .limits import MAX_DEPTH, MAX_NODES
from .tree import Ident, Mapping, Node, Scalar

__all__ = ["fast_parse"]

_INT = re.compile(r"0|[1-9][0-9]*")
_FLOAT = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
BOOLS = {"true": True, "True": True, "t": True, "false": False, "False": False, "f": False}
_SPECIAL = {"inf", "infinity", "nan"}  # float words: the full parser handles them (with their sign)
_new = tuple.__new__


# One line holding at most one statement, and a comment, its surrounding whitespace stripped: the lexer's tokens
# (plain numbers, strings, words), each followed by whitespace, a comment or the line's end, so the lexer cuts it the
# same way; `_scalar` then reads the value, and anything it does not know sends the text down the slower paths.
# No two parts can match the same text, so a line that fails fails at once (no backtracking over long runs).
_S = r"[ \t\r\f\v]*"  # the lexer's whitespace, less the newline
_NUMBER = r"-?[0-9][A-Za-z0-9_.]*(?:[eE][+-][A-Za-z0-9_.]*)?"  # a superset of the lexer's: `_scalar` decides
_WORD = r"[A-Za-z_][A-Za-z0-9_]*"
_STATEMENT = (
    "(?:(" + _WORD + ")" + _S  # 1: the field's name
    + "(?::" + _S + "(?:(" + _NUMBER + r"""|"[^"\\]*"|'[^'\\]*'|""" + _WORD + r")|(\{))"  # 2: its value, 3: {
    + r"|(\{))"  # 4: a message opens without a colon
    + r"|(\}))?"  # 5: a message closes
)
LINE = re.compile(_STATEMENT + "(?:" + _S + "#.*)?")
# Every line of a text at once (findall: one tuple a line, when each line is one): its indent, then LINE's groups.
# The whitespace runs are possessive, so a line that fails fails without backtracking over them.
LINES = re.compile(r"^([ \t\r\f\v]*+)" + _STATEMENT + r"[ \t\r\f\v]*+(?:#.*)?$", re.MULTILINE)
STRIP = " \t\r\f\v"
LONGEST_LINE = 1000  # longer lines take the token path
LONGEST_NUMBER = 400  # longer literals are the full parser's (its limits and escaping rules)


def fast_parse(token_re: re.Pattern[str], text: str, source: str) -> Mapping | None:
    """The tree the full parser would build for `text`, or None to let the full parser do it."""
    tree = _by_lines(text, source)
    return tree if tree is not None else _by_tokens(token_re, text, source)


def _by_lines(text: str, source: str) -> Mapping | None:
    """The tree of a text with one statement (or none) on each line; None for anything else."""
    match = LINE.fullmatch
    stack: list[tuple[list, Location | None, str, Location]] = []
    items: list[tuple[str, Location, Node]] = []
    start: Location | None = None  # a mapping starts at its first token: known once it is seen
    nodes = 0
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        body = line.lstrip(STRIP)
        indent = len(line) - len(body)
        m = match(body.rstrip(STRIP)) if len(line) <= LONGEST_LINE else None
        if m is None:
            return None
        name, value, opened, bare_open, closed = m.groups()
        if name is None and closed is None:
            continue  # blank, or a comment
        opened = opened or bare_open
        column = indent + 1
        if start is None:
            start = _new(Location, (source, number, column))
        if closed is not None:
            if not stack:
                return None
            parent, parent_start, key, key_where = stack.pop()
            parent.append((key, key_where, _new(Mapping, (tuple(items), start))))
            items, start = parent, parent_start
            continue
        where = _new(Location, (source, number, column))
        if opened is not None:
            if len(stack) + 1 > MAX_DEPTH:
                return None
            stack.append((items, start, name, where))
            items, start = [], None
            continue
        scalar = line_value(value)
        if scalar is NONE:
            return None
        nodes += 1
        if nodes > MAX_NODES:
            return None
        items.append((name, where, _new(Scalar, (scalar, _new(Location, (source, number, indent + m.start(2) + 1))))))
    if stack:
        return None
    if start is None:  # nothing but blanks and comments: the full parser's mapping starts at the end
        start = _new(Location, (source, len(lines), len(lines[-1]) + 1))
    return _new(Mapping, (tuple(items), start))


def _by_tokens(token_re: re.Pattern[str], text: str, source: str) -> Mapping | None:
    """The tree of `text` from the lexer's matches, for statements that share a line; None for anything else."""
    toks: list[tuple[str, int, int]] = []
    append = toks.append
    line, line_start, pos = 1, 0, 0
    for ws, value in token_re.findall(text):
        if ws:
            if "\n" in ws:
                line += ws.count("\n")
                line_start = pos + ws.rindex("\n") + 1
            pos += len(ws)
        if not value:
            break
        if value[0] != "#":
            append((value, line, pos - line_start + 1))
        pos += len(value)
    if pos != len(text):
        return None
    end = (line, pos - line_start + 1)
    n = len(toks)
    stack: list[tuple[list, Location, str, Location]] = []
    items: list[tuple[str, Location, Node]] = []
    first = toks[0] if toks else ("", *end)
    start = _new(Location, (source, first[1], first[2]))
    i = nodes = 0
    while True:
        if i >= n:
            return _new(Mapping, (tuple(items), start)) if not stack else None
        value, ln, col = toks[i]
        if value == "}":
            if not stack:
                return None
            parent, parent_start, name, name_where = stack.pop()
            parent.append((name, name_where, _new(Mapping, (tuple(items), start))))
            items, start = parent, parent_start
            i += 1
            if i < n and toks[i][0] in (";", ","):
                i += 1
            continue
        head = value[0]
        if not (head.isalpha() or head == "_"):
            return None
        name, name_where = value, _new(Location, (source, ln, col))
        i += 1
        if i < n and toks[i][0] == ":":
            i += 1
        if i >= n:
            return None
        value, ln, col = toks[i]
        if value == "{":
            if len(stack) + 1 > MAX_DEPTH:
                return None
            stack.append((items, start, name, name_where))
            i += 1
            nxt = toks[i] if i < n else ("", *end)
            items, start = [], _new(Location, (source, nxt[1], nxt[2]))
            continue
        if toks[i - 1][0] != ":":
            return None  # a scalar needs its colon: the full parser explains
        scalar = _scalar(value)
        if scalar is NONE:
            return None
        nodes += 1
        if nodes > MAX_NODES:
            return None
        i += 1
        if head_is_string(value) and i < n and head_is_string(toks[i][0]):
            return None  # "a" "b" concatenates: the full parser does it
        items.append((name, name_where, _new(Scalar, (scalar, _new(Location, (source, ln, col))))))
        if i < n and toks[i][0] in (";", ","):
            i += 1


NONE = object()  # not a value the fast paths read


def line_value(value: str) -> object:
    """The value a line's value group spells (a number may be negative), or NONE."""
    negative = value[0] == "-"
    scalar = _scalar(value[1:] if negative else value)
    if negative and scalar is not NONE:
        # As the full parser: "-0" is a float's negative zero (the builder reads it as 0 for integers).
        return -0.0 if scalar == 0 and type(scalar) is int else -scalar  # type: ignore[operator]
    return scalar


def head_is_string(value: str) -> bool:
    return value[0] in "\"'"


def _scalar(value: str) -> object:
    head = value[0]
    if len(value) > LONGEST_NUMBER or not value.isascii():
        return NONE  # the full parser's limits and escaping rules apply
    if head in "\"'":
        return value[1:-1] if "\\" not in value and len(value) >= 2 and value[-1] == head else NONE
    if head.isdigit():
        if _INT.fullmatch(value):
            return int(value)
        return float(value) if _FLOAT.fullmatch(value) else NONE
    if head.isalpha() or head == "_":
        if value in BOOLS:
            return BOOLS[value]
        return NONE if value.lower() in _SPECIAL else Ident(value)
    return NONE
