"""Other tools' configs as checked strategies: DeepSpeed JSON, torchtitan TOML, accelerate YAML, Megatron launchers.

`import_config` reads one file, says key by key what it did with each setting, and builds the strategy with
`from_dict`, so the result is validated like any strategy file. One module per tool holds its rules as data.
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass

from .._generated.distributed_strategy_pb2 import DistributedStrategy
from ..errors import Location, StrategyError
from ..formats.codec import decode
from ..formats.io import from_dict, read_bytes
from .common import AUTO, Leaf, NoCounterpart, Nothing, Overridden, Tool, Unexpanded, located, show
from .facts import Occurrence, Outcome
from .plan import plan

__all__ = ["KINDS", "STATUSES", "Entry", "Imported", "import_config", "report"]

KINDS = ("deepspeed", "torchtitan", "accelerate", "megatron", "paddlenlp", "paddleformers")
NOTHING = "nothing to set"  # understood, and the strategy's defaults already say it
STATUSES = ("mapped", NOTHING, "unresolved", "no counterpart")
_MEGATRON_FLAG = re.compile(r"--[a-z-]*parallel-size\b")


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """What the importer did with one leaf key of the source.

    Attributes:
        key: the dotted key (`zero_optimization.stage`), the flag name without dashes for Megatron.
        value: the value as written (Megatron: the expanded text; a bare flag is true).
        status: "mapped" (it set `fields`), "nothing to set" (understood, and the strategy's defaults already say it:
            a switch left off, one accumulation step, a backend choice, a file whose entries follow), "unresolved"
            (it cannot be known here: "auto", the world size) or "no counterpart".
        fields: the dotted strategy fields it set (never empty when mapped; empty otherwise).
        reason: why (always given unless mapped).
        where: the file, line and column of the key.
    """

    key: str
    value: object
    status: str
    fields: tuple[str, ...]
    reason: str
    where: Location


@dataclass(frozen=True, slots=True, kw_only=True)
class Imported:
    """An imported config.

    Attributes:
        strategy: the strategy (as `strategy.from_dict` returns it).
        world_size: the `world_size` argument, else the file's own (accelerate's num_processes, torchrun's
            nproc_per_node × nnodes in a Megatron script, DeepSpeed's data_parallel_size or its three batch sizes:
            train_batch_size / (micro-batch × accumulation) data ranks), else None (then nothing depends on it).
        entries: one per leaf key of the source, in file order (a file another names follows its naming key).
        assumed: the tool's defaults for keys the file leaves out, where they set or need something (torchtitan's
            FSDP over the ranks left, in bfloat16), each reported like an entry.
        kind: the tool ("deepspeed", "torchtitan", "accelerate" or "megatron").
    """

    strategy: DistributedStrategy
    world_size: int | None
    entries: tuple[Entry, ...]
    assumed: tuple[Entry, ...]
    kind: str


def _fact(tool: Tool, key: str) -> str | tuple[str, ...] | None:
    rule = tool.rule(key)
    return rule.means if rule is not None else None


def import_config(path: str | os.PathLike[str], *, kind: str | None = None, world_size: int | None = None,
                  command: int | None = None) -> Imported:
    """Read a DeepSpeed, torchtitan, accelerate or Megatron config and map it onto a strategy.

    Args:
        kind: "deepspeed", "torchtitan", "accelerate" or "megatron"; None tells it from the file (`.toml`:
            torchtitan, `.json`: DeepSpeed, YAML with distributed_type or compute_environment: accelerate, a text
            or shell file with Megatron's `--...-parallel-size` flags: Megatron).
        world_size: the number of ranks; without it, the file's own (see `Imported.world_size`). With neither, a
            replicated `dp_degree` is left to be inferred (-1), and anything else that depends on the world size (the
            data ranks ZeRO or FSDP shards over, torchtitan's -1, the accumulation a global batch sets) is an error
            naming --world-size: the strategy would otherwise train something other than the config.
        command: which training command of a launch script to import (1, the first, unless told; PaddleNLP's
            `python -m paddle.distributed.launch` scripts); the report lists the others.

    Raises:
        StrategyError: the file is unreadable or malformed (located), its kind cannot be told, a degree is not a
            number, the degrees do not divide the world size, a setting needs the world size and nothing gives it,
            or the file's batch sizes imply another world size than `world_size` (DeepSpeed asserts train_batch_size
            = micro-batch × accumulation × data ranks).

    Example::

        imported = strategy.import_config("ds_config.json", world_size=8)
        for e in imported.entries:
            print(e.key, e.status, e.fields or e.reason)
    """
    source = os.fspath(path)
    if world_size is not None and (isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1):
        raise StrategyError(f"world_size must be a whole number >= 1, got {world_size!r}", source=source)
    text = decode(read_bytes(source), source)
    tool = _tool(kind if kind is not None else detect(source, text), source)
    if command is not None and tool.script is None:
        raise StrategyError(f"--command picks a training command of a launch script; {tool.name}'s configs have none",
                            source=source)
    leaves = _unique(tool.script(text, source, command) if command is not None and tool.script is not None
                     else tool.leaves(text, source))
    read = _with_includes(tool, leaves, source)
    assumed_from = len(read)
    stated = {_fact(tool, own) for _, owner, own in read[:assumed_from] if owner is tool} - {None, "checked"}
    read += [(Leaf(key, value, Location(source)), tool, key) for key, value in tool.defaults  # (a default of a fact
             if not any(own == key and owner is tool for _, owner, own in read[:assumed_from])  # another key states:
             and _fact(tool, key) not in stated]  # PADDLE_NNODES for nnodes)
    leaves = [leaf for leaf, _, _ in read]
    occurrences: list[Occurrence] = []
    early: dict[int, Outcome] = {}
    notes: dict[int, str] = {}
    for index, (leaf, owner, own) in enumerate(read):
        outcome = _read(owner, leaf, own, index, occurrences)
        if isinstance(outcome, Outcome):
            early[index] = outcome
        elif outcome:
            notes[index] = outcome
    d, world, outcomes = plan(occurrences, leaves, tool, world_size)
    strategy = from_dict(d)
    entries = [_entry(leaf, early.get(i), outcomes.get(i, []), notes.get(i, "")) for i, leaf in enumerate(leaves)]
    assumed = tuple(e for e in entries[assumed_from:] if e.status != "no counterpart")
    return Imported(strategy=strategy, world_size=world, entries=tuple(entries[:assumed_from]), assumed=assumed,
                    kind=tool.kind)


def detect(source: str, text: str) -> str:
    """The kind of a config from its extension and, for YAML and scripts, its content."""
    from .trainers import trainer_kind

    ext = os.path.splitext(source)[1].lower()
    if ext == ".toml":
        return "torchtitan"
    if ext in (".json", ".yaml", ".yml"):
        from ..formats.tree import Mapping

        if ext == ".json":
            from ..formats.json.located import parse
        else:
            from ..formats.yaml.located import parse  # type: ignore[assignment]
        root = parse(text, source)
        keys = {key for key, _, _ in root.items} if isinstance(root, Mapping) else set()
        if ext != ".json" and keys & {"distributed_type", "compute_environment"}:
            return "accelerate"
        trainer = trainer_kind(keys, yaml=ext != ".json")
        if trainer is not None:
            return trainer  # a JSON of trainer arguments is never a DeepSpeed config
        if ext == ".json":
            return "deepspeed"
    elif "paddle.distributed.launch" in text:
        from .paddle_launch import names

        return trainer_kind({n.lstrip("-").split("=")[0] for n in names(text, source)},
                            yaml=any(n.endswith((".yaml", ".yml")) for n in names(text, source))) or "paddlenlp"
    elif _MEGATRON_FLAG.search(text):
        return "megatron"
    raise StrategyError("cannot tell which tool this config is for: name it with --from (kind=) as one of "
                        f"{', '.join(KINDS)} (a .toml is torchtitan, .json DeepSpeed, YAML with distributed_type "
                        "accelerate, a script with --...-parallel-size flags Megatron, a JSON or YAML of trainer "
                        "arguments PaddleNLP or PaddleFormers by their names, a script of python -m "
                        "paddle.distributed.launch commands PaddleNLP)", source=source)


def report(imported: Imported) -> list[str]:
    """One line per entry, `key = value -> fields` / `-> nothing to set: reason` / `-> no counterpart: reason` /
    `-> unresolved: reason`, then the tool's assumed defaults (lines without an arrow)."""
    text = imported.kind == "megatron"  # a script's values are words: shown as written, unquoted
    lines = [_line(e, text) for e in imported.entries]
    name = _tool(imported.kind, "").name
    for e in imported.assumed:
        what = ", ".join(e.fields) if e.status == "mapped" else e.status
        why = f" ({e.reason})" if e.reason else ""
        lines.append(f"not in the file, {name}'s default {e.key} = {show(e.value)}: {what}{why}")
    return lines


def _line(e: Entry, text: bool) -> str:
    head = f"{e.key} = {e.value if text and isinstance(e.value, str) else show(e.value)} ->"
    if e.status == "mapped":
        return f"{head} {', '.join(e.fields)}" + (f" ({e.reason})" if e.reason else "")
    return f"{head} {e.status}: {e.reason}"


def _tool(kind: str, source: str) -> Tool:
    if kind not in KINDS:
        raise StrategyError(f"unknown kind {kind!r}; the kinds are {', '.join(KINDS)}", source=source)
    tool: Tool = importlib.import_module(f".{kind}", __package__).TOOL
    return tool


def _unique(leaves: list[Leaf]) -> list[Leaf]:
    """A key given twice is one leaf, the last value winning (argparse); it keeps its first place. A value a tool's
    reader already marked `Overridden` (a launch flag's file value) stays beside the one that replaced it."""
    last = {leaf.key: leaf for leaf in leaves if not isinstance(leaf.value, Overridden)}
    seen: set[str] = set()
    out = []
    for leaf in leaves:
        if isinstance(leaf.value, Overridden):
            out.append(leaf)
        elif leaf.key not in seen:
            seen.add(leaf.key)
            out.append(last[leaf.key])
    return out


def _with_includes(tool: Tool, leaves: list[Leaf], source: str) -> list[tuple[Leaf, Tool, str]]:
    """Each leaf with the tool whose rules read it and the key as that tool spells it: a file another names
    (accelerate's deepspeed_config_file) follows its key, its keys prefixed by that key's path."""
    out: list[tuple[Leaf, Tool, str]] = []
    for leaf in leaves:
        out.append((leaf, tool, leaf.key))
        rule = tool.rule(leaf.key)
        if rule is None or rule.include is None or not isinstance(leaf.value, str) or leaf.value == AUTO:
            continue
        named = os.path.join(os.path.dirname(source), leaf.value)
        if not os.path.isfile(named):
            continue
        inner = _tool(rule.include, named)
        for child in _unique(inner.leaves(decode(read_bytes(named), named), named)):
            out.append((child._replace(key=f"{leaf.key}.{child.key}"), inner, child.key))
    return out


def _read(tool: Tool, leaf: Leaf, own_key: str, index: int, occurrences: list[Occurrence]) -> Outcome | str:
    """The entry's outcome when its rule decides it alone; else its facts join `occurrences` and the rule's note
    (if any) comes back."""
    if tool.auto and isinstance(leaf.value, str) and leaf.value.strip().lower() == AUTO:
        return Outcome("unresolved", (), '"auto": the Trainer or accelerate fills it in at launch; the field keeps '
                       "its default")
    if isinstance(leaf.value, Unexpanded):
        return Outcome("unresolved", (), leaf.value.reason)
    if isinstance(leaf.value, Overridden):
        return Outcome("no counterpart", (), f"replaced by {leaf.value.by}")
    rule = tool.rule(own_key)
    if rule is None:
        return Outcome("unresolved", (), f"no rule for this key: not a {tool.name} setting this importer knows; "
                       "check what it does by hand")
    if rule.include is not None:
        named = os.path.join(os.path.dirname(leaf.where.source or ""), str(leaf.value))
        if not os.path.isfile(named):
            return Outcome("unresolved", (), f"the file it names, {named}, does not exist")
        return Outcome("mapped", (), f"imported: its entries follow, keys prefixed by {leaf.key}")
    if rule.means is None:
        return Outcome("no counterpart", (), rule.reason)
    try:
        value = rule.read.read(leaf.value) if rule.read is not None else leaf.value
    except ValueError as e:
        raise located(leaf, f"{e}, got {show(leaf.value)}") from None
    if isinstance(value, NoCounterpart):
        return Outcome("no counterpart", (), value.reason)
    if isinstance(value, Nothing):
        return Outcome("mapped", (), value.reason)
    facts = value if isinstance(rule.means, tuple) else {rule.means: value}
    for fact, fact_value in facts.items():
        occurrences.append(Occurrence(fact, fact_value, index))
    return rule.reason


def _entry(leaf: Leaf, early: Outcome | None, outcomes: list[Outcome], note: str) -> Entry:
    parts = [early] if early is not None else outcomes
    mapped = [o for o in parts if o.status == "mapped"]
    fields = tuple(dict.fromkeys(f for o in mapped for f in o.fields))
    others = [o.status for o in parts if o.status != "mapped"]
    # A fact that set nothing (a switch left off, a backend choice, degrees another key gives) says so, unless
    # another fact of the entry could not be mapped: that one is what the user must look at.
    status = "mapped" if fields else others[0] if others else NOTHING
    reasons = [o.reason for o in parts if o.reason] + ([note] if note and fields else [])
    reason = "; ".join(dict.fromkeys(reasons))
    if status != "mapped" and not reason:
        raise AssertionError(f"{leaf.key}: {status} without a reason")
    value = leaf.value.text if isinstance(leaf.value, Unexpanded) else leaf.value  # `$1` stays as written
    if isinstance(value, Overridden):
        value = value.value
    return Entry(key=leaf.key, value=value, status=status, fields=fields, reason=reason, where=leaf.where)
