"""The `strategy` command line: convert, validate, explain, diff, schema, defaults, migrate-env, fmt.

Exit codes: 0 success, 1 invalid input (the file is wrong, missing or unreadable), 2 usage error
(`diff` uses 1 for "different" and 2 for invalid input, like diff(1)). Errors go to stderr as
`file:line:col: message`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..errors import StrategyError
from . import check, convert, fmt, generate
from .common import warn_to_stderr

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="strategy",
        description="Check, convert and explain distributed training strategy files (PaddlePaddle fleet compatible).",
        epilog="'-' means standard input/output. Run 'strategy COMMAND --help' for a command's options and an example.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (convert, check, generate, fmt):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
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
