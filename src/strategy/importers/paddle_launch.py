"""PaddleNLP's launch scripts: the `python -m paddle.distributed.launch --devices ... run_pretrain.py ARGS.json --flag
value ...` lines of a shell script, read without running it (`launcher.statements` follows its variables).

A command's launcher options come first (`--devices` / `--gpus`: the ids of this machine's ranks, `--nnodes`), then
the program, then its arguments as PaddleNLP's `PdArgumentParser.parse_json_file_and_cmd_lines` combines them: the
argument file (relative to the script, else to the working directory) and the flags after it, a flag overriding the
file's key of the same name. A script with several training commands imports one (`command`, 1 unless told); each
of the others is a report line.
"""

from __future__ import annotations

import os
import re
from typing import Any, NamedTuple

from ..errors import Location, StrategyError
from ..formats.codec import decode
from ..formats.io import read_bytes
from .common import Leaf, Overridden, Unexpanded, show
from .launcher import statements
from .paddle import BACKEND_DEVICES, VISIBLE, arguments, with_words
from .shell import Env, Unknown, Word

__all__ = ["LAUNCH", "LAUNCHED_WORLD", "file_leaves", "leaves", "names"]

LAUNCH = "paddle.distributed.launch"
LAUNCHED_WORLD = (f"import the script whose `python -m {LAUNCH}` runs it (its --devices or --gpus × --nnodes give "
                  "the world size)")
_FILE = re.compile(r"\.(json|ya?ml)$")


# The launcher flags that stand for a variable the script exports (a device list: --devices, --gpus).
_FLAGS_FOR = {"PADDLE_NNODES": ("nnodes",)}


class _Token(NamedTuple):
    text: str | Unexpanded
    where: Location


class Command(NamedTuple):
    tokens: list[_Token]
    where: Location
    environment: list[Leaf]  # the device list and node count the launcher reads from the script's environment


def _expand(env: Env, word: Word) -> list[_Token]:
    try:
        value = env.expand(word.parts)
    except Unknown as e:
        return [_Token(Unexpanded(word.raw, str(e)), word.where)]
    split = any(p.kind in ("var", "cmd") and not p.quoted for p in word.parts)
    return [_Token(t, word.where) for t in value.split()] if split else [_Token(value, word.where)]


def commands(text: str, source: str) -> list[Command]:
    """Every `paddle.distributed.launch` command of a script, its words expanded as far as the script says."""
    out = []
    for env, words, _ in statements(text, source):
        if any(LAUNCH in w.raw for w in words):
            tokens = [t for w in words for t in _expand(env, w)]
            at = next(i for i, t in enumerate(tokens) if t.text == LAUNCH or (isinstance(t.text, str) and
                                                                                 t.text.endswith(LAUNCH)))
            out.append(Command(tokens[at + 1:], tokens[at].where, _environment(env)))
    return out


def _environment(env: Env) -> list[Leaf]:
    """The launcher's settings the script exports: the device list it counts (the first of VISIBLE it would read,
    PADDLE_XCCL_BACKEND's own first) and PADDLE_NNODES, each at the line that assigns it."""
    backend = env.values.get("PADDLE_XCCL_BACKEND")
    first = (BACKEND_DEVICES.get(backend, f"{backend.upper()}_VISIBLE_DEVICES"),) if isinstance(backend, str) else ()
    out = []
    for name in (*first, *VISIBLE):
        if name in env.values:
            value = env.values[name]
            if value == "all":
                value = Unexpanded("all", "all the machine's devices: their count is known only there")
            out.append(Leaf(name, value, env.where.get(name, Location())))
            break
    if "PADDLE_NNODES" in env.values:
        out.append(Leaf("PADDLE_NNODES", env.values["PADDLE_NNODES"], env.where.get("PADDLE_NNODES", Location())))
    return out


def _flag(tokens: list[_Token], i: int) -> tuple[str, Any, int]:
    """The flag at tokens[i] (`--name value`, `--name=value` or a bare `--name`): name, value, next index."""
    text = tokens[i].text
    assert isinstance(text, str)
    if "=" in text:
        name, value = text[2:].split("=", 1)
        return name, value, i + 1
    nxt = tokens[i + 1].text if i + 1 < len(tokens) else None
    if nxt is None or (isinstance(nxt, str) and (nxt.startswith("--") or nxt.endswith(".py"))):
        return text[2:], True, i + 1
    return text[2:], nxt, i + 2


