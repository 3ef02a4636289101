"""The `strategy` command line: check strategy files and show what they resolve to.

Exit codes: 0 success, 1 invalid input, 2 usage error. Errors print as `file:line:col: message`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
import warnings
from collections.abc import Sequence

from . import schema
from .errors import StrategyError
from .io import load
from .resolution import Resolved, resolve
from .rules import POLICIES

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strategy", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--world-size", type=int, metavar="N", help="number of ranks (default: WORLD_SIZE, else the degrees' product)")
        p.add_argument("--policy", choices=POLICIES, default="strict", help="'warn' tolerates what Paddle silently accepts")
        p.add_argument("--set", dest="overrides", action="append", default=[], metavar="a.b.c=V", help="override a field")

    v = sub.add_parser(
        "validate",
        help="check strategy files",
        description="Check each file: syntax, field names and types, rules, and the degrees against --world-size.",
        epilog="example: strategy validate tp2.prototxt dp2_tp2.yaml --world-size 4",
    )
    v.add_argument("files", nargs="+", metavar="FILE")
    common(v)
    r = sub.add_parser(
        "resolve",
        help="print the effective settings",
        description="Print the settings a run would use: degrees, effective mp flags and notes on what has no effect.",
        epilog="example: strategy resolve tp2.prototxt --world-size 2\n\nfields:\n" + _field_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("file", metavar="FILE")
    common(r)
    return parser


def _field_help() -> str:
    """Every field's path and its documentation, from the comments in the .proto."""
    out = []
    for path, field in schema.walk():
        value = field.default_value
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        default = "" if schema.is_message(field) else f" (default {shown})"
        out.append(f"  {path}{default}\n" + textwrap.fill(schema.doc(field), 96, initial_indent="      ", subsequent_indent="      "))
    return "\n".join(out)


def format_resolved(resolved: Resolved) -> str:
    """A plain `name: value` listing of the effective settings and notes."""
    lines = []
    for f in dataclasses.fields(resolved):
        value = getattr(resolved, f.name)
        if f.name == "mp":
            lines += [f"mp.{k}: {v}" for k, v in dataclasses.asdict(value).items()]
        elif f.name != "notes":
            lines.append(f"{f.name}: {value}")
    lines += [f"note: {n}" for n in resolved.notes]
    return "\n".join(lines)


def _check(path: str, args: argparse.Namespace) -> Resolved:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        return resolve(load(path, overrides=args.overrides, policy=args.policy), world_size=args.world_size, policy=args.policy)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "validate":
        failed = 0
        for path in args.files:
            try:
                _check(path, args)
                print(f"{path}: ok")
            except StrategyError as e:
                print(e, file=sys.stderr)
                failed += 1
        return 1 if failed else 0
    try:
        print(format_resolved(_check(args.file, args)))
    except StrategyError as e:
        print(e, file=sys.stderr)
        return 1
    return 0
