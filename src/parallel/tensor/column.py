"""ColumnParallelLinear: the weight's output rows split across the mp group, with Paddle's three speed-ups.

Linear computes y = x @ W.T, so splitting W on dim 0 (its rows) splits y's last dim: each rank computes
its block of outputs from the full input, and the input gradient is a sum of every rank's part.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Function
from torch.profiler import record_function

from ..topology.groups import HybridGroup
from ..topology.guard import guard
from . import collectives as comm
from . import grads
from .module import MpModule
from .sequence_linear import SequenceColumnMatmul
from .shards import divide, mark_sharded, shard_init_generator, shard_of

__all__ = ["ColumnParallelLinear"]

class _ColumnMatmul(Function):
    """y = x @ W.T + b with the backward of mp_async_allreduce and mp_fused_linear_param_grad_add.

    `weight`/`bias` are what the GEMM uses (the parameters, or their autocast copies); under the fused
    flag the gradients go in place into `params` (the nn.Parameters) and autograd gets None for them.
    Like Megatron's, the fused accumulation happens whenever this backward runs, even for
    `torch.autograd.grad(y, x)`.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, group, fused, params):
        ctx.save_for_backward(x, weight)
        ctx.group, ctx.fused, ctx.has_bias, ctx.params = group, fused, bias is not None, params
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        grad_out = grad_out.contiguous()
        grad_x = handle = None
        if ctx.needs_input_grad[0]:
            with record_function("ColumnParallelLinear.dx"):
                grad_x = grad_out @ weight
            # Launch the dx all-reduce now and compute dW/db while it is in flight; wait only before returning.
            handle = comm.all_reduce(grad_x, ctx.group, async_op=True)
        g2 = grad_out.reshape(-1, grad_out.shape[-1])
        x2 = x.reshape(-1, x.shape[-1])
        grad_w = grad_b = None
        with record_function("ColumnParallelLinear.dW (overlaps the dx all-reduce)"):
            if ctx.fused:
                if ctx.needs_input_grad[1]:
                    grads.accumulate_weight_grad(ctx.params[0], g2, x2)
                if ctx.has_bias and ctx.needs_input_grad[2]:
                    grads.accumulate_bias_grad(ctx.params[1], g2)
            else:
                if ctx.needs_input_grad[1]:
                    grad_w = grads.weight_grad(g2, x2)
                if ctx.has_bias and ctx.needs_input_grad[2]:
                    grad_b = g2.sum(0)
        if handle is not None:
            with record_function("ColumnParallelLinear.wait dx all-reduce"), guard("async dx all-reduce", ctx.group):
                handle.wait()
        return grad_x, grad_w, grad_b, None, None, None


