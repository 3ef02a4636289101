"""ParallelCrossEntropy: cross entropy over logits whose vocabulary dim is split across the mp group.

The full logits are never gathered: three small all-reduces (max, and the target logit with the sum of
exponentials) give each row's log-softmax, and the gradient is softmax minus one-hot, computed locally.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.autograd import Function

from ..topology.groups import HybridGroup
from ..topology.guard import guard
from .module import MpModule

__all__ = ["ParallelCrossEntropy"]

_REDUCTIONS = ("none", "mean", "sum")


class _VocabParallelCrossEntropy(Function):
    @staticmethod
    def forward(ctx, logits, target, ignore_index, group, vocab_start):
        # logits [N, V/mp], target [N]; the loss is log(sum_j exp(z_j)) - z_target, shifted by max(z).
        row_max = logits.max(dim=-1).values
        with guard("cross-entropy max all-reduce", group):
            dist.all_reduce(row_max, op=dist.ReduceOp.MAX, group=group)
        shifted = logits - row_max.unsqueeze(-1)
        vocab_end = vocab_start + logits.shape[-1]
        outside = (target < vocab_start) | (target >= vocab_end)
        local_target = (target - vocab_start).masked_fill(outside, 0)
        picked = shifted.gather(-1, local_target.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
        exp = shifted.exp()
        both = torch.stack([picked, exp.sum(dim=-1)])
        with guard("cross-entropy sum all-reduce", group):
            dist.all_reduce(both, group=group)  # one collective for the target logit and the partition sum
        picked, sum_exp = both[0], both[1]
        ignored = target == ignore_index
        loss = (sum_exp.log() - picked).masked_fill(ignored, 0.0)
        softmax = exp.div_(sum_exp.unsqueeze(-1))
        ctx.save_for_backward(softmax, local_target, outside, ignored)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        if getattr(ctx, "used", False):
            raise RuntimeError("ParallelCrossEntropy's backward reuses its softmax buffer in place and runs once; "
                               "retain_graph=True through it is not supported")
        ctx.used = True
        softmax, local_target, outside, ignored = ctx.saved_tensors
        grad = softmax  # reused in place (as Megatron does): saves a [N, V/mp] buffer
        rows = torch.arange(grad.shape[0], device=grad.device)
        grad[rows, local_target] -= (~outside).to(grad.dtype)
        grad.mul_((grad_loss * (~ignored).to(grad_loss.dtype)).unsqueeze(-1))
        return grad, None, None, None, None


class ParallelCrossEntropy(MpModule):
    """Cross entropy for logits sharded on the last dim (e.g. a ColumnParallelLinear head, gather_output=False).

    forward(logits `[..., V / mp]`, target `[...]`) equals
    `F.cross_entropy(full_logits.reshape(-1, V), target.reshape(-1), reduction=..., ignore_index=...)`,
    reshaped back to `target.shape` for reduction="none". Targets outside `[0, V)` other than
    `ignore_index` are not checked (that would need a device sync).
    """

    def __init__(self, *, reduction: str = "mean", ignore_index: int = -100, hcg: HybridGroup | None = None) -> None:
        if reduction not in _REDUCTIONS:
            raise ValueError(f"reduction must be one of {', '.join(_REDUCTIONS)}, got {reduction!r}")
        super().__init__(hcg)
        self.reduction, self.ignore_index = reduction, ignore_index

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if logits.shape[:-1] != target.shape:
            raise ValueError(f"logits {tuple(logits.shape)} and target {tuple(target.shape)} disagree before the vocab dim")
        flat_logits, flat_target = logits.reshape(-1, logits.shape[-1]), target.reshape(-1)
        if self.mp_size == 1:
            loss = F.cross_entropy(flat_logits, flat_target, reduction=self.reduction, ignore_index=self.ignore_index)
            return loss.reshape(target.shape) if self.reduction == "none" else loss
        start = self.mp_rank * logits.shape[-1]
        loss = _VocabParallelCrossEntropy.apply(flat_logits, flat_target, self.ignore_index, self.group, start)
        if self.reduction == "none":
            return loss.reshape(target.shape)
        if self.reduction == "sum":
            return loss.sum()
        return loss.sum() / (flat_target != self.ignore_index).sum()  # nan when every target is ignored, as torch

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, ignore_index={self.ignore_index}"
