"""The reference page (`strategy docs`): every message and field of the schema, as Markdown, from the descriptors."""

from __future__ import annotations

from collections import Counter

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from . import descriptors as schema, support
from .._generated.distributed_strategy_pb2 import DistributedJobInfo
from .._generated.strategy_options_pb2 import DECIDED_HERE, IMPLEMENTED, NO_EFFECT, NOT_IMPLEMENTED

__all__ = ["reference"]

_TYPE_NAMES = {getattr(FieldDescriptor, n): n.removeprefix("TYPE_").lower() for n in dir(FieldDescriptor) if n.startswith("TYPE_")}
_BADGES = {IMPLEMENTED: "implemented", NO_EFFECT: "no effect", NOT_IMPLEMENTED: "**not implemented**",
           DECIDED_HERE: "decided here"}


def reference() -> str:
    """The whole page; `make test` checks that docs/strategy-reference.md equals it."""
    messages = _messages()
    counts = Counter(schema.option(f, "support") for m in messages for f in m.fields)
    out = [
        "# Strategy reference",
        "",
        "Generated from `proto/*.proto` by `strategy docs`; do not edit (`make docs` rewrites it, `make test` checks it).",
        "",
        f"{len(messages)} messages, {sum(counts.values())} fields: {counts[IMPLEMENTED]} implemented, "
        f"{counts[DECIDED_HERE]} decided by this runtime itself, {counts[NO_EFFECT]} with no effect in PyTorch, "
        f"{counts[NOT_IMPLEMENTED]} not implemented yet.",
        "",
        "- **implemented**: the runtime (`parallel`) does what the field says; *always on* where its engine has no",
        "  switch for it (set to false, a note says so).",
        "- **decided here**: Paddle's dygraph reads it, and this runtime makes that choice itself whatever the value",
        "  (the hint says how). Accepted; when set, `Resolved.notes` and `strategy explain` say so.",
        "- **no effect**: only meaningful to Paddle's static graph, executors, cuDNN or parameter server. Accepted; when",
        "  set, `Resolved.notes` and `strategy explain` say so and why.",
        "- **not implemented**: left at its default it is fine; set to anything else, `policy=\"strict\"` rejects it at",
        "  its `file:line:col` with the hint, and `policy=\"warn\"` warns and resolves it as its default.",
        "",
        "A field inside a message field that is not implemented (or has no effect) shares that status. Settings inside",
        "an inactive message (`pp_configs` while `pp_degree` is 1, `amp_configs` while `amp` is false) have no effect.",
        "",
        "Messages: " + ", ".join(f"[{m.name}](#{m.name.lower()})" for m in messages),
    ]
    for m in messages:
        out += ["", f"## {m.name}", "", f"`{m.file.name}`. {schema.message_doc(m)}", ""]
        out += ["| # | field | type | default | status | documentation |", "|---|---|---|---|---|---|"]
        out += [_row(f) for f in m.fields]
    for e in _enums(messages):
        out += ["", f"## {e.name}", "", f"`{e.file.name}`. {schema.message_doc(e)}", ""]
        out += ["| value | number |", "|---|---|"] + [f"| `{v.name}` | {v.number} |" for v in e.values]
    return "\n".join(out) + "\n"


def _row(f: FieldDescriptor) -> str:
    kind = f.message_type or f.enum_type
    type_name = f"[{kind.name}](#{kind.name.lower()})" if kind is not None else _TYPE_NAMES[f.type]
    if f.is_repeated:
        type_name = f"repeated {type_name}"
    default = "" if f.message_type is not None or f.is_repeated else f"`{support.show_scalar(f, f.default_value)}`"
    level = schema.option(f, "support")
    status = _BADGES[level]
    why = support.hint(f)
    if level != IMPLEMENTED and why:
        status += f": {why}"
    elif schema.option(f, "always_on"):  # the documentation says how
        status += ", always on"
    rules = [f"requires `{r}`" for r in [schema.option(f, "requires")] if r]
    gates = [f"`{g}` is true" for g in [schema.option(f, "active_when")] if g]
    gates += [f"`{g}` > 1" for g in [schema.option(f, "active_when_parallel")] if g]
    rules += [f"active when {' or '.join(gates)}"] if gates else []
    doc = schema.doc(f) + "".join(f" *({r})*" for r in rules)
    cells = [str(f.number), f"`{f.name}`", type_name, default, status, doc]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _messages() -> list[Descriptor]:
    """Every message, breadth first from DistributedStrategy (DistributedJobInfo, which holds it, last)."""
    seen: dict[str, Descriptor] = {}
    queue = [schema.ROOT, DistributedJobInfo.DESCRIPTOR]
    while queue:
        desc = queue.pop(0)
        if desc.full_name in seen:
            continue
        seen[desc.full_name] = desc
        queue += [f.message_type for f in desc.fields if f.message_type is not None]
    return list(seen.values())


def _enums(messages: list[Descriptor]) -> list:
    found: dict[str, object] = {}
    for m in messages:
        for f in m.fields:
            if f.enum_type is not None:
                found.setdefault(f.enum_type.full_name, f.enum_type)
    return list(found.values())
