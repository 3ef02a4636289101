"""The `strategy` command line: convert, validate, explain, diff, schema, docs, defaults, migrate-env, fmt, import, plan,
and commands other packages register (`checkpoint`, from parallel).

Exit codes: 0 success, 1 invalid input (the file is wrong, missing or unreadable), 2 usage error
(`diff` uses 1 for "different" and 2 for invalid input, like diff(1)). Errors go to stderr as
`file:line:col: message`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..errors import StrategyError
from .common import HelpFormatter, warn_to_stderr

__all__ = ["main"]

# The modules of this package that register commands, in the order `strategy --help` lists them.
_MODULES = ("convert", "check", "generate", "fmt", "import_cmd", "plan_cmd", "tune_cmd")
# Each built-in command's module: a run imports and registers only the one it needs (argparse's parsers and the
# modules' imports cost more than the command itself); help and unknown commands register them all.
_BUILTIN = {"convert": "convert", "diff": "convert", "validate": "check", "resolve": "check", "explain": "check",
            "schema": "generate", "docs": "generate", "defaults": "generate", "migrate-env": "generate", "fmt": "fmt",
            "import": "import_cmd", "plan": "plan_cmd", "tune": "tune_cmd"}


def _parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="strategy",
        description="Check, convert and explain distributed training strategy files (PaddlePaddle fleet compatible).",
        epilog="'-' means standard input/output. Run 'strategy COMMAND --help' for a command's options and an example.",
        formatter_class=HelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    command = next((a for a in argv if not a.startswith("-")), None)
    for name in (_BUILTIN[command],) if command in _BUILTIN else _MODULES:
        importlib.import_module(f".{name}", __name__).register(sub)
    if command not in _BUILTIN:  # another package's command (`checkpoint`, from parallel), or help listing them all
        _register_plugins(sub)
    return parser


def _register_plugins(sub: argparse._SubParsersAction) -> None:
    """Commands other packages add through the `strategy.commands` entry point; looked up only when asked
    for, so the built-in commands start quickly and this package never imports what they need (torch)."""
    from importlib.metadata import entry_points

    for entry in entry_points(group="strategy.commands"):
        try:
            entry.load()(sub)
        except Exception as e:  # noqa: BLE001 - a broken optional dependency must not break `strategy --help`
            print(f"strategy: command {entry.name!r} is unavailable: {e}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser(argv).parse_args(argv)
    warn_to_stderr()
    try:
        return args.run(args)
    except StrategyError as e:
        print(e, file=sys.stderr)
        return getattr(args, "invalid_exit", 1)
    except BrokenPipeError:
        return 1
    except KeyboardInterrupt:
        return 130
