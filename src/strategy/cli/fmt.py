"""`fmt`: rewrite text-format strategy files in canonical layout, keeping every comment."""

from __future__ import annotations

import argparse
import sys

from ..atomic import write_atomic
from ..errors import StrategyError
from ..formats.codec import decode
from ..formats.io import read_bytes
from .common import subparser

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    f = subparser(
        sub, "fmt", "format prototxt files canonically, in place",
        "Rewrite each text-format file in canonical layout (two-space indent, one field per line,\n"
        "`name: value`, `name {`), atomically. Comments stay where they stand. With --check nothing is\n"
        "written: the files that would change are listed and the exit code is 1 (for pre-commit hooks).",
        "strategy fmt --check examples/strategies/*.prototxt",
    )
    f.add_argument("files", nargs="+", metavar="FILE")
    f.add_argument("--check", action="store_true", help="only report files that are not formatted")
    f.set_defaults(run=_fmt)


def _fmt(args: argparse.Namespace) -> int:
    status = 0
    for path in args.files:
        try:
            text = decode(read_bytes(path), path)
            formatted = _format_text(text, path)
        except StrategyError as e:
            print(e, file=sys.stderr)
            status = 1
            continue
        if formatted == text:
            continue
        if args.check:
            print(f"{path}: would reformat")
            status = 1
            continue
        try:
            write_atomic(path, formatted.encode("utf-8"))
        except OSError as e:
            print(f"{path}: cannot write the file: {e.strerror or e}", file=sys.stderr)
            status = 1
            continue
        print(f"{path}: reformatted")
    return status


def _format_text(text: str, path: str) -> str:
    from ..formats.text.fmt import format_text  # only when formatting: every other command starts without it

    return format_text(text, path)
