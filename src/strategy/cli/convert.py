"""`convert` and `diff`: move a strategy between formats losslessly, and compare two by effective value."""

from __future__ import annotations

import argparse
import sys

from google.protobuf.message import Message

from ..schema import rules
from .. import schema
from ..formats.io import to_dict
from .common import add_format, add_policy, add_set, read, show_value, subparser, write

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    c = subparser(
        sub, "convert", "convert between prototxt, JSON, YAML and binary",
        "Read IN and write OUT in another format (from the extensions, or --from/--to). Lossless. OUT is\n"
        "written atomically: on any error an existing OUT is left untouched and no temporary file remains.",
        "strategy convert paddle_strategy.prototxt strategy.yaml",
    )
    c.add_argument("input", metavar="IN", help="input file, '-' for standard input")
    c.add_argument("output", metavar="OUT", help="output file, '-' for standard output")
    add_format(c, "--from", "IN")
    add_format(c, "--to", "OUT")
    add_policy(c)
    add_set(c)
    c.set_defaults(run=_convert)

    d = subparser(
        sub, "diff", "compare two strategies field by field",
        "Print the fields whose effective value differs (a field set to its default equals an unset one),\n"
        "by dotted path, with both values. Like diff(1): exit 0 if the same, 1 if different, 2 if either\n"
        "input is invalid. Files that break a `requires` rule are compared too (and that is said).",
        "strategy diff old.prototxt new.yaml",
    )
    d.add_argument("a", metavar="A")
    d.add_argument("b", metavar="B")
    d.set_defaults(run=_diff, invalid_exit=2)


def _convert(args: argparse.Namespace) -> int:
    s = read(args.input, args.from_, overrides=args.overrides, policy=args.policy)
    write(s, args.output, args.to)
    return 0


def _effective(msg: Message, prefix: str = "") -> dict[str, object]:
    """Every leaf field's value, defaults included, by dotted path."""
    out: dict[str, object] = {}
    for field in msg.DESCRIPTOR.fields:
        value = getattr(msg, field.name)
        if schema.is_message(field) and field.is_repeated:
            out[prefix + field.name] = [to_dict(item) for item in value]
        elif schema.is_message(field):
            out.update(_effective(value, f"{prefix}{field.name}."))
        else:
            out[prefix + field.name] = list(value) if field.is_repeated else value
    return out


def _diff(args: argparse.Namespace) -> int:
    a, b = read(args.a, requires=False), read(args.b, requires=False)
    for path, s in ((args.a, a), (args.b, b)):
        for dependent, needed in rules.requires_violations(s):
            print(f"{path}: note: {dependent} requires {needed}: true (compared anyway)", file=sys.stderr)
    left, right = _effective(a), _effective(b)
    changed = [p for p in left if left[p] != right[p]]
    for path in changed:
        print(f"{path}: {show_value(left[path])} -> {show_value(right[path])}")
    return 1 if changed else 0


