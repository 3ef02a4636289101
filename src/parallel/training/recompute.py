"""Recompute (activation checkpointing) of the modules the strategy names, with torch.utils.checkpoint.

`recompute_configs.checkpoints` holds globs on module names, as plans do ("model.layers.*"); none named means
every block of the model (Paddle's meaning of a bare `recompute: true`: every decoder layer). Each module's
forward runs under non-reentrant checkpointing with the RNG state preserved, so dropout draws the same masks
when the forward is recomputed in the backward, and without a transformers key/value cache: the replay would append
its keys to the cache a second time (transformers' own gradient checkpointing drops the cache too).
"""

from __future__ import annotations

import fnmatch
import functools
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from strategy import StrategyError

from ..blocks import block_names
from ..topology.groups import HybridGroup, current
from ..topology.rng import ModelParallelRNG

__all__ = ["apply_recompute", "recompute_targets"]

FIELD = "recompute_configs.checkpoints"
_MARK = "_parallel_recompute"


def apply_recompute(model: nn.Module, *, hcg: HybridGroup | None = None, checkpoints: tuple[str, ...] | None = None) -> list[str]:
    """Wrap the forward of each module whose name matches a glob of `recompute_configs.checkpoints` (or
    `checkpoints`, given; every block of the model when none is named) in torch.utils.checkpoint; returns the names
    wrapped. A no-op when `recompute` is off.

    Raises:
        StrategyError: a glob matches no module, or none is named and the model has no blocks (saying what to name).
    """
    hcg = hcg or current()
    modules = dict(model.named_modules())
    done: list[str] = []
    for name in recompute_targets(model, hcg, checkpoints):
        if any(name.startswith(parent + ".") for parent in done):
            continue  # inside a module already recomputed as a whole
        _wrap(modules[name], hcg.mp_rng)
        done.append(name)
    return done


def recompute_targets(model: nn.Module, hcg: HybridGroup, checkpoints: tuple[str, ...] | None = None) -> list[str]:
    """The names of the modules to recompute, sorted: the globs' matches, or every block when no glob is named."""
    settings = hcg.resolved.recompute
    if checkpoints is None:
        if not settings.enabled:
            return []
        checkpoints = settings.checkpoints
    names = [n for n, _ in model.named_modules() if n]
    if not checkpoints:
        blocks = block_names(model)
        if not blocks:
            raise StrategyError(
                f"recompute is on and {FIELD} names no modules, so every block would be recomputed, but "
                f"{type(model).__name__} has no blocks (no Hugging Face _no_split_modules, no nn.ModuleList); name the "
                f"modules to recompute with globs on module names, e.g. checkpoints: \"{_suggest(names)}\"", field=FIELD)
        return blocks
    wrapped: list[str] = []
    for pattern in checkpoints:
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if not hits:
            raise StrategyError(f"{FIELD} glob {pattern!r} matches no module of {type(model).__name__} (names look like "
                                f"{', '.join(repr(n) for n in names[:3])}; Paddle's variable names such as fc_0.tmp_0 do not "
                                "exist in PyTorch)", field=FIELD)
        wrapped += hits
    return sorted(set(wrapped))


def _wrap(module: nn.Module, rng: ModelParallelRNG | None) -> None:
    if getattr(module, _MARK, False):
        return
    forward = module.forward

    @functools.wraps(forward)
    def recomputed(*args: Any, **kwargs: Any) -> Any:
        if not (module.training and torch.is_grad_enabled()):  # no training backward, no replay (as transformers)
            return forward(*args, **kwargs)
        kwargs = {k: None if _is_kv_cache(v) else v for k, v in kwargs.items()}
        # checkpoint replays the default generators (preserve_rng_state); the model-parallel stream is replayed here
        return checkpoint(_replaying(forward, rng), *args, use_reentrant=False, preserve_rng_state=True, **kwargs)

    module.forward = recomputed  # type: ignore[method-assign]
    setattr(module, _MARK, True)


def _replaying(forward: Callable[..., Any], rng: ModelParallelRNG | None) -> Callable[..., Any]:
    """`forward`, whose second call (the recomputation in the backward) draws the model-parallel stream from where the
    first found it, so dropout inside the tensor-parallel region draws the same masks; the live stream is untouched."""
    if rng is None:
        return forward
    start = rng.state_dict()
    calls = 0

    def replayed(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            return forward(*args, **kwargs)
        live = rng.state_dict()
        rng.load_state_dict(start)
        try:
            return forward(*args, **kwargs)
        finally:
            rng.load_state_dict(live)

    return replayed


def _is_kv_cache(value: Any) -> bool:
    """A transformers key/value cache (the argument past_key_value(s) or cache, whichever the release names it)."""
    cache_utils = sys.modules.get("transformers.cache_utils")  # loaded with any transformers model
    return cache_utils is not None and isinstance(value, cache_utils.Cache)


def _suggest(names: list[str]) -> str:
    """A glob for the repeated blocks of a model (layers.*, blocks.*, h.*), else the first module."""
    for n in names:
        parts = n.split(".")
        if len(parts) >= 2 and parts[-1].isdigit():
            return ".".join(parts[:-1]) + ".*"
    return names[0] if names else "layers.*"
