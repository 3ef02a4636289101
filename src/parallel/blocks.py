"""A model's blocks: the repeated units that recompute wraps, sharding makes FSDP units of, and pipelines cut between.

Hugging Face models name their block classes (`_no_split_modules`: "LlamaDecoderLayer", ...); any other model's
blocks are the children of its largest ModuleList (torchtitan's `layers`, the demo's `blocks`).
"""

from __future__ import annotations

from torch import nn

__all__ = ["STAND_IN", "block_names", "largest_module_list"]

# Set on a module that stands in for a block another pipeline stage holds: not a block here.
STAND_IN = "_parallel_stand_in"


def block_names(model: nn.Module) -> list[str]:
    """The qualified names of `model`'s blocks, in module order; empty when it has neither marker.

    Blocks nested in another block are left out (a block is a unit on its own).
    """
    classes = set(getattr(model, "_no_split_modules", None) or ())
    if classes:
        names = [n for n, m in model.named_modules() if n and type(m).__name__ in classes]
        outer = [n for n in names if not any(n.startswith(o + ".") for o in names if o != n)]
        if outer:
            return outer
    found = largest_module_list(model)
    if found is None:
        return []
    prefix, modules = found
    # A pipeline stage keeps other stages' slots as None: only the blocks it holds are blocks here.
    return [f"{prefix}.{k}" if prefix else str(k) for k, m in enumerate(modules._modules.values())
            if m is not None and not getattr(m, STAND_IN, False)]


def largest_module_list(model: nn.Module) -> tuple[str, nn.ModuleList] | None:
    """(name, list) of the ModuleList with the most entries (the first such in module order); None if there is none."""
    best: tuple[str, nn.ModuleList] | None = None
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) > 0 and (best is None or len(module) > len(best[1])):
            best = (name, module)
    return best
