"""`validate`, `resolve` and `explain`: is a file right, and what will a run actually do with it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..errors import StrategyError
from .common import _count, add_format, add_params, add_policy, add_set, add_world_size, read, read_all_problems, show_value, subparser

if TYPE_CHECKING:
    from ..resolution.resolved import Resolved

__all__ = ["format_resolved", "register"]

# Each command imports what it runs when it runs (resolution, explain, the field docs): registering all of them
# at start-up then costs only argparse.


def register(sub: argparse._SubParsersAction) -> None:
    v = subparser(
        sub, "validate", "check strategy files",
        "Check every file: syntax, field names and types, value ranges, `requires` rules, and the degrees\n"
        "against --world-size. Each problem is reported as file:line:col: message; exit 1 if any file is invalid.",
        "strategy validate tp2.prototxt dp2_tp2.yaml --world-size 4",
    )
    v.add_argument("files", nargs="+", metavar="FILE", help="strategy files ('-' reads standard input)")
    add_format(v, "--from", "the files")
    add_world_size(v)
    add_policy(v)
    add_set(v)
    v.set_defaults(run=_validate)

    r = subparser(
        sub, "resolve", "print the effective settings",
        "Print the settings a run would use: degrees, effective mp flags and notes on what has no effect.\n\n"
        "fields:\n{fields}",
        "strategy resolve tp2.prototxt --world-size 2",
    )
    # Every field's documentation is long to build: only when the help is asked for, not on every run.
    plain_help = r.format_help
    r.format_help = lambda: plain_help().replace("{fields}", _field_help(), 1)  # type: ignore[method-assign]
    r.add_argument("file", metavar="FILE")
    add_format(r, "--from", "the file")
    add_world_size(r)
    add_policy(r)
    add_set(r)
    r.set_defaults(run=_resolve)

    e = subparser(
        sub, "explain", "what a run does with a file: the fields that matter, the groups, the pipeline, the memory",
        "The fields the file sets, the degrees inferred and the settings that decide how an axis that is on\n"
        "runs (sharding_configs.stage while sharding_degree > 1): value, set or default, and what the run\n"
        "does with it (and why not); then the notes, which ranks form the groups of each axis above 1 in the\n"
        "strategy's order (also axes not implemented yet, marked), the pipeline's schedule and stages, and\n"
        "with --params each rank's model-state memory (parameters, gradients, Adam state) by ZeRO's\n"
        "formulas, next to one process. Within 100 columns. --all lists every field; --json prints all of\n"
        "it as one JSON document. A file that breaks a `requires` rule is still explained; the rule is shown.",
        "strategy explain tp2.prototxt --world-size 4 --params 7e9",
    )
    e.add_argument("file", metavar="FILE")
    add_format(e, "--from", "the file")
    add_world_size(e)
    add_params(e)
    e.add_argument("--expert-params", type=_count, metavar="E",
                   help="the experts' share of --params (7e9, 47B): each rank's memory in dense and expert rows, "
                        "experts divided by ep")
    add_set(e)
    shown = e.add_mutually_exclusive_group()
    shown.add_argument("--all", action="store_true", dest="all_fields",
                       help="every field the file sets and every implemented one, at its default too")
    shown.add_argument("--json", action="store_true", help="all of it (every field) as one JSON document")
    e.set_defaults(run=_explain)


def _field_help() -> str:
    """Every field's path, default and documentation, from the comments in the .proto."""
    import textwrap

    from .. import schema
    from ..schema import support

    out = []
    for path, field in schema.walk():
        default = "" if schema.is_message(field) or field.is_repeated else f" (default {support.show_scalar(field, field.default_value)})"
        out.append(f"  {path}{default}\n" + textwrap.fill(schema.doc(field), 96, initial_indent="      ", subsequent_indent="      "))
    return "\n".join(out)



def format_resolved(resolved: Resolved) -> str:
    """A plain `name: value` listing of the effective settings and notes."""
    import dataclasses

    lines = []
    for f in dataclasses.fields(resolved):
        value = getattr(resolved, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):  # mp, sharding: one line per setting
            lines += [f"{f.name}.{k}: {show_value(v)}" for k, v in dataclasses.asdict(value).items()]
        elif f.name != "notes":
            lines.append(f"{f.name}: {value}")
    lines += [f"note: {n}" for n in resolved.notes]
    return "\n".join(lines)


def _resolved(path: str, args: argparse.Namespace) -> Resolved:
    """Load (with the rules checked and warned once, there) and resolve; errors name the file."""
    from ..resolution.resolver import resolve_with_reasons

    s = read(path, args.from_, overrides=args.overrides, policy=args.policy)
    with _naming(path):
        return resolve_with_reasons(s, world_size=args.world_size, policy=args.policy, requires=False)[0]


@contextmanager
def _naming(path: str) -> Iterator[None]:
    """Errors from resolution know the field, not the file: add it."""
    try:
        yield
    except StrategyError as e:
        if e.source is None:
            e.source = "<stdin>" if path == "-" else path
        raise


def _validate(args: argparse.Namespace) -> int:
    """Every file, and every problem in each (not just the first), in file order."""
    from ..resolution.resolver import check

    failed = 0
    for path in args.files:
        s, found = read_all_problems(path, args.from_, overrides=args.overrides, policy=args.policy)
        if s is not None and not found:
            try:
                with _naming(path):
                    check(s, world_size=args.world_size, policy=args.policy, requires=False)
            except StrategyError as e:
                found.append(e)
        for problem in sorted(found, key=lambda p: (p.line is None, p.line or 0, p.column or 0)):
            print(problem, file=sys.stderr)
        if found:
            failed += 1
        else:
            print(f"{path}: ok")
    return 1 if failed else 0


def _resolve(args: argparse.Namespace) -> int:
    print(format_resolved(_resolved(args.file, args)))
    return 0


def _explain(args: argparse.Namespace) -> int:
    from ..resolution.explain import explanation

    s = read(args.file, args.from_, overrides=args.overrides, requires=False)
    with _naming(args.file):
        if args.expert_params is not None and not (args.params and 0 < args.expert_params < args.params):
            print("strategy explain: error: --expert-params is the experts' share of --params: give --params, and "
                  "--expert-params below it", file=sys.stderr)
            return 2
        found = explanation(s, world_size=args.world_size, params=args.params, expert_params=args.expert_params)
    if args.json:
        import json

        print(json.dumps(found.as_dict(), indent=2, ensure_ascii=False))
    else:
        print(found.text(all_fields=args.all_fields))
    return 0
