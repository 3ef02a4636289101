"""What every importer shares: rules as data, the value readers they name, and a parsed file flattened into leaves.

A tool module is a list of `Rule`s (a key pattern, the fact it states, how its value reads, the source that says so);
`plan` turns the facts into strategy fields, and `table` prints the same rules as docs/importing.md's mapping table.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import Location, StrategyError
from ..formats.tree import Mapping as TreeMapping, Node, Scalar, Sequence as TreeSequence

__all__ = ["AUTO", "CLIP", "OFFLOAD", "OFFLOAD_DEVICE", "OFFLOAD_SWITCH", "SCALE_FLOOR", "SELECTIVE", "Leaf",
           "NoCounterpart", "Nothing", "Overridden", "Reader", "Rule", "Tool", "Unexpanded", "choice", "const", "flatten", "integer",
           "number", "show", "truth"]

AUTO = "auto"  # the Trainer / accelerate convention: filled in at launch, so unset here

# Reasons more than one tool gives, said once.
CLIP = "clipping is the optimizer's here: HybridParallelOptimizer(max_grad_norm=...)"
OFFLOAD = "offloading to CPU or NVMe is not implemented (FSDP2's CPUOffloadPolicy is not wired yet)"
SELECTIVE = ("selective activation checkpointing has no counterpart: the strategy's recompute is whole blocks, and "
             "mapping one to the other would change what is saved")
SCALE_FLOOR = "the loss scale never goes below 1 here (Paddle's scaler has no floor setting)"


class NoCounterpart(NamedTuple):
    """A value a reader refuses to map (`mode = "selective"`): the entry gets status "no counterpart" and this reason."""

    reason: str


class Nothing(NamedTuple):
    """A value that needs no field (a switch left off, one accumulation step): mapped, nothing set, and why."""

    reason: str


class Unexpanded(NamedTuple):
    """A value that cannot be known without running the script (`$1`, `$(cmd)`, the environment): text and why."""

    text: str
    reason: str


class Overridden(NamedTuple):
    """A value a later one of the same key replaces (argparse's last value wins; a launch flag after the argument file
    it overrides): its report line shows what it said and what replaced it, where; it states no fact."""

    value: Any
    by: str  # `key value at file:line:col` of the value that wins


@dataclass(frozen=True, slots=True)
class Reader:
    """How a source value becomes a fact's value; `describe` is what the mapping table says about it, `bare` that
    the flag takes no value (Megatron's `--bf16`)."""

    describe: str
    read: Callable[[Any], Any]
    bare: bool = False


class Leaf(NamedTuple):
    """One leaf key of a source file: the dotted key (a flag name for Megatron), its value as written, its place."""

    key: str
    value: Any
    where: Location


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """What one key (an fnmatch pattern on the dotted key) means, once: `means` names the fact it states (a key of
    `plan.FACTS`, or several when `read` gives a dict of them), None for no counterpart (then `reason` says why);
    `include` names the importer that reads the file the value names; `cite` a key of the tool's `SOURCES`."""

    key: str
    cite: str
    means: str | tuple[str, ...] | None = None
    read: Reader | None = None
    reason: str = ""
    include: str | None = None

    def matches(self, key: str) -> bool:
        return fnmatch.fnmatchcase(key, self.key)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """One importer: its rules, the sources they cite, and what the tool does when a key is left out.

    `defaults` are (key, value) pairs the tool assumes for keys a file leaves out (torchtitan's FSDP over the ranks
    left, in bfloat16); `scaler` is its fp16 loss scaler's settings as amp_configs fields; `auto` whether "auto" means
    "filled in at launch" (DeepSpeed through the Trainer, accelerate); `finish` the tool's own rules, run by the
    planner after the shared ones (Paddle's trainers: their silent rules, the `*_parallel_config` words); `script`
    how the K-th training command of its launch scripts reads (`import_config(command=K)`).

    What the planner says of the tool's own behaviour, where it differs from the others':
    `sequence_parallel_at_tp1` what the tool does with sequence parallelism at tensor degree 1 (for the report);
    `size_one_replicates` whether explicit data degrees of 1 and 1 replicate over every process instead;
    `fsdp_by_default` whether its data parallelism is FSDP unless told otherwise, so that with cp it shards over the
    cp ranks even where no data rank shards; `fsdp_spans_cp` whether its FSDP mesh spans the cp ranks too, which
    sharding_degree here does not; `world_hint` where a run of the tool states its world size, when its files
    cannot (Paddle's argument files: the launch command's devices); `experts_span_tp` whether its experts stay whole
    on every rank, so that expert parallelism may take any rank of a pipeline stage, tensor-parallel ones included
    (PaddleFormers always; Megatron and torchtitan at expert tensor degree 1).
    """

    kind: str
    name: str
    sources: Mapping[str, str]
    rules: tuple[Rule, ...]
    leaves: Callable[[str, str], list[Leaf]]
    defaults: tuple[tuple[str, Any], ...] = ()
    scaler: Mapping[str, Any] = field(default_factory=dict)
    auto: bool = False
    finish: Callable[[Any], None] | None = None
    script: Callable[[str, str, int | None], list[Leaf]] | None = None
    sequence_parallel_at_tp1: str = ""
    size_one_replicates: bool = False
    fsdp_by_default: bool = False
    fsdp_spans_cp: bool = False
    world_hint: str = ""
    experts_span_tp: bool = False

    def rule(self, key: str) -> Rule | None:
        return next((r for r in self.rules if r.matches(key)), None)


def flatten(node: Node, prefix: str = "") -> Iterator[Leaf]:
    """Every leaf of a located tree in file order, keys dotted; a list is one leaf, and so is an empty table."""
    if isinstance(node, TreeMapping) and node.items:
        for key, where, child in node.items:
            dotted = f"{prefix}.{key}" if prefix else key
            if isinstance(child, TreeMapping) and child.items:
                yield from flatten(child, dotted)
            else:
                yield Leaf(dotted, plain(child), where)
    elif prefix or not isinstance(node, TreeMapping):
        yield Leaf(prefix, plain(node), node.where)


def plain(node: Node) -> Any:
    if isinstance(node, Scalar):
        return node.value
    if isinstance(node, TreeSequence):
        return [plain(item) for item in node.items]
    return {key: plain(child) for key, _, child in node.items}


def show(value: Any) -> str:
    """A source value the way the report prints it: true/false, quoted strings, lists as written."""
    if value is True or value is False:
        return str(value).lower()
    if isinstance(value, Unexpanded):
        return value.text
    if isinstance(value, Overridden):
        return show(value.value)
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {show(v)}" for k, v in value.items()) + "}"
    return str(value)