def names(text: str, source: str) -> list[str]:
    """The flag names and argument files of the script's commands (to tell PaddleNLP from PaddleFormers)."""
    return [t.text for c in commands(text, source) for t in c.tokens if isinstance(t.text, str)]


def leaves(text: str, source: str, command: int | None = None) -> list[Leaf]:
    """The chosen command's launcher options, then its arguments: the argument file's, each overridden by the flag of
    the same name, then the flags the file does not have; the other commands, one leaf each."""
    found = commands(text, source)
    if not found:
        raise StrategyError(f"no `python -m {LAUNCH}` command in this script", source=source)
    k = 1 if command is None else command
    if not 1 <= k <= len(found):
        raise StrategyError(f"--command {k}: the script has {len(found)} training command(s) "
                            f"({', '.join(f'{i} at line {c.where.line}' for i, c in enumerate(found, 1))})",
                            source=source)
    chosen = found[k - 1]
    tokens = chosen.tokens
    out: list[Leaf] = []
    i = 0
    while i < len(tokens) and not _text(tokens[i]).endswith(".py"):
        if _text(tokens[i]).startswith("--"):
            name, value, j = _flag(tokens, i)
            out.append(Leaf(name, value, tokens[i].where))
            i = j
        else:
            i += 1
    program = tokens[i].text if i < len(tokens) else "?"
    out.insert(0, Leaf("command", f"{k} of {len(found)}: {program}", chosen.where))
    given = {leaf.key for leaf in out}
    out += [leaf for leaf in chosen.environment  # (the command's own --devices / --nnodes win)
            if given.isdisjoint(_FLAGS_FOR.get(leaf.key, ("devices", "gpus")))]
    flags: dict[str, Leaf] = {}
    from_file: list[Leaf] = []
    i += 1
    while i < len(tokens):
        text_ = tokens[i].text
        if isinstance(text_, str) and text_.startswith("--"):
            where = tokens[i].where
            name, value, i = _flag(tokens, i)
            flags[name] = Leaf(name, value, where)
            continue
        if isinstance(text_, str) and _FILE.search(text_):
            named = _find(text_, source)
            if named is None:
                out.append(Leaf("argument_file", Unexpanded(text_, f"{text_} is neither beside the script nor in "
                                                                   "the working directory; import it on its own"),
                                tokens[i].where))
            else:
                out.append(Leaf("argument_file", text_, tokens[i].where))
                from_file += arguments(decode(read_bytes(named), named), named)
        i += 1
    out += with_words(_combined(from_file, flags))
    for n, other in enumerate(found, 1):
        if n != k:
            out.append(Leaf(f"other_command.{n}", f"line {other.where.line}", other.where))
    return out


def _combined(from_file: list[Leaf], flags: dict[str, Leaf]) -> list[Leaf]:
    """The file's arguments in its order, each one a flag replaces shown as the file said it (`Overridden`) and
    followed by that flag, then the flags the file does not have."""
    out: list[Leaf] = []
    for leaf in from_file:
        flag = flags.pop(leaf.key, None)
        if flag is None:
            out.append(leaf)
            continue
        at = flag.where.prefix()
        by = f"the flag --{flag.key} {show(flag.value)}" + (f" at {at}" if at else "")
        out += [leaf._replace(value=Overridden(leaf.value, by)), flag]
    return out + list(flags.values())


def _text(token: _Token) -> str:
    """The token's text, or "" where the script leaves it unknown."""
    return token.text if isinstance(token.text, str) else ""


def _find(path: str, source: str) -> str | None:
    for base in (os.path.dirname(source), os.getcwd()):
        candidate = os.path.join(base, path)
        if os.path.isfile(candidate):
            return candidate
    return None


def file_leaves(text_: str, source: str) -> list[Leaf]:
    """A file of arguments (JSON or YAML), or the chosen command of a launch script."""
    if source.lower().endswith((".json", ".yaml", ".yml")):
        return with_words(arguments(text_, source))
    return leaves(text_, source)
