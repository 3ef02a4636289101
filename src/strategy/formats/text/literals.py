"""The text format's plain literals and its one-statement-a-line pattern, as the located reader (`located`) reads them.

The direct reader (`direct`) reads what protobuf and Paddle write with these; anything they do not know (escapes,
lists, special numbers, `<...>`) is NONE, and the document goes to the located reader, which owns every error message.
"""

from __future__ import annotations

import re

from ..limits import MAX_NUMBER_CHARS
from ..tree import Ident

__all__ = ["BOOLS", "LINES", "LONGEST_LINE", "NONE", "line_value"]

_INT = re.compile(r"0|[1-9][0-9]*")
_FLOAT = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
BOOLS = {"true": True, "True": True, "t": True, "false": False, "False": False, "f": False}  # as protobuf reads them
_SPECIAL = {"inf", "infinity", "nan"}  # float words: the located reader handles them (with their sign)


# One line holding at most one statement, and a comment, its surrounding whitespace stripped: the lexer's tokens
# (plain numbers, strings, words), each followed by whitespace, a comment or the line's end, so the lexer cuts it the
# same way; `_scalar` then reads the value, and anything it does not know sends the text to the located reader.
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
LINES = re.compile(r"^([ \t\r\f\v]*+)" + _STATEMENT + r"[ \t\r\f\v]*+(?:#.*)?$", re.MULTILINE)
LONGEST_LINE = 1000  # longer lines are the located reader's


NONE = object()  # not a value the direct reader reads


def line_value(value: str) -> object:
    """The value a line's value group spells (a number may be negative), or NONE."""
    negative = value[0] == "-"
    scalar = _scalar(value[1:] if negative else value)
    if negative and scalar is not NONE:
        # As the located reader: "-0" is a float's negative zero (the builder reads it as 0 for integers).
        return -0.0 if scalar == 0 and type(scalar) is int else -scalar  # type: ignore[operator]
    return scalar


def _scalar(value: str) -> object:
    head = value[0]
    if len(value) > MAX_NUMBER_CHARS or not value.isascii():
        return NONE  # the located reader's limits and escaping rules apply
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
