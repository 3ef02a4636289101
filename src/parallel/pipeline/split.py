"""Cutting a model into pipeline chunks by module names, so every parameter keeps the name it has in the whole model.

The blocks of the model's largest ModuleList are cut into contiguous chunks; what the model registers before the
blocks (embeddings) lives with the first chunk, what it registers after them (final norm, head) with the last,
and modules without parameters (rotary embeddings, a loss) everywhere. A module another stage owns is set to None.
A weight the two ends share (tied embeddings) is listed in `Cut.tied`; tied.py keeps its two copies one weight.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

from torch import nn

from strategy import StrategyError

from ..blocks import largest_module_list

__all__ = ["Cut", "chunk_blocks", "cut", "prune", "skeleton"]

FIELD = "hybrid_configs.pp_degree"


class Cut(NamedTuple):
    """Where the model splits: its blocks' ModuleList, and the modules before and after it on the way from the root."""

    blocks: str  # the ModuleList's qualified name
    size: int  # how many blocks
    before: tuple[str, ...]  # qualified names of modules with parameters registered before the blocks
    after: tuple[str, ...]  # ... and after them
    # Weights tied across the ends (an LM head sharing the embedding's): (the first stage's name, the last stage's).
    tied: tuple[tuple[str, str], ...] = ()


def cut(model: nn.Module) -> Cut:
    """The model's blocks and the modules around them.

    Raises:
        StrategyError: the model has no ModuleList of blocks, before anything changes.
    """
    found = largest_module_list(model)
    if found is None:
        raise StrategyError(f"{FIELD} > 1 cuts a model's blocks into stages, but {type(model).__name__} has no "
                            "nn.ModuleList of blocks: keep the repeated layers in one", field=FIELD)
    name, blocks = found
    before: list[str] = []
    after: list[str] = []
    parent, path = model, name.split(".") if name else []
    prefix = ""
    for part in path:
        seen = False
        for child_name, child in parent.named_children():
            if child_name == part:
                seen = True
                continue
            if child is not None and any(True for _ in child.parameters()):
                (after if seen else before).append(prefix + child_name)
        parent, prefix = getattr(parent, part), f"{prefix}{part}."
    return Cut(name, len(blocks), tuple(before), tuple(after), _tied(model, before, after))


def _tied(model: nn.Module, before: list[str], after: list[str]) -> tuple[tuple[str, str], ...]:
    """Each weight held both by a module of the first stage and one of the last, as (its name there, its name here)."""
    first = {id(p): f"{m}.{n}" for m in before for n, p in model.get_submodule(m).named_parameters()}
    return tuple((first[id(p)], f"{m}.{n}") for m in after
                 for n, p in model.get_submodule(m).named_parameters(remove_duplicate=False) if id(p) in first)


def chunk_blocks(count: int, chunks: int, where: str) -> list[range]:
    """`count` blocks as `chunks` contiguous equal ranges; StrategyError when they do not divide."""
    if count % chunks:
        fits = [c for c in range(1, count + 1) if count % c == 0]
        raise StrategyError(
            f"{where} has {count} blocks, which {chunks} pipeline chunks (pp_degree × virtual_pp_degree) do not "
            f"divide; use a product among {fits}", field=FIELD)
    size = count // chunks
    return [range(i * size, (i + 1) * size) for i in range(chunks)]


def prune(model: nn.Module, c: Cut, keep: set[int], first: bool, last: bool) -> None:
    """Drop, in place, what this rank does not run: other stages' blocks, and the embedding / head ends."""
    blocks = model.get_submodule(c.blocks)
    for i in range(c.size):
        if i not in keep:
            blocks._modules[str(i)] = None  # the slot stays, so the kept blocks keep their index (their names)
    for names, kept in ((c.before, first), (c.after, last)):
        if not kept:
            for name in names:
                parent, _, child = name.rpartition(".")
                model.get_submodule(parent)._modules[child] = None


def skeleton(model: nn.Module, c: Cut, keep: range, first: bool, last: bool) -> nn.Module:
    """A copy of `model`'s containers on the way to its blocks, holding only chunk `keep` (and the ends it runs);
    every other module, parameter and buffer is `model`'s own. It is the module a PipelineStage runs, and its
    parameter names are those of the whole model."""
    root = node = _shallow(model)
    for part in c.blocks.split(".") if c.blocks else []:
        original = node._modules[part]
        assert original is not None, part  # the path to the blocks is whole
        child = _shallow(original)
        node._modules[part] = child
        node = child
    prune(root, c, set(keep), first, last)
    return root


def _shallow(module: nn.Module) -> nn.Module:
    """The module with its own child, parameter and buffer tables (the entries themselves shared)."""
    out = copy.copy(module)
    out._modules = dict(module._modules)
    out._parameters = dict(module._parameters)
    out._buffers = dict(module._buffers)
    return out
