"""Weight gradients of the parallel linears: the fused accumulation into main_grad, and which buffer to step with.

Shared by the column GEMM and its sequence-parallel form, and read by the optimizer wrapper.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable

import torch
from torch import nn

from ..topology.dtensors import is_data_sharded

__all__ = ["accumulate_bias_grad", "accumulate_weight_grad", "add_main_grad", "grad_of", "warn_if_no_overlap",
           "weight_grad"]

_warned_overlap = False


def warn_if_no_overlap(x: torch.Tensor) -> None:
    """On CUDA the all-reduce overlaps the dW GEMM only if kernels launch in order (Megatron's advice)."""
    global _warned_overlap
    if _warned_overlap or not x.is_cuda or os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1":
        return
    _warned_overlap = True
    warnings.warn(
        "mp_async_allreduce: set CUDA_DEVICE_MAX_CONNECTIONS=1 so the dx all-reduce is scheduled before the "
        "dW GEMM; without it the two may not overlap",
        RuntimeWarning,
        stacklevel=4,
    )


def accumulate_weight_grad(param: nn.Parameter, grad_out: torch.Tensor, inp: torch.Tensor) -> None:
    """param.main_grad (or .grad) += grad_out.T @ inp, as one accumulating GEMM (beta = 1): no dW temporary."""
    target = getattr(param, "main_grad", None)
    if target is None:
        if param.grad is None:
            # First micro-batch: the GEMM writes the buffer it creates (cast only under autocast).
            param.grad = (grad_out.t() @ inp).to(param.dtype)
            return
        target = param.grad
    if grad_out.dtype == target.dtype:
        target.addmm_(grad_out.t(), inp)
    elif target.is_cuda:
        torch.addmm(target, grad_out.t(), inp, out_dtype=target.dtype, out=target)  # bf16 GEMM, fp32 accumulate
    else:
        # CPU has no mixed-dtype GEMM: upcast the activations (not a dW-sized temporary).
        target.addmm_(grad_out.t().to(target.dtype), inp.to(target.dtype))


def accumulate_bias_grad(param: nn.Parameter, grad_out: torch.Tensor) -> None:
    target = getattr(param, "main_grad", None)
    if target is None:
        if param.grad is None:
            param.grad = grad_out.sum(0, dtype=param.dtype)
            return
        target = param.grad
    target.add_(grad_out.sum(0, dtype=target.dtype))


def weight_grad(grad_out: torch.Tensor, inp: torch.Tensor) -> torch.Tensor:
    """dW = grad_out.T @ inp (a named function so tests can see when it runs)."""
    return grad_out.t() @ inp


def add_main_grad(params: Iterable[nn.Parameter] | nn.Module, dtype: torch.dtype = torch.float32) -> None:
    """Give each parameter a zeroed `main_grad` buffer (fp32 by default), where gradients then accumulate."""
    if isinstance(params, nn.Module):
        params = params.parameters()
    for p in params:
        # Frozen parameters get no gradient at all; FSDP2's shards (DTensors) get theirs from its reduce-scatter.
        if p.requires_grad and getattr(p, "main_grad", None) is None and not is_data_sharded(p):
            p.main_grad = torch.zeros_like(p, dtype=dtype, memory_format=torch.contiguous_format)  # type: ignore[attr-defined]


def grad_of(p: torch.Tensor) -> torch.Tensor | None:
    """The gradient to step with: main_grad where the parameter has one (folding in any .grad that
    autograd accumulated outside the fused path), else .grad."""
    main = getattr(p, "main_grad", None)
    if main is None or not p.requires_grad:
        return p.grad
    if p.grad is not None and p.grad is not main:
        main.add_(p.grad)
    p.grad = None
    return main
