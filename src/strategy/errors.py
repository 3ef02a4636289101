"""The two exception types users see: StrategyError for bad input, StrategyWarning for lenient fallbacks.

Both point at the place (`source:line:col`) and the dotted field path, so a user can jump to the fix.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): a NamedTuple's string annotations are
# compiled at class creation, which every `strategy` command pays at start.

import warnings
from typing import NamedTuple

__all__ = ["Location", "StrategyError", "StrategyWarning", "warn"]


class Location(NamedTuple):
    """Where a value came from: a file (or `<string>`, `--set ...`) and a 1-based line and column.

    A NamedTuple, not a dataclass: one is made per field parsed, and tuples are cheap to build.
    """

    source: str | None = None
    line: int | None = None
    column: int | None = None

    def prefix(self) -> str:
        """`source:line:col` with the unknown parts left out; empty when nothing is known."""
        parts = [str(p) for p in (self.source, self.line, self.column) if p is not None]
        return ":".join(parts)


class StrategyError(ValueError):
    """A strategy file, dict or override is invalid.

    Attributes:
        message: the bare message, without the location prefix.
        source: the file name (or `<string>`, `<dict>`, `--set ...`), None when unknown.
        line, column: 1-based position of the offending text, None when unknown.
        field: the dotted field path (`hybrid_configs.mp_degree`), None when not about one field.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.column = column
        self.field = field
        super().__init__(self.__str__())

    @classmethod
    def at(cls, where: Location | None, message: str, *, field: str | None = None) -> "StrategyError":
        """Build an error located at `where`."""
        where = where or Location()
        return cls(message, source=where.source, line=where.line, column=where.column, field=field)

    @property
    def location(self) -> Location:
        return Location(self.source, self.line, self.column)

    def __str__(self) -> str:
        prefix = self.location.prefix()
        return f"{prefix}: {self.message}" if prefix else self.message

    def __reduce__(self):  # keep the attributes across pickling (multiprocessing re-raises it)
        kwargs = dict(source=self.source, line=self.line, column=self.column, field=self.field)
        return (_rebuild, (self.message, kwargs))


def _rebuild(message: str, kwargs: dict) -> StrategyError:
    return StrategyError(message, **kwargs)


class StrategyWarning(UserWarning):
    """A problem tolerated under `policy="warn"`, or a legacy setting that is no longer read."""


def warn(where: Location | None, message: str, *, stacklevel: int = 3) -> None:
    """Emit a StrategyWarning prefixed with the location, like StrategyError's `str()`."""
    prefix = where.prefix() if where else ""
    warnings.warn(f"{prefix}: {message}" if prefix else message, StrategyWarning, stacklevel=stacklevel)
