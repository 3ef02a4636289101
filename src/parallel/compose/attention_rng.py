"""Attention dropout of split heads from each mp rank's own random stream (tensor_init_seed's model-parallel generator):
the heads a rank holds draw masks of their own, as Megatron's and Paddle's attention do, while dropout on replicated
activations keeps drawing the stream every mp rank shares."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from torch import nn

from ..topology.groups import HybridGroup
from ..topology.rng import ModelParallelRNG
from .plan import Match

__all__ = ["fork_split_attention"]

_MARK = "_parallel_model_parallel_rng"


def fork_split_attention(model: nn.Module, matches: Iterable[Match], hcg: HybridGroup) -> list[str]:
    """Run the forward of every attention module whose projections the plan split by columns (its heads split over
    mp) and which drops attention probabilities (`attention_dropout` > 0) inside this rank's model-parallel stream;
    returns their names. Nothing at mp_degree 1."""
    if hcg.mp_rng is None:
        return []
    modules = dict(model.named_modules())
    names = sorted({m.name.rpartition(".")[0] for m in matches if m.style.startswith("colwise")})
    done = []
    for name in names:
        module = modules.get(name)
        if module is None or "Attention" not in type(module).__name__:
            continue
        if not float(getattr(module, "attention_dropout", 0.0) or 0.0) > 0 or getattr(module, _MARK, False):
            continue
        _fork(module, hcg.mp_rng)
        done.append(name)
    return done


def _fork(module: nn.Module, rng: ModelParallelRNG) -> None:
    forward = module.forward

    @functools.wraps(forward)
    def forked(*args: Any, **kwargs: Any) -> Any:
        with rng.fork():
            return forward(*args, **kwargs)

    module.forward = forked  # type: ignore[method-assign]
    setattr(module, _MARK, True)
