"""Sequence parallelism for decoder models laid out as Hugging Face's are (embeddings, a list of decoder layers
with pre-norms, a final norm, a head), applied by `parallelize`.

These models read the sequence length from their inputs before projecting (`view(*input_shape, -1, head_dim)`)
and build positions and the attention mask from the embedding's output, so the region is entered only at the
first decoder layer, and each attention / MLP block all-gathers its input first (torchtitan's
PrepareModuleInput, Shard -> Replicate) instead of inside the column layers; the row layers reduce-scatter back
into the region. The norms of the residual stream live in the region and are marked sequence-parallel.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from torch import nn

from strategy import StrategyError

from ..tensor.sequence import gather_from_sequence, mark_sequence_parallel, scatter_to_sequence
from ..topology.groups import HybridGroup
from .plan import COLUMN, ROW, Match

__all__ = ["SequencePlan", "plan_sequence_parallel"]

FIELD = "hybrid_configs.mp_configs.sequence_parallel"


@dataclasses.dataclass(frozen=True)
class SequencePlan:
    entry: str  # the first decoder layer: the region starts at its input
    gathers: tuple[str, ...]  # modules whose input is all-gathered (the parents of column layers inside layers)
    norms: tuple[str, ...]  # norms of the residual stream
    replicated_input: tuple[str, ...]  # matches that get the whole sequence (column layers inside blocks, embeddings)


def plan_sequence_parallel(model: nn.Module, matches: list[Match]) -> SequencePlan:
    """Where the region starts, which blocks gather, which norms it holds; a StrategyError when the model does
    not look like a decoder stack."""
    names = [n for n, _ in model.named_modules()]
    rows = [m.name for m in matches if m.style in ROW]
    entry = next((n for n in names if re.search(r"\.0$", n) and any(r.startswith(n + ".") for r in rows)), None)
    if entry is None:
        raise StrategyError(f"sequence_parallel with parallelize({type(model).__name__}): no list of decoder layers holding "
                            "the plan's row-parallel layers was found; turn sequence_parallel off for this model", field=FIELD)
    stack = entry.rsplit(".", 1)[0]  # "model.layers"
    base = stack.rsplit(".", 1)[0] if "." in stack else ""
    inside = [m for m in matches if m.name.startswith(stack + ".")]
    gathers = sorted({m.name.rpartition(".")[0] for m in inside if m.style in COLUMN})
    modules = dict(model.named_modules())
    norms = sorted(n for n, mod in modules.items()
                   if "norm" in type(mod).__name__.lower() and _norm_of_stream(n, stack, base))
    replicated = tuple(m.name for m in matches if (m.style in COLUMN and m in inside) or m.style == "embedding_rowwise")
    return SequencePlan(entry, tuple(gathers), tuple(norms), replicated)


def _norm_of_stream(name: str, stack: str, base: str) -> bool:
    """A norm on the residual stream: a direct child of a decoder layer, or of the base model (the final norm)."""
    parent = name.rpartition(".")[0]
    return bool(re.fullmatch(re.escape(stack) + r"\.\d+", parent)) or parent == base


def without_sequence_parallel(hcg: HybridGroup) -> HybridGroup:
    """The same groups with sequence parallelism off: for layers whose input is the whole sequence."""
    mp = dataclasses.replace(hcg.resolved.mp, sequence_parallel=False, recompute_allgather=False, sp_async_reduce_scatter=False)
    return dataclasses.replace(hcg, resolved=dataclasses.replace(hcg.resolved, mp=mp))


def install(model: nn.Module, plan: SequencePlan, hcg: HybridGroup, sequence_dim: int) -> None:
    """Enter the region at the first decoder layer, gather in front of each block, mark the stream's norms."""
    modules = dict(model.named_modules())
    modules[plan.entry].register_forward_pre_hook(_on_hidden_states(scatter_to_sequence, hcg, sequence_dim), with_kwargs=True)
    for name in plan.gathers:
        modules[name].register_forward_pre_hook(_on_hidden_states(gather_from_sequence, hcg, sequence_dim), with_kwargs=True)
    for name in plan.norms:
        mark_sequence_parallel(modules[name], hcg=hcg)


def _on_hidden_states(op, hcg: HybridGroup, sequence_dim: int):
    """A pre-hook applying `op` to the hidden states: the first positional argument, or `hidden_states=`."""

    def hook(module: nn.Module, args: tuple, kwargs: dict[str, Any]):
        if args:
            return (op(args[0], sequence_dim=sequence_dim, hcg=hcg), *args[1:]), kwargs
        if "hidden_states" in kwargs:
            return args, {**kwargs, "hidden_states": op(kwargs["hidden_states"], sequence_dim=sequence_dim, hcg=hcg)}
        raise StrategyError(f"sequence_parallel: {type(module).__name__}.forward got no hidden states to split or gather",
                            field=FIELD)

    return hook
