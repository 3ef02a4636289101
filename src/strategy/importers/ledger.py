"""The planner's bookkeeping: the facts a file states, the fields each sets, and each entry's outcome.

A fact owns the fields it set; a fact that set none says why (`mark`), so every entry of the report names its fields
or its reason.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..errors import StrategyError
from .common import Leaf, Tool, located
from .facts import Occurrence, Outcome

__all__ = ["Ledger"]


class Ledger:
    """The facts a file states, the strategy fields they set, and what became of each (the planner's bookkeeping)."""

    def __init__(self, occurrences: list[Occurrence], leaves: list[Leaf], tool: Tool, world_size: int | None) -> None:
        self.tool = tool
        self.leaves = leaves
        self.by_fact: dict[str, list[Occurrence]] = defaultdict(list)
        for occ in occurrences:
            self.by_fact[occ.fact].append(occ)
        self.facts = {fact: occs[-1].value for fact, occs in self.by_fact.items()}
        self.world_arg = world_size
        self.world: int | None = world_size
        self.strategy: dict[str, Any] = {}
        self.owner: dict[str, tuple[str, ...]] = {}  # field path -> the facts that set it
        self.verdict: dict[str, tuple[str, str]] = {}  # fact -> (status, reason)
        self.notes: dict[str, list[str]] = defaultdict(list)  # fact -> what else its entry says (a mapped one too)

    def has(self, fact: str) -> bool:
        return fact in self.facts

    def get(self, fact: str, default: Any = None) -> Any:
        return self.facts.get(fact, default)

    def set(self, path: str, value: Any, *by: str) -> None:
        """Write a field, owned by those of `by` the file states (a later owner takes it over)."""
        node = self.strategy
        *parents, name = path.split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[name] = value
        self.owner[path] = tuple(f for f in by if self.has(f))

    def unset(self, path: str) -> tuple[str, ...]:
        """Take a field back out (a rule of the tool's that undoes another); the facts that had set it."""
        node = self.strategy
        *parents, name = path.split(".")
        chain = [node]
        for parent in parents:
            node = node.get(parent, {})
            chain.append(node)
        node.pop(name, None)
        for parent, holder in zip(reversed(parents), reversed(chain[:-1])):  # drop what is left empty
            if holder.get(parent) == {}:
                holder.pop(parent)
        return self.owner.pop(path, ())

    def note(self, fact: str, text: str) -> None:
        """Something the entry of `fact` says besides its fields (a field the tool sets that is left out, and why)."""
        if self.has(fact) and text not in self.notes[fact]:
            self.notes[fact].append(text)

    def fit(self, why: str) -> None:
        """Leave out what the strict policy would refuse (a field this project does not implement set to another
        value than its default, a flag whose `requires` is off), each named in the entries that set it, with `why`
        (the tool's own words for where it keeps the setting) and the schema's reason."""
        import warnings

        from ..formats.io import from_dict
        from ..schema import rules, support

        while True:
            with warnings.catch_warnings():  # what "warn" would say is what is left out here, named in the entries
                warnings.simplefilter("ignore")
                s = from_dict(self.strategy, policy="warn")
            dropped = [(f.path, f.error.message.split("; ", 1)[-1]) for f in support.review(s).unsupported]
            dropped += [(path, f"this project's rules need {needed} for it") for path, needed in
                        rules.requires_violations(s)]
            if not dropped:
                return
            for path, reason in dropped:
                value = self.value(path)
                for fact in self.unset(path):
                    self.note(fact, f"{path} = {_show(value)} {why} is left out: {reason}")

    def value(self, path: str) -> Any:
        node: Any = self.strategy
        for name in path.split("."):
            node = node.get(name) if isinstance(node, dict) else None
        return node

    def owns(self, fact: str) -> bool:
        return any(fact in facts for facts in self.owner.values())

    def mark(self, fact: str, status: str, reason: str = "") -> None:
        if self.has(fact) and fact not in self.verdict:
            self.verdict[fact] = (status, reason)

    def key(self, fact: str) -> str:
        return self.leaves[self.by_fact[fact][-1].entry].key

    def said(self, fact: str) -> str:
        """`key value` as the file spells the fact, or as the tool's default it is (for messages)."""
        leaf = self.leaves[self.by_fact[fact][-1].entry]
        return f"{leaf.key} {leaf.value}{self.default(fact)}"

    def default(self, fact: str) -> str:
        """" (the tool's default)" where the file leaves the fact's key out, else nothing (for messages)."""
        leaf = self.leaves[self.by_fact[fact][-1].entry]
        return f" ({self.tool.name}'s default)" if leaf.where.line is None and (leaf.key, leaf.value) in \
            self.tool.defaults else ""

    def error(self, fact: str, message: str) -> StrategyError:
        return located(self.leaves[self.by_fact[fact][-1].entry], message)

    def outcomes(self) -> dict[int, list[Outcome]]:
        fields: dict[str, list[str]] = defaultdict(list)
        for path, facts in self.owner.items():
            for fact in facts:
                fields[fact].append(path)
        result: dict[int, list[Outcome]] = defaultdict(list)
        for fact, occs in self.by_fact.items():
            last = occs[-1]
            for occ in occs[:-1]:
                leaf = self.leaves[last.entry]
                result[occ.entry].append(Outcome("no counterpart", (), f"overridden by {leaf.key} = {leaf.value}"))
            status, reason = self.verdict.get(fact, ("mapped", ""))
            got = tuple(sorted(fields.get(fact, ()), key=_field_order))
            if self.notes.get(fact):
                if status == "mapped" and not got and not reason:
                    status = "no counterpart"  # everything it set had to be left out
                reason = "; ".join(([reason] if reason else []) + self.notes[fact])
            if status == "mapped" and not got and not reason:
                raise AssertionError(f"fact {fact} of {self.key(fact)} was neither mapped nor explained")
            result[last.entry].append(Outcome(status, got if status == "mapped" else (), reason))
        return result


_ORDER = ("hybrid_configs.dp_degree", "hybrid_configs.mp_degree", "hybrid_configs.pp_degree",
          "hybrid_configs.sharding_degree", "hybrid_configs.sep_degree", "hybrid_configs.cp_degree")


def _show(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value) if isinstance(value, str) else str(value)


def _field_order(path: str) -> int:
    """The degrees in Paddle's order first, then the rest as they were written (the sort is stable)."""
    return _ORDER.index(path) if path in _ORDER else len(_ORDER)