class ColumnParallelLinear(MpModule):
    """Linear layer whose weight rows (outputs) are split across the mp group.

    `weight` is this rank's contiguous block of rows of the full `[out, in]` weight, `bias` its block.
    Flags come from the strategy the group resolved (`hcg.resolved.mp`), read once here.

    Args:
        gather_output: all-gather the output so every rank gets the full `[..., out]` (False keeps
            `[..., out / mp]`, to feed a RowParallelLinear with input_is_parallel=True).
        sequence_dim: under sequence parallelism, the input's sequence dimension (0 for `[s, b, h]`, as
            Paddle and Megatron lay it out; 1 for batch-first models). The input is this rank's block of
            the sequence; it is all-gathered, and the output covers the whole sequence.
        hcg: the hybrid group; None means `parallel.current()`.
        init: "full" (default) builds the full nn.Linear weight with torch's RNG and keeps this rank's rows,
            so shards equal the single-process layer's slices for the same seed; "shard" initialises only
            the shard (same distribution, no full-size temporary) for layers too big for that; "empty"
            leaves the shard uninitialised, for weights copied in next (`parallelize`, checkpoints).

    Example::

        up = ColumnParallelLinear(1024, 4096, gather_output=False)
        down = RowParallelLinear(4096, 1024, input_is_parallel=True)
        y = down(F.gelu(up(x)))
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        gather_output: bool = True,
        sequence_dim: int = 0,
        hcg: HybridGroup | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        init: str = "full",
    ) -> None:
        super().__init__(hcg, init)
        self.in_features, self.out_features = in_features, out_features
        self.gather_output, self.sequence_dim = gather_output, sequence_dim
        local_out = divide(type(self).__name__, "out_features", out_features, self.mp_size)
        weight, bias_t = _init_linear(in_features, out_features, local_out, bias, self.mp_rank, self.mp_size, device, dtype, init)
        self.weight = mark_sharded(nn.Parameter(weight), 0)
        if bias_t is not None:
            self.bias = mark_sharded(nn.Parameter(bias_t), 0)
        else:
            self.register_parameter("bias", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mp_size == 1:
            return F.linear(x, self.weight, self.bias)
        if self.settings.sequence_parallel:
            y = self._sequence_matmul(x)
        elif self.settings.async_allreduce:
            grads.warn_if_no_overlap(x)
            if not self.settings.skip_c_identity:
                x = comm.identity_node(x)
            y = self._async_matmul(x)
        else:
            y = F.linear(comm.copy_to_mp(x, self.group), self.weight, self.bias)
        return comm.gather_from_mp(y, self.group) if self.gather_output else y

    def _async_matmul(self, x: torch.Tensor) -> torch.Tensor:
        x, w, b = self._cast(x)
        with torch.autocast(x.device.type, enabled=False):
            return _ColumnMatmul.apply(x, w, b, self.group, self.settings.fused_linear_param_grad_add, (self.weight, self.bias))

    def _sequence_matmul(self, x: torch.Tensor) -> torch.Tensor:
        s = self.settings
        x, w, b = self._cast(x)
        options = (s.fused_linear_param_grad_add, s.sp_async_reduce_scatter, s.recompute_allgather)
        with torch.autocast(x.device.type, enabled=False):
            return SequenceColumnMatmul.apply(x, w, b, self.group, self.sequence_dim, options, (self.weight, self.bias))

    def _cast(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The custom-backward GEMMs cast their inputs themselves under autocast, as torch.amp.custom_fwd
        does, so forward and backward run in one dtype."""
        w: torch.Tensor = self.weight
        b: torch.Tensor | None = self.bias
        device = x.device.type
        if torch.is_autocast_enabled(device):
            dtype = torch.get_autocast_dtype(device)
            x, w, b = x.to(dtype), w.to(dtype), b.to(dtype) if b is not None else None
        return x, w, b

    def extra_repr(self) -> str:
        s = self.settings
        return (
            f"in_features={self.in_features}, out_features={self.out_features} (local {self.weight.shape[0]}), "
            f"gather_output={self.gather_output}, async_allreduce={s.async_allreduce}, "
            f"skip_c_identity={s.skip_c_identity}, fused_linear_param_grad_add={s.fused_linear_param_grad_add}, "
            f"sequence_parallel={s.sequence_parallel} (dim {self.sequence_dim})"
        )


def _init_linear(in_f, out_f, local_out, bias, rank, parts, device, dtype, init):
    """Weight [local_out, in] and bias for one column shard, initialised like nn.Linear."""
    if init == "empty":
        w = torch.empty(local_out, in_f, device=device, dtype=dtype)
        return w, (torch.empty(local_out, device=device, dtype=dtype) if bias else None)
    if init == "full":
        full = nn.Linear(in_f, out_f, bias=bias, device=device, dtype=dtype)
        w = shard_of(full.weight.detach(), 0, rank, parts)
        b = shard_of(full.bias.detach(), 0, rank, parts) if bias else None
        return w, b
    gen = shard_init_generator(device, rank)
    bound = 1 / math.sqrt(in_f) if in_f > 0 else 0  # kaiming_uniform(a=sqrt(5)) on fan_in = in_f
    w = torch.empty(local_out, in_f, device=device, dtype=dtype).uniform_(-bound, bound, generator=gen)
    b = torch.empty(local_out, device=device, dtype=dtype).uniform_(-bound, bound, generator=gen) if bias else None
    return w, b
