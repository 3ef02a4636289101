"""What resolution says about a setting, kept as data (field path, kind, reason) until it is printed: `explain` reads
the kind, users read the sentence. A `Note` is the sentence itself (a str), carrying the data beside it."""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["Effect", "Kind", "NO_EFFECT_KINDS", "Note"]


class Kind(enum.Enum):
    """What a note or an effect says of a field, spelled as `explain` prints it."""

    NO_EFFECT = "no effect"  # set, but its message does not take effect here (pp_configs while pp_degree is 1)
    NO_EFFECT_IN_PYTORCH = "no effect in PyTorch"  # a Paddle setting with no counterpart to act on
    FALSE_HAS_NO_EFFECT = "always on here (false has no effect)"  # an (always_on) flag set to false
    DECIDED_HERE = "decided here"  # Paddle reads it; this runtime makes that choice itself, whatever the value
    NOT_IMPLEMENTED = "not implemented"
    INFERRED = "inferred"  # a degree of -1, or one given by the world size
    INFO = "info"  # anything else worth saying (a default chosen, a communicator option on gloo)


# The kinds a field's explain row says instead of the notes list: the value set changes nothing here.
NO_EFFECT_KINDS = frozenset({Kind.NO_EFFECT, Kind.NO_EFFECT_IN_PYTORCH, Kind.FALSE_HAS_NO_EFFECT, Kind.DECIDED_HERE})


class Effect(NamedTuple):
    """What a run does with a field that it does not simply use: `str()` is the effect column's text."""

    kind: Kind
    reason: str

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.reason}" if self.reason else self.kind.value


class Note(str):
    """One sentence about a field for users, and the same as data: `path` (dotted), `kind`, `reason` and the quoted
    `value` the sentence names after the path, if any. Compares and prints as its sentence."""

    path: str
    kind: Kind
    reason: str
    value: str | None

    def __new__(cls, path: str, kind: Kind, reason: str, *, value: str | None = None, text: str | None = None) -> Note:
        note = super().__new__(cls, text if text is not None else _sentence(path, kind, reason, value))
        note.path, note.kind, note.reason, note.value = path, kind, reason, value
        return note

    @property
    def effect(self) -> Effect:
        """What the field's row says of it (no effect: why)."""
        return Effect(self.kind, self.reason)

    def __reduce__(self) -> tuple:  # (pickled with the Resolved every rank agrees on)
        return (_rebuild, (self.path, self.kind, self.reason, self.value, str(self)))


def _rebuild(path: str, kind: Kind, reason: str, value: str | None, text: str) -> Note:
    return Note(path, kind, reason, value=value, text=text)


def _sentence(path: str, kind: Kind, reason: str, value: str | None) -> str:
    named = f"{path} {value}" if value is not None else path
    if kind is Kind.NO_EFFECT:
        return f"{named} is set but has no effect: {reason}."
    if kind is Kind.NO_EFFECT_IN_PYTORCH:
        return f"{named} is set but has no effect in PyTorch: {reason}."
    if kind is Kind.FALSE_HAS_NO_EFFECT:
        return f"{named} is set to false but has no effect: {reason}."
    if kind is Kind.DECIDED_HERE:
        return f"{named} is set, but this runtime decides it itself: {reason}."
    return f"{named}: {reason}."
