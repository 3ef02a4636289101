"""The column-parallel GEMM under sequence parallelism: all-gather the sequence in, reduce-scatter dx out.

Forward: x is this rank's block of the sequence; all-gather it, y = x_full @ W.T + b (this rank's output
columns, the whole sequence). Backward: dx_full = dy @ W is a partial sum over the mp group (each rank holds
some output columns), and each rank needs only its block of the sequence: a reduce-scatter, not an
all-reduce. dW = dy.T @ x_full needs the gathered input: saved, or (recompute_allgather) gathered again.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch.autograd import Function
from torch.profiler import record_function

from ..topology.guard import guard
from . import grads
from .sequence import all_gather_sequence, reduce_scatter_sequence

__all__ = ["SequenceColumnMatmul"]


class SequenceColumnMatmul(Function):
    """y = all_gather_seq(x) @ W.T + b, with sp_async_reduce_scatter, recompute_allgather and the fused
    weight-gradient accumulation (mp_fused_linear_param_grad_add) in its backward."""

    @staticmethod
    def forward(ctx, x, weight, bias, group, dim, options, params):
        fused, async_reduce_scatter, recompute = options
        x_full = all_gather_sequence(x, dim, group)[0]
        # recompute_allgather: keep only the local block for the backward (the saved activation is mp times
        # smaller) and gather it again there.
        ctx.save_for_backward(x if recompute else x_full, weight)
        ctx.group, ctx.dim, ctx.params, ctx.has_bias = group, dim, params, bias is not None
        ctx.fused, ctx.async_reduce_scatter, ctx.recompute = fused, async_reduce_scatter, recompute
        return F.linear(x_full, weight, bias)

    @staticmethod
    def backward(ctx, grad_out):
        saved_x, weight = ctx.saved_tensors
        grad_out = grad_out.contiguous()
        gather = None
        if ctx.recompute:
            # Launch the all-gather of the input now: it runs while dx is computed.
            x_full, gather = all_gather_sequence(saved_x, ctx.dim, ctx.group, async_op=True)
        else:
            x_full = saved_x
        grad_x = reduce = None
        if ctx.needs_input_grad[0]:
            with record_function("ColumnParallelLinear.dx"):
                grad_x_full = grad_out @ weight
            # sp_async_reduce_scatter: launch the reduce-scatter and compute dW/db while it is in flight.
            grad_x, reduce = reduce_scatter_sequence(grad_x_full, ctx.dim, ctx.group, async_op=ctx.async_reduce_scatter,
                                                     layer="ColumnParallelLinear (backward)")
        if gather is not None:
            with record_function("ColumnParallelLinear.wait input all-gather"), guard("input all-gather", ctx.group):
                gather.wait()
        g2 = grad_out.reshape(-1, grad_out.shape[-1])
        x2 = x_full.reshape(-1, x_full.shape[-1])
        grad_w = grad_b = None
        with record_function("ColumnParallelLinear.dW (overlaps the dx reduce-scatter)"):
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
        if reduce is not None:
            with record_function("ColumnParallelLinear.wait dx reduce-scatter"), guard("async dx reduce-scatter", ctx.group):
                reduce.wait()
        return grad_x, grad_w, grad_b, None, None, None, None
