"""The `--flag [value]` words of a launcher script, read without running it (Megatron's `pretrain_gpt.sh` and the like).

`flags(text)` gives every flag in order, with `NAME=value` / `NAME=${NAME:-default}` assignments followed statement
by statement and `$NAME` / `${NAME}` / `$((...))` in values expanded (see `shell`). Nothing is executed: both branches
of an `if` count (the last assignment or flag wins, as in argparse), and what cannot be known without running (`$1`,
`$(cmd)`, the environment) stays unexpanded, with the reason. Flags inside arrays, inside strings assigned to a
variable (GPT_ARGS="--num-layers 24 ...") and in quoted array elements ("--split 99,1,0") all count.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

from ..errors import Location
from .common import Unexpanded
from .shell import ASSIGN, Env, Lexer, Part, Unknown, Word

__all__ = ["Flag", "flags", "statements"]

_RESERVED = {"then", "else", "do", "{", "!", "elif", "if", "while", "until", "time"}
_DECLARE = {"export", "local", "declare", "readonly", "typeset"}


class Flag(NamedTuple):
    name: str  # without the leading dashes
    value: str | bool | Unexpanded  # True for a flag given alone
    where: Location



def flags(text: str, source: str, *, bare: Callable[[str], bool] = lambda name: False) -> list[Flag]:
    """Every `--flag [value]` of a script in order; `bare(name)` says a flag never takes a value."""
    out: list[Flag] = []
    for env, words, assigned in statements(text, source, bare=bare):
        out += assigned
        out += _scan(env, words, source, bare)
    return out


def statements(text: str, source: str, *, bare: Callable[[str], bool] = lambda name: False
               ) -> Iterator[tuple[Env, list[Word], list[Flag]]]:
    """Each statement's command words, after its `NAME=value` assignments are followed into the environment (which
    is the state at that statement), with the flags those assignments hold (GPT_ARGS="--num-layers 24 ...")."""
    env = Env()
    for words in Lexer(text, source).statements():
        assigned: list[Flag] = []
        i = 0
        while i < len(words) and words[i].raw in _RESERVED:
            i += 1
        if i < len(words) and words[i].raw in _DECLARE:  # export NAME=..., declare -a NAME=(...)
            i += 1
            while i < len(words) and words[i].raw.startswith("-"):
                i += 1
        while i < len(words) and words[i].parts and (m := ASSIGN.match(words[i].raw)) \
                and words[i].parts[0].kind == "text" and not words[i].parts[0].quoted:
            _assign(env, words[i], m, assigned, source, bare)
            i += 1
        yield env, words[i:], assigned


def _assign(env: Env, word: Word, m: re.Match[str], out: list[Flag], source: str,
            bare: Callable[[str], bool]) -> None:
    name, append = m.group(1), m.group(2)
    if word.array is not None:
        out += _scan(env, list(word.array), source, bare)
        return
    value_parts = _strip_prefix(word.parts, len(m.group()))
    env.where[name] = word.where
    try:
        text = env.expand(value_parts)
        previous = env.values.get(name, "")
        env.values[name] = (previous if isinstance(previous, str) else "") + text if append else text
    except Unknown as e:
        env.values[name] = Unexpanded(word.raw[len(m.group()):], str(e))
    if any(p.kind == "text" and "--" in p.text for p in value_parts):  # GPT_ARGS="--num-layers 24 ..."
        quoted = next((p for p in value_parts if p.quoted), None)
        inner = word.raw[len(m.group()):]
        if quoted is not None and inner[:1] in "\"'" and inner[-1:] == inner[:1]:
            inner = inner[1:-1]
        where = word.where
        sub = Lexer(inner, source, where.line or 1, (where.column or 1) + len(m.group()) + 1)
        out += _scan(env, [w for ws in sub.statements() for w in ws], source, bare)


def _strip_prefix(parts: tuple[Part, ...], n: int) -> tuple[Part, ...]:
    """The parts after the first `n` characters of literal text (the `NAME=` of an assignment)."""
    first = parts[0]
    rest = (first._replace(text=first.text[n:]),) if len(first.text) > n else ()
    return rest + parts[1:]


def _tokens(words: list[Word], source: str) -> list[Word]:
    """Words, with a quoted `"--flag value"` (an array element) split into its own words."""
    out: list[Word] = []
    for w in words:
        lit = w.literal()
        if w.parts and w.parts[0].quoted and lit.lstrip().startswith("--") and re.search(r"\s", w.raw.strip()[1:-1]):
            inner = w.raw.strip()
            sub = Lexer(inner[1:-1] if inner[0] in "\"'" else inner, source, w.where.line or 1, (w.where.column or 1) + 1)
            out += [x for ws in sub.statements() for x in ws]
        else:
            out.append(w)
    return out


def _is_flag(word: Word) -> bool:
    lit = word.literal()
    return lit.startswith("--") and len(lit) > 2 and lit[2] not in "-="


def _takes(word: Word) -> bool:
    """Whether a word after a flag is its value: not another option, not the program a launcher runs."""
    lit = word.literal()
    if lit.startswith("-") and not re.fullmatch(r"-[0-9.]+(e-?[0-9]+)?", lit):
        return False
    return not re.search(r"\.(py|sh)$", word.raw.strip("\"'"))


def _scan(env: Env, words: list[Word], source: str, bare: Callable[[str], bool]) -> list[Flag]:
    tokens = _tokens(words, source)
    out = []
    for j, w in enumerate(tokens):
        if not _is_flag(w):
            continue
        lit = w.literal()
        if "=" in lit:  # --flag=value
            name, rest = lit[2:].split("=", 1)
            lead = next((k for k, p in enumerate(w.parts) if p.kind != "text"), len(w.parts))
            value = Word((Part("text", rest),) + w.parts[lead:], w.where, w.raw.split("=", 1)[1])
            out.append(Flag(name, _value(env, value), w.where))
            continue
        nxt = tokens[j + 1] if j + 1 < len(tokens) else None
        if nxt is not None and not bare(lit[2:]) and _takes(nxt):
            out.append(Flag(lit[2:], _value(env, nxt), w.where))
        else:
            out.append(Flag(lit[2:], True, w.where))
    return out


def _value(env: Env, word: Word) -> str | Unexpanded:
    try:
        return env.expand(word.parts)
    except Unknown as e:
        return Unexpanded(word.raw, str(e))
