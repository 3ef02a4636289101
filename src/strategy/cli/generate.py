"""`schema`, `docs`, `defaults` and `migrate-env`: documents generated from the schema itself."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from .common import add_format, read, subparser, write

if TYPE_CHECKING:
    from google.protobuf.message import Message

__all__ = ["register"]

_ON = ("1", "true")


def register(sub: argparse._SubParsersAction) -> None:
    s = subparser(
        sub, "schema", "print a JSON Schema for strategy files",
        "A JSON Schema (draft 2020-12) generated from the proto: types, ranges, allowed values, defaults,\n"
        "the field comments as descriptions, `requires` rules, and no unknown keys. Point your editor's\n"
        "YAML/JSON support at it to complete and check strategy files.",
        "strategy schema > strategy.schema.json",
    )
    s.add_argument("--format", choices=["json-schema"], default="json-schema")
    s.set_defaults(run=_schema)

    r = subparser(
        sub, "docs", "print the reference page of every message and field",
        "Markdown for every message and field of the schema: number, type, default, support status (with\n"
        "the hint of what to use instead) and the field's documentation. docs/strategy-reference.md is this.",
        "strategy docs > docs/strategy-reference.md",
    )
    r.add_argument("--imports", action="store_true",
                   help="print the mapping table of `strategy import` instead (docs/importing.md's, from the importers' rules)")
    r.set_defaults(run=_docs)

    d = subparser(
        sub, "defaults", "print the full default strategy",
        "The default strategy with every field spelled out (prototxt unless --to).",
        "strategy defaults --to yaml",
    )
    add_format(d, "--to", "the output")
    d.set_defaults(run=_defaults)

    m = subparser(
        sub, "migrate-env", "turn legacy Flags_* environment variables into a strategy file",
        "Read the environment variables older releases used instead of MpConfig fields\n"
        "({legacy_env}; '1' or 'true' is on,\n"
        "case-insensitive) and print a strategy that sets every matching field, the ones that are off\n"
        "included. --merge FILE sets them in an existing strategy instead.",
        "Flags_mp_aysnc_allreduce=1 strategy migrate-env --merge tp.prototxt",
    )
    add_format(m, "--to", "the output")
    m.add_argument("--merge", metavar="FILE", help="strategy to set the fields in (its other fields are kept)")
    m.set_defaults(run=_migrate_env)
    # The variables' names come from a walk of the whole schema: only when the help is shown, not at every start.
    plain_help = m.format_help
    m.format_help = lambda: plain_help().replace("{legacy_env}", _legacy_env_names(), 1)  # type: ignore[method-assign]


def _legacy_env_names() -> str:
    from .. import schema

    return ", ".join(env for _, _, env in schema.fields_with("legacy_env"))


def _schema(args: argparse.Namespace) -> int:
    import json

    from ..schema.json_schema import json_schema  # only for this command

    print(json.dumps(json_schema(), indent=2))
    return 0


def _docs(args: argparse.Namespace) -> int:
    if args.imports:
        from ..importers.table import markdown

        sys.stdout.write(markdown())
        return 0
    from ..schema.reference import reference

    sys.stdout.write(reference())
    return 0


def _fill_defaults(msg: Message) -> None:
    from .. import schema

    for field in msg.DESCRIPTOR.fields:
        if schema.is_message(field) and not field.is_repeated:
            _fill_defaults(getattr(msg, field.name))
        elif not field.is_repeated:
            setattr(msg, field.name, field.default_value)


def _defaults(args: argparse.Namespace) -> int:
    from .._generated.distributed_strategy_pb2 import DistributedStrategy

    s = DistributedStrategy()
    _fill_defaults(s)
    write(s, "-", args.to or "prototxt")
    return 0


def _migrate_env(args: argparse.Namespace) -> int:
    from ..schema import rules
    from .. import schema
    from .._generated.distributed_strategy_pb2 import DistributedStrategy

    s = read(args.merge, requires=False) if args.merge else DistributedStrategy()
    for path, _, env in schema.fields_with("legacy_env"):
        *parents, name = path.split(".")
        owner = s
        for parent in parents:
            owner = getattr(owner, parent)
        setattr(owner, name, os.environ.get(env, "").strip().lower() in _ON)
    for dependent, needed in rules.requires_violations(s):
        print(f"strategy: warning: {dependent} requires {needed}: true; Paddle turned it off silently, "
              "this project rejects it under --policy strict", file=sys.stderr)
    write(s, "-", args.to or "prototxt")
    return 0
