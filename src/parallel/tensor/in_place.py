"""Parallel layers for modules whose forward does more than their base class's (Gemma's embedding scales its output):
the module is kept, its weight becomes this rank's shard, and only the base class's step, the lookup or the matmul,
becomes the parallel layer's. Its own forward still runs around it, so what it adds cannot be lost."""

from __future__ import annotations

import inspect
from typing import Any

from torch import nn

__all__ = ["forward_of_its_own", "keep_forward", "reaches_base_forward"]

_LAYER = "_parallel_layer"  # on the kept module: the parallel layer its base-class step runs


def forward_of_its_own(module: nn.Module) -> bool:
    """Whether `module` is a subclass of nn.Linear or nn.Embedding whose forward is not the base class's."""
    for base in (nn.Linear, nn.Embedding):
        if isinstance(module, base) and type(module).forward is not base.forward:
            return True
    return False


def reaches_base_forward(module: nn.Module) -> bool:
    """Whether its forward reaches the base class's through `super().forward(...)`, the step a parallel layer takes
    over (a forward that computes with its weight directly would compute with a shard)."""
    try:
        source = inspect.getsource(type(module).forward)
    except (OSError, TypeError):
        return False
    return "super().forward(" in source


def _run_layer(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
    layer = getattr(self, _LAYER)
    for name in layer._parameters:  # the module's own, as they are now: FSDP2 swaps them (sharded, unsharded)
        layer._parameters[name] = self._parameters[name]
    return layer(*args, **kwargs)


# Each subclasses the base, so that in the kept class's MRO (the module's class, this, the base) the module's
# `super().forward` lands here rather than on the base.
_STEPS: dict[type, type] = {base: type(f"Parallel{base.__name__}Step", (base,), {"forward": _run_layer})
                            for base in (nn.Linear, nn.Embedding)}


_KEPT: dict[type, type] = {}


def _kept_class(cls: type) -> type:
    """The module's class with the parallel step under it: made once per class."""
    if cls in _KEPT:
        return _KEPT[cls]
    step = next(s for base, s in _STEPS.items() if issubclass(cls, base))
    kept = _KEPT[cls] = type(cls.__name__, (cls, step), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
    return kept


def keep_forward(module: nn.Module, layer: nn.Module) -> None:
    """Make `module` hold `layer`'s parameters and run `layer` where its forward calls its base class's."""
    for name, param in layer.named_parameters(recurse=False):
        setattr(module, name, param)
    if "bias" not in dict(layer.named_parameters(recurse=False)) and getattr(module, "bias", None) is not None:
        module.register_parameter("bias", None)  # (a row-parallel layer adds the bias after its reduce: the layer holds it)
    object.__setattr__(module, _LAYER, layer)  # not a child: its parameters are the module's own now
    module.__class__ = _kept_class(type(module))