# --- readers ---------------------------------------------------------------------------------------------------------

def _int(value: Any) -> int:
    """An integer as JSON, TOML, YAML or a shell word writes it: 8, 8.0, "8", 5e8; anything else a ValueError."""
    if isinstance(value, bool):
        raise ValueError("a bool")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        try:
            return int(text)
        except ValueError:
            number_ = float(text)
            if number_.is_integer():
                return int(number_)
    raise ValueError("not an integer")


def integer(minimum: int = 1, *, also: tuple[int, ...] = (), scale: Callable[[int], Any] | None = None,
            describe: str = "") -> Reader:
    """A whole number >= `minimum` (or one of `also`, such as torchtitan's -1), optionally mapped by `scale`."""
    extra = "".join(f" or {a}" for a in also)

    def read(value: Any) -> Any:
        try:
            n = _int(value)
        except (ValueError, OverflowError):
            raise ValueError(f"expected a whole number >= {minimum}{extra}") from None
        if n < minimum and n not in also:
            raise ValueError(f"expected a whole number >= {minimum}{extra}")
        return scale(n) if scale else n

    return Reader(describe, read)


def number(*, describe: str = "") -> Reader:
    """Any finite number (a loss scale)."""

    def read(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError("expected a number")
        try:
            result = float(value)
        except (TypeError, ValueError):
            raise ValueError("expected a number") from None
        if result != result or result in (float("inf"), float("-inf")):
            raise ValueError("expected a finite number")
        return result

    return Reader(describe, read)


def _truth(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "1", "0"):
        return value.strip().lower() in ("true", "yes", "1")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ValueError("expected true or false")


def truth(on: Any, off: Any) -> Reader:
    """A switch: true reads as `on`, false as `off` (either may be a NoCounterpart or Nothing)."""
    return Reader(_describe_pair(on, off), lambda value: on if _truth(value) else off)


def choice(values: Mapping[Any, Any], *, describe: str = "") -> Reader:
    """One of a few spellings (strings compared case-insensitively), each read as its value in `values`."""
    folded = {k.lower() if isinstance(k, str) else k: v for k, v in values.items()}

    def read(value: Any) -> Any:
        key = value.strip().lower() if isinstance(value, str) else value
        if isinstance(key, int) and not isinstance(key, bool) and str(key) in folded:
            key = str(key)  # YAML's 2 for "2"
        if isinstance(key, bool) or key not in folded:
            try:
                key = _truth(value) if any(isinstance(k, bool) for k in folded) else key
            except ValueError:
                pass
        if key not in folded:
            raise ValueError("expected one of " + ", ".join(show(k) for k in values))
        return folded[key]

    return Reader(describe or "; ".join(f"{show(k)}: {_describe(v)}" for k, v in values.items()), read)


def text(*, describe: str = "") -> Reader:
    """A non-empty string (a directory)."""

    def read(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError("expected a non-empty string")
        return value

    return Reader(describe, read)


def const(value: Any, *, describe: str = "") -> Reader:
    """A flag whose presence says it all (Megatron's `--bf16`): any value reads as `value`."""
    return Reader(describe, lambda _: value, bare=True)


def _describe(value: Any) -> str:
    if isinstance(value, NoCounterpart):
        return "no counterpart"
    if isinstance(value, Nothing):
        return "nothing to set"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_describe(v)}" for k, v in value.items())
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value)
    return show(value)


def _describe_pair(on: Any, off: Any) -> str:
    return f"true: {_describe(on)}; false: {_describe(off)}"


# Offloading, said once for every tool: off (a false switch, device "none") is how the strategy runs; on has no
# counterpart.
_NO_OFFLOAD = Nothing("no offloading: parameters and optimizer state stay on the device, as here")
OFFLOAD_SWITCH = truth(NoCounterpart(OFFLOAD), _NO_OFFLOAD)
OFFLOAD_DEVICE = choice({"none": _NO_OFFLOAD, "cpu": NoCounterpart(OFFLOAD), "nvme": NoCounterpart(OFFLOAD)})


def located(leaf: Leaf, message: str) -> StrategyError:
    """An error about a source key, at its place, naming it."""
    return StrategyError.at(leaf.where, f"{leaf.key}: {message}", field=leaf.key)
