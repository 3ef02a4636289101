"""The public load/dump entry points: files, strings, dicts, with overrides and strict checks."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from typing import Any

from ..schema import rules, support
from .._generated.distributed_strategy_pb2 import DistributedStrategy
from .builder import build
from ..errors import StrategyError
from .codec import check_format, format_for, parse, serialize, to_plain_dict
from .limits import MAX_BYTES
from .tree import from_python

__all__ = ["dump", "dumps", "from_dict", "load", "loads", "to_dict"]


def load(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    overrides: Iterable[str] = (),
    policy: str = "strict",
) -> DistributedStrategy:
    """Read a strategy file; the format comes from `format` or the extension.

    Args:
        overrides: `a.b.c=value` strings applied after the file, typed by the schema.
        policy: "strict" raises on unknown fields and broken `requires` rules; "warn" warns and goes on.

    Raises:
        StrategyError: the file is missing, unreadable or invalid, located at `file:line:col`.

    Example::

        s = strategy.load("tp.prototxt", overrides=["hybrid_configs.mp_degree=4"])
    """
    source = os.fspath(path)
    fmt = format_for(source, format)
    return _load(read_bytes(source), fmt, source, overrides, policy)


def read_bytes(source: str) -> bytes:
    """A file's bytes, at most one past the size limit; a StrategyError naming it when it cannot be read."""
    try:
        # os-level calls, not open(): no buffered-reader objects for a file read once (half the time).
        fd = os.open(source, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
        try:
            st = os.fstat(fd)
            # Read at most one byte past the limit (a small buffer for small files); _load reports the excess.
            regular = stat.S_ISREG(st.st_mode)
            want = min(st.st_size, MAX_BYTES) + 1 if regular else MAX_BYTES + 1
            data = os.read(fd, want)
            if not regular or len(data) == want:  # a pipe, or a file that grew: read on to the end, or the limit
                parts = [data]
                want -= len(data)
                while want > 0 and (chunk := os.read(fd, want)):
                    parts.append(chunk)
                    want -= len(chunk)
                data = b"".join(parts)
        finally:
            os.close(fd)
    except OSError as e:
        raise StrategyError(f"cannot read the file: {e.strerror or e}", source=source) from None
    if len(data) > MAX_BYTES:  # refuse here, so no caller (fmt) ever works on a truncated file
        raise _too_large(source)
    return data


def loads(
    data: str | bytes,
    *,
    format: str = "prototxt",
    overrides: Iterable[str] = (),
    policy: str = "strict",
) -> DistributedStrategy:
    """Parse a strategy from a string (bytes for binary); errors name the source `<string>`."""
    return _load(data, check_format(format, "<string>"), "<string>", overrides, policy)


def _load(
    data: str | bytes, fmt: str, source: str, overrides: Iterable[str], policy: str, *, requires: bool = True,
    errors: list[StrategyError] | None = None,
) -> DistributedStrategy:
    """Parse and check one document; `requires=False` (diff, explain) leaves `requires` rules to the caller. With
    `errors`, schema, override and rule problems are collected there instead of raised (`problems`)."""
    rules.check_policy(policy)
    if len(data) > MAX_BYTES:
        raise _too_large(source)
    msg, positions, broken = parse(data, fmt, source=source, policy=policy, errors=errors)
    if overrides:
        from . import overrides as _overrides  # only runs with --set pay for it

        positions.update(_overrides.apply(msg, overrides, policy=policy, errors=errors))
        broken = None  # the overrides changed it: check it all
    if broken is None:
        rules.check(msg, positions, policy=policy, source=source, requires=requires, errors=errors)
    else:  # checked as it was read
        rules.report(broken, positions, policy=policy, source=source, requires=requires, errors=errors)
    support.remember(msg, positions, source, checked=policy if requires and not errors else None)
    return msg


load_bytes = _load  # for the CLI, which also reads standard input


def _too_large(source: str) -> StrategyError:
    return StrategyError(f"larger than {MAX_BYTES} bytes; a strategy file is a few hundred", source=source)


def problems(
    data: str | bytes, fmt: str, source: str, overrides: Iterable[str], policy: str
) -> tuple[DistributedStrategy | None, list[StrategyError]]:
    """Every problem in one document (not just the first), and the message when it parsed.

    A syntax error stops the parse, so it is reported alone; schema, override and rule problems are all
    collected. Used by `strategy validate`.
    """
    errors: list[StrategyError] = []
    try:
        msg = _load(data, fmt, source, overrides, policy, errors=errors)
    except StrategyError as e:
        return None, errors + [e]
    return msg, errors


def from_dict(d: Mapping[str, Any], *, policy: str = "strict") -> DistributedStrategy:
    """Build a strategy from nested dicts with proto field names; `d` is never modified."""
    rules.check_policy(policy)
    msg = DistributedStrategy()
    positions = build(msg, from_python(d), policy=policy)
    rules.check(msg, positions, policy=policy, source="<dict>")
    support.remember(msg, positions, "<dict>", checked=policy)
    return msg


def to_dict(s: DistributedStrategy) -> dict[str, Any]:
    """The fields that are set, as nested dicts with proto field names."""
    return to_plain_dict(s)


def dumps(s: DistributedStrategy, *, format: str = "prototxt") -> str | bytes:
    """The strategy as text (bytes for "binary"); only fields that are set are written."""
    return serialize(s, format)


def dump(s: DistributedStrategy, path: str | os.PathLike[str], *, format: str | None = None) -> None:
    """Write atomically (temp file + rename): an existing file is replaced whole or left untouched."""
    from ..atomic import write_atomic

    data = serialize(s, format_for(path, format))
    write_atomic(path, data if isinstance(data, bytes) else data.encode("utf-8"))
