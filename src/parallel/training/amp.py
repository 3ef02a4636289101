"""Mixed precision from the strategy's `amp` / `amp_configs`: autocast, pure fp16/bf16 weights, and a loss
scaler with Paddle's rules, whose skip decision is the same on every rank.

torch's GradScaler shrinks the scale on every overflow; Paddle's shrinks it only after
`decr_every_n_nan_or_inf` overflowing steps (a clean step resets the count). That cannot be expressed with
GradScaler, so the scaler here is this project's own, a few lines long.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from strategy import AmpSettings

from ..topology.groups import HybridGroup, current
from ..topology.dtensors import is_data_sharded, local
from ..topology.guard import guard

__all__ = ["LossScaler", "autocast", "cast_for_amp", "found_nonfinite"]

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


@contextlib.contextmanager
def autocast(*, hcg: HybridGroup | None = None) -> Iterator[None]:
    """torch.autocast as the resolved strategy says: fp16 (or bf16) when `amp` is on, a no-op otherwise.

    Example::

        with parallel.autocast():
            loss = model(ids, labels=ids).loss
        opt.scale(loss).backward()
    """
    hcg = hcg or current()
    amp = hcg.resolved.amp
    device = hcg.mesh.device_type if hcg.mesh is not None else "cpu"
    with torch.autocast(device, dtype=DTYPES[amp.dtype], enabled=amp.enabled):
        yield


def cast_for_amp(model: nn.Module, *, hcg: HybridGroup | None = None) -> nn.Module:
    """Under use_pure_fp16 / use_pure_bf16: the model's weights in that dtype (normalisation layers stay fp32, as
    Paddle's O2 keeps them); HybridParallelOptimizer then updates fp32 master copies. Otherwise unchanged.
    Call it before building the optimizer. Parameters FSDP2 already shards stay fp32: its mixed-precision policy
    gathers them in the low dtype for compute, and the fp32 shards are the masters.

    A normalisation layer kept in fp32 returns its output in the dtype of its input, as Paddle's O2 norms do: an fp32
    weight times a low-precision value would otherwise make the output fp32, and autocast would then cast it again
    for every layer that reads it (q, k and v, gate and up: five copies kept for the backward instead of one)."""
    hcg = hcg or current()
    amp = hcg.resolved.amp
    if not (amp.enabled and amp.pure):
        return model
    dtype = DTYPES[amp.dtype]
    for module in model.modules():
        if "norm" in type(module).__name__.lower():
            if not getattr(module, "_parallel_output_as_input", False):  # once, however often cast_for_amp is called
                module.register_forward_hook(_output_as_input)
                setattr(module, "_parallel_output_as_input", True)
            continue
        for name, p in module.named_parameters(recurse=False):
            if not is_data_sharded(p):
                p.data = p.data.to(dtype)
    return model


def _output_as_input(module: nn.Module, args: tuple, output: Any) -> Any:
    """A norm's output in its input's dtype (the low one under pure amp; fp32 where the stream is fp32)."""
    first = args[0] if args else None
    if torch.is_tensor(first) and torch.is_tensor(output) and output.is_floating_point() \
            and output.dtype != first.dtype and first.is_floating_point():
        return output.to(first.dtype)
    return output


class LossScaler:
    """Dynamic loss scaling with Paddle's rules (update_loss_scaling): grow by incr_ratio after
    incr_every_n_steps clean steps; shrink by decr_ratio (never below 1) after decr_every_n_nan_or_inf steps
    with inf/NaN, counted until a clean step resets them."""

    def __init__(self, amp: AmpSettings) -> None:
        self.settings = amp
        self.scale = float(amp.init_loss_scaling)
        self.good_steps = 0
        self.bad_steps = 0

    def update(self, found_inf: bool) -> None:
        s = self.settings
        if not s.use_dynamic_loss_scaling:
            return
        if found_inf:
            self.good_steps, self.bad_steps = 0, self.bad_steps + 1
            if self.bad_steps == s.decr_every_n_nan_or_inf:
                self.scale = max(self.scale * s.decr_ratio, 1.0)
                self.bad_steps = 0
        else:
            self.bad_steps, self.good_steps = 0, self.good_steps + 1
            if self.good_steps == s.incr_every_n_steps:
                grown = self.scale * s.incr_ratio
                self.scale = grown if math.isfinite(grown) else self.scale
                self.good_steps = 0

    def state_dict(self) -> dict[str, float]:
        return {"scale": self.scale, "good_steps": self.good_steps, "bad_steps": self.bad_steps}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.scale, self.good_steps, self.bad_steps = float(state["scale"]), int(state["good_steps"]), int(state["bad_steps"])


def found_nonfinite(grads: Sequence[torch.Tensor]) -> bool:
    """Whether any rank of the whole world holds an inf/NaN in any of its gradients: one all-reduce, so every
    rank skips (or takes) the same step and changes the scale identically."""
    device = grads[0].device if grads else torch.device("cpu")
    flag = torch.zeros((), device=device)
    for g in grads:
        flag = torch.maximum(flag, (~torch.isfinite(local(g))).any().to(flag.dtype))
    if dist.is_initialized() and dist.get_world_size() > 1:
        with guard("found-inf (max over every rank)", None):
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag)
