"""What the subcommands share: reading (files or stdin), atomic writing (files or stdout), common flags."""

from __future__ import annotations

import argparse
import math
import os
import sys
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import StrategyError
from ..formats.codec import FORMATS, format_for, serialize
from ..formats.io import load_bytes, problems, read_bytes
from ..schema.rules import POLICIES
from ..schema.support import show_scalar

if TYPE_CHECKING:
    from .._generated.distributed_strategy_pb2 import DistributedStrategy

__all__ = ["add_format", "add_params", "add_policy", "add_set", "add_world_size", "read", "read_all_problems", "show_value", "subparser", "warn_to_stderr", "write"]

STDIO = "-"


def show_value(value: object) -> str:
    """A value as a strategy file spells it: true/false, quoted strings (as `explain.show_value`)."""
    return show_scalar(None, value)


def _columns() -> int:
    """shutil.get_terminal_size().columns, without importing shutil (and lzma, bz2 and zlib with it) at every start:
    argparse makes a formatter for each argument it adds."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter (descriptions kept as written), sized as argparse sizes it."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


def subparser(sub: argparse._SubParsersAction, name: str, summary: str, description: str, example: str) -> argparse.ArgumentParser:
    return sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=f"example:\n  {example}",
        formatter_class=HelpFormatter,
    )


def add_policy(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--policy", choices=POLICIES, default="strict",
        help="'warn' accepts what Paddle silently tolerates (unknown keys, flags whose requirement is off), with warnings",
    )


def add_set(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="a.b.c=V",
                   help="override a field after the file is read (repeatable); a repeated field takes a list, "
                        "a.b=[x, y], replacing the file's items")


def positive(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def add_world_size(p: argparse.ArgumentParser) -> None:
    p.add_argument("--world-size", type=positive, metavar="N", help="number of ranks (default: WORLD_SIZE, else the degrees' product)")


_SCALE = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def _count(text: str) -> float:
    """A number of parameters: 7e9, 7000000000, 7B, 1.3b, 125M, 350k."""
    suffix = text[-1:].lower()
    scale = _SCALE.get(suffix, 1.0)
    try:
        value = float(text[:-1] if suffix in _SCALE else text) * scale
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of parameters such as 7e9, 7B or 125M, got {text!r}")
    return value


def add_params(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", type=_count, metavar="P",
                   help="number of model parameters (7e9, 7B, 125M): print each rank's model-state memory")


def add_format(p: argparse.ArgumentParser, flag: str, what: str) -> None:
    """--from or --to; the value lands in args.from_ or args.to."""
    dest = flag.lstrip("-") + ("_" if flag == "--from" else "")
    p.add_argument(flag, dest=dest, choices=FORMATS, help=f"format of {what} (default: from the extension; prototxt for -)")


def _format(path: str, fmt: str | None) -> str:
    if fmt is not None or path != STDIO:
        return format_for(path, fmt)
    return "prototxt"


def _raw(path: str, fmt: str | None) -> tuple[bytes, str, str]:
    """(bytes, format, source name) of a file or, for "-", standard input."""
    fmt_ = _format(path, fmt)
    if path == STDIO:
        return sys.stdin.buffer.read(), fmt_, "<stdin>"
    return read_bytes(path), fmt_, path


def read(
    path: str, fmt: str | None = None, *, overrides: Iterable[str] = (), policy: str = "strict", requires: bool = True
) -> DistributedStrategy:
    """Load a strategy from a file or, for "-", standard input."""
    return load_bytes(*_raw(path, fmt), overrides, policy, requires=requires)


def read_all_problems(
    path: str, fmt: str | None, *, overrides: Iterable[str], policy: str
) -> tuple[DistributedStrategy | None, list[StrategyError]]:
    """The strategy (when it parsed) and every problem found in it, for `validate`."""
    try:
        data, fmt_, source = _raw(path, fmt)
    except StrategyError as e:
        return None, [e]
    return problems(data, fmt_, source, overrides, policy)


def write(s: DistributedStrategy, path: str, fmt: str | None = None) -> None:
    """Write to a file atomically, or to standard output for "-"."""
    fmt_ = _format(path, fmt)
    data = serialize(s, fmt_)
    raw = data if isinstance(data, bytes) else data.encode("utf-8")
    if path == STDIO:
        sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
        return
    try:
        from ..atomic import write_atomic  # only commands that write pay for it

        write_atomic(path, raw)
    except OSError as e:
        raise StrategyError(f"cannot write the file: {e.strerror or e}", source=path) from None


def warn_to_stderr() -> None:
    """Show each StrategyWarning once, as `strategy: warning: ...`, without Python's source line."""
    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ARG001
        print(f"strategy: warning: {message}", file=sys.stderr)

    warnings.showwarning = show
    warnings.simplefilter("default")


