"""What this project does with each field a strategy sets: implemented, no effect in PyTorch, or not implemented.

Every field declares `(support)` and a `(hint)` in the schema; nothing here names a field.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): a NamedTuple's string annotations are
# compiled at class creation, which every `strategy` command pays at start.

from collections.abc import Mapping
import struct
from typing import Any, NamedTuple

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from . import descriptors as schema
from .._generated.strategy_options_pb2 import DECIDED_HERE, IMPLEMENTED, NO_EFFECT, NOT_IMPLEMENTED
from ..errors import Location, StrategyError
from ..notes import Effect, Kind, Note

__all__ = ["ALWAYS_ON_HERE", "Finding", "Recalled", "Review", "combined", "effective", "hint", "inactive", "recall",
           "remember", "review", "status"]



# What an (always_on) flag left or set false does while its message takes effect.
ALWAYS_ON_HERE = Kind.FALSE_HAS_NO_EFFECT.value


class Status(NamedTuple):
    support: int  # a Support value
    hint: str


class Finding(NamedTuple):
    """A set field that is not implemented and not at its default."""

    path: str
    error: StrategyError
    hint: str  # what to use instead


class Review:
    """What a strategy sets that the runtime does not act on.

    Attributes:
        unsupported: not-implemented fields set to something other than their default, each with its error.
        notes: one `Note` per set field that has no effect (path, kind, why; printed as a sentence).
        effects: for each set field the runtime does not act on, by dotted path, an `Effect`: no effect in PyTorch
            (why), no effect (pp_degree is 1), always on here (false has no effect; what happens: an (always_on)
            flag set false) or not implemented (what to use instead), for explain.
    """

    __slots__ = ("listed", "notes", "silent", "unsupported")

    def __init__(self) -> None:  # a plain class: a dataclass costs a millisecond at every CLI start
        self.unsupported: list[Finding] = []
        self.notes: list[Note] = []
        # (path, why) of the bool flags an inactive degree gates, which resolution notes itself: an effect, no note
        self.silent: list[tuple[str, str]] = []
        # What each message the walk listed sets, by its path prefix ("", "hybrid_configs."): field name -> value.
        # Resolution reads what is set from here rather than asking the message field by field again.
        self.listed: dict[str, dict[str, Any]] = {}

    @property
    def effects(self) -> dict[str, Effect]:
        """Worked out when asked (explain asks; resolve does not): each note's, then each finding's."""
        out = {note.path: note.effect for note in self.notes}
        out.update((path, Effect(Kind.NO_EFFECT, why)) for path, why in self.silent)
        for finding in self.unsupported:
            out[finding.path] = Effect(Kind.NOT_IMPLEMENTED, finding.hint)
        return out


def status(chain: tuple[FieldDescriptor, ...]) -> Status:
    """The support of the last field of `chain` (a path from the root): the nearest status on the path that
    is not IMPLEMENTED, with its hint (the field's, else its message's `fields_hint`)."""
    for f in reversed(chain):
        own = _facts(f).own
        if own.support != IMPLEMENTED:
            return own
    return _IMPLEMENTED


_IMPLEMENTED = Status(IMPLEMENTED, "")


class _Facts(NamedTuple):
    """What the review needs of one field, read from its options once."""

    own: Status
    gate_degree: str | None
    gate_flag: str | None
    always_on: str | None  # an (always_on) bool's hint: what the runtime does whatever the value
    quiet: bool  # an implemented scalar with nothing to say when set, in an active message: the common case
    is_bool: bool
    name: str
    message: bool  # a message field (the descriptor's attributes are slow to read in the walk)
    repeated: bool
    gated: bool  # has a gate (gate_degree or gate_flag)


_FACTS: dict[FieldDescriptor, _Facts] = {}


def _facts(f: FieldDescriptor) -> _Facts:
    facts = _FACTS.get(f)
    if facts is None:
        support = schema.option(f, "support")
        own = _IMPLEMENTED if support in (None, IMPLEMENTED) else Status(support, hint(f))
        always = hint(f) if schema.option(f, "always_on") else None
        quiet = own is _IMPLEMENTED and always is None and f.message_type is None
        degree, flag = schema.option(f, "active_when_parallel"), schema.option(f, "active_when")
        facts = _FACTS[f] = _Facts(own, degree, flag, always, quiet, f.cpp_type == FieldDescriptor.CPPTYPE_BOOL, f.name,
                                   f.message_type is not None, bool(f.is_repeated), bool(degree or flag))
    return facts


def hint(f: FieldDescriptor) -> str:
    """The field's hint: its own (hint), else its message's (fields_hint)."""
    return schema.option(f, "hint") or schema.message_option(f.containing_type, "fields_hint") or ""


def review(msg: Message, *, positions: Mapping[str, Location] | None = None, source: str | None = None) -> Review:
    """Walk the set fields of `msg`: notes for those without effect, findings for unimplemented non-defaults.

    A setting inside an inactive message (pp_configs while pp_degree is 1, amp_configs while amp is false)
    takes no effect whatever its status, so it gets a note, not an error.
    """
    out = Review()
    _walk(msg, "", _IMPLEMENTED, None, {} if positions is None else positions, source, out)
    out.unsupported.sort(key=lambda f: (f.error.line is None, f.error.line or 0, f.error.column or 0))  # file order
    return out


def _walk(msg: Message, prefix: str, inherited: Status, inactive: "_Gate | None",
          positions: Mapping[str, Location], source: str | None, out: Review) -> None:
    """`inherited`: the nearest status above `msg` that is not IMPLEMENTED (the status of its implemented fields)."""
    plain = inactive is None and inherited is _IMPLEMENTED  # active and implemented: quiet fields say nothing
    loud = _LOUD.get(msg.DESCRIPTOR, _UNKNOWN_LOUD) if plain else None
    if loud is _UNKNOWN_LOUD:
        loud = _LOUD[msg.DESCRIPTOR] = _loud(msg.DESCRIPTOR)
    given: dict[str, Any] | None = None
    if loud is None:
        listed = msg.ListFields()
        given = out.listed[prefix] = {}
    else:  # an active, implemented message of a type with few fields to say anything about: ask only for those
        listed = [(f, getattr(msg, f.name)) for f in loud if (len(getattr(msg, f.name)) if f.is_repeated else msg.HasField(f.name))]
    for f, value in listed:
        facts = _FACTS.get(f) or _facts(f)
        if given is not None:
            given[facts.name] = value
        if plain and facts.quiet:
            continue
        st = inherited if facts.own is _IMPLEMENTED else facts.own
        if facts.message:
            reason = inactive or (_inactive(msg, facts, prefix) if facts.gated else None)
            if facts.repeated:
                for k, item in enumerate(value):
                    _walk(item, f"{prefix}{facts.name}[{k}].", st, reason, positions, source, out)
            else:
                _walk(value, f"{prefix}{facts.name}.", st, reason, positions, source, out)
            continue
        path = prefix + facts.name
        if st is _IMPLEMENTED and not inactive:
            if facts.always_on and value is False:  # asks for what the engine cannot switch off
                out.notes.append(Note(path, Kind.FALSE_HAS_NO_EFFECT, facts.always_on))
            continue  # the common case: nothing to say
        if inactive:
            # Resolution notes the bool flags it gates off by a degree itself (mp_configs'); the rest here.
            if st.support != IMPLEMENTED or not inactive.by_degree or not facts.is_bool:
                out.notes.append(Note(path, Kind.NO_EFFECT, inactive.reason))
            else:
                out.silent.append((path, inactive.reason))
            continue
        if st.support in (NO_EFFECT, DECIDED_HERE):
            out.notes.append(Note(path, Kind.NO_EFFECT_IN_PYTORCH if st.support == NO_EFFECT else Kind.DECIDED_HERE, st.hint))
        elif st.support == NOT_IMPLEMENTED and _differs(f, value):
            where = positions.get(path) or positions.get(_unindexed(path)) or Location(source)
            text = f"{path} = {show(f, value)} is not implemented by this project; {st.hint}"
            out.unsupported.append(Finding(path, StrategyError.at(where, text, field=path), st.hint))


_FEW = 4  # asking this many fields one by one costs about what listing the set ones does
_LOUD: dict[Any, tuple[FieldDescriptor, ...] | None] = {}
_UNKNOWN_LOUD: Any = object()


def _loud(desc: Any) -> tuple[FieldDescriptor, ...] | None:
    """The fields of `desc` the review may have something to say about while its message is active and implemented
    (in field-number order, as ListFields gives them), or None when there are more than a few."""
    loud = tuple(f for f in sorted(desc.fields, key=lambda f: f.number) if not _silent(f, set()))
    return loud if len(loud) <= _FEW else None


def _silent(f: FieldDescriptor, visiting: set[Any]) -> bool:
    """Nothing set in `f` can give a note or a finding while its message is active and implemented: a quiet scalar,
    or an implemented, ungated message field whose fields are all silent too."""
    facts = _facts(f)
    if not facts.message:
        return facts.quiet
    if facts.own is not _IMPLEMENTED or facts.gated or f.message_type in visiting:
        return False
    visiting.add(f.message_type)
    return all(_silent(g, visiting) for g in f.message_type.fields)


class _Gate(NamedTuple):
    reason: str
    by_degree: bool  # a sibling degree of 1 (resolution notes the implemented flags it gates itself)


def _inactive(owner: Message, facts: _Facts, prefix: str) -> _Gate | None:
    """Why nothing inside a message field of `owner` takes effect, or None when it is active. With both gates
    (pipeline_configs: the `pipeline` switch, or hybrid_configs.pp_degree > 1) either one makes it active."""
    reasons = []
    if facts.gate_flag:
        if getattr(owner, facts.gate_flag):
            return None
        reasons.append(f"{prefix}{facts.gate_flag} is false")
    if facts.gate_degree:
        degree = _at(owner, facts.gate_degree)
        if degree > 1:
            return None
        reasons.append(f"{prefix}{facts.gate_degree} is {degree}")
    if not reasons:
        return None
    # Resolution gates the flags of HybridConfig's messages by their sibling degree, and notes them itself.
    sibling_degree = facts.gate_flag is None and "." not in str(facts.gate_degree)
    return _Gate(" and ".join(reasons), sibling_degree)


def _at(owner: Message, path: str) -> Any:
    """The value at a dotted path below `owner` ("hybrid_configs.pp_degree")."""
    if "." not in path:
        return getattr(owner, path)
    value: Any = owner
    for name in path.split("."):
        value = getattr(value, name)
    return value


def inactive(root: Message, chain: tuple[FieldDescriptor, ...]) -> str | None:
    """Why the last field of `chain` (a path from `root`) takes no effect because a message on its path is inactive
    ("hybrid_configs.pp_degree is 1"), or None when every message on it takes effect."""
    owner, prefix = root, ""
    for f in chain[:-1]:
        gate = _inactive(owner, _facts(f), prefix)
        if gate is not None:
            return gate.reason
        if f.is_repeated:
            return None
        owner, prefix = getattr(owner, f.name), f"{prefix}{f.name}."
    return None


def _differs(f: FieldDescriptor, value: Any) -> bool:
    return len(value) > 0 if f.is_repeated else value != f.default_value


def _unindexed(path: str) -> str:
    return ".".join(part.split("[", 1)[0] for part in path.split("."))


def show(f: FieldDescriptor, value: Any) -> str:
    """A value as a strategy file spells it: true/false, quoted strings, enum names, [lists]."""
    if f.is_repeated:
        return "[" + ", ".join(show_scalar(f, v) for v in value) + "]"
    return show_scalar(f, value)


def show_scalar(f: FieldDescriptor | None, value: Any) -> str:
    if f is not None and f.enum_type is not None and isinstance(value, int):
        known = f.enum_type.values_by_number.get(value)
        return known.name if known else str(value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return short_float(value, f is not None and f.cpp_type == FieldDescriptor.CPPTYPE_FLOAT)
    return f'"{value}"' if isinstance(value, str) else str(value)


def short_float(value: float, single: bool) -> str:
    """The shortest spelling that reads back as the same float (32-bit for float fields), as protobuf writes it."""
    if not single or value != value or value in (float("inf"), float("-inf")):
        return repr(value).removesuffix(".0")
    for digits in range(6, 10):
        text = f"{value:.{digits}g}"
        if struct.pack("<f", float(text)) == struct.pack("<f", value):
            return text
    return repr(value)


def combined(findings: list[Finding]) -> StrategyError:
    """One error for several findings: located at the first, every other one on its own line after it."""
    first = findings[0].error
    if len(findings) == 1:
        return first
    rest = "\n".join(str(f.error) for f in findings[1:])
    return StrategyError(f"{first.message}\n{rest}", source=first.source, line=first.line, column=first.column,
                         field=first.field)


def effective(msg: Message, paths: list[str]) -> Message:
    """A copy of `msg` with the fields at `paths` cleared (what policy "warn" resolves instead)."""
    if not paths:
        return msg
    copy = type(msg)()
    copy.CopyFrom(msg)
    for path in paths:
        owner: Any = copy
        *parents, leaf = path.split(".")
        for part in parents:
            name, _, index = part.partition("[")
            owner = getattr(owner, name)
            if index:
                owner = owner[int(index.rstrip("]"))]
        owner.ClearField(leaf)
    return copy


# Where each field of a loaded message came from, so resolve (which gets only the message) can point at
# the line. Protobuf messages take no weak references: keep the last few, by identity, with the message
# and its bytes at load time (a message changed since is still resolved, but checked again).
class Recalled(NamedTuple):
    positions: Mapping[str, Location]
    source: str | None
    checked: str | None  # the policy the rules (ranges, `requires`) were checked under, while unchanged since


class _Loaded(NamedTuple):
    msg: Message
    recalled: Recalled
    snapshot: bytes


_REMEMBERED: dict[int, _Loaded] = {}  # oldest first
_REMEMBER_AT_MOST = 16
_UNKNOWN = Recalled({}, None, None)


def remember(msg: Message, positions: Mapping[str, Location], source: str | None, *, checked: str | None) -> None:
    """Record where `msg`'s fields came from; `checked`: the policy it passed the rules under, if it did."""
    _REMEMBERED.pop(id(msg), None)
    _REMEMBERED[id(msg)] = _Loaded(msg, Recalled(positions, source, checked), msg.SerializeToString(deterministic=True))
    if len(_REMEMBERED) > _REMEMBER_AT_MOST:
        del _REMEMBERED[next(iter(_REMEMBERED))]


def recall(msg: Message) -> Recalled:
    """The positions and source `msg` was loaded with (empty when it was built in code, or long ago)."""
    entry = _REMEMBERED.get(id(msg))
    if entry is None or entry.msg is not msg:
        return _UNKNOWN
    _REMEMBERED[id(msg)] = _REMEMBERED.pop(id(msg))  # used: the last to be forgotten
    if entry.recalled.checked and msg.SerializeToString(deterministic=True) != entry.snapshot:
        return entry.recalled._replace(checked=None)
    return entry.recalled

