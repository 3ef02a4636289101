"""Rank-side checks that each mp flag changes what the layers do: graph nodes, copies, collectives, order."""

from __future__ import annotations

import torch

import parallel
from parallel.tensor import collectives as comm
from parallel.tensor import grads
from rank_helpers import RecordedWait, OpCounter, close, count_collectives, graph_nodes, init, make_strategy

B, IN, OUT = 6, 8, 12


def column_graph_nodes(world: int, flags) -> int:
    init(make_strategy(world, flags=flags))
    layer = parallel.ColumnParallelLinear(IN, OUT, gather_output=False)
    return graph_nodes(layer(torch.randn(B, IN, requires_grad=True)))


def row_backward_copies(world: int, flags) -> int:
    """aten clone/copy ops run during RowParallelLinear's backward."""
    init(make_strategy(world, flags=flags))
    layer = parallel.RowParallelLinear(IN, OUT, input_is_parallel=True)
    y = layer(torch.randn(B, IN // world, requires_grad=True))
    counter = OpCounter()
    with counter:
        y.backward(torch.ones_like(y))
    return counter.ops["clone"] + counter.ops["copy_"]


def column_collectives(world: int, flags, gather_output: bool) -> tuple[dict, dict]:
    init(make_strategy(world, flags=flags))
    layer = parallel.ColumnParallelLinear(IN, OUT, gather_output=gather_output)
    x = torch.randn(B, IN, requires_grad=True)
    with count_collectives() as forward:
        y = layer(x)
    with count_collectives() as backward:
        y.sum().backward()
    return dict(forward), dict(backward)


def async_allreduce_is_issued_before_the_weight_grad(world: int, fused: bool) -> list[str]:
    """Record the order of: dx all-reduce launched, dW computed, all-reduce waited on."""
    init(make_strategy(world, flags=(True, False, fused)))
    layer = parallel.ColumnParallelLinear(IN, OUT)
    events: list[str] = []
    real_all_reduce, real_weight_grad, real_accumulate = comm.all_reduce, grads.weight_grad, grads.accumulate_weight_grad

    def all_reduce(t, group, *, async_op=False):
        events.append("all_reduce(async)" if async_op else "all_reduce")
        work = real_all_reduce(t, group, async_op=async_op)
        return RecordedWait(work, events) if async_op else work

    def weight_grad(*args):
        events.append("dW")
        return real_weight_grad(*args)

    def accumulate(*args):
        events.append("dW")
        return real_accumulate(*args)

    comm.all_reduce, grads.weight_grad, grads.accumulate_weight_grad = all_reduce, weight_grad, accumulate
    try:
        y = layer(torch.randn(B, IN, requires_grad=True))
        y.sum().backward()
    finally:
        comm.all_reduce, grads.weight_grad, grads.accumulate_weight_grad = real_all_reduce, real_weight_grad, real_accumulate
    return events


def fused_accumulates_into_main_grad(world: int, micro_batches: int) -> None:
    """K backward passes without zero_grad: main_grad holds the sum of the unfused gradients; .grad stays None."""
    hcg = init(make_strategy(world, flags=(True, False, True)))
    torch.manual_seed(0)
    fused = parallel.ColumnParallelLinear(IN, OUT, gather_output=False)
    parallel.add_main_grad(fused)
    parallel.destroy()
    init(make_strategy(world, flags=(True, False, False)))
    torch.manual_seed(0)
    plain = parallel.ColumnParallelLinear(IN, OUT, gather_output=False)
    gen = torch.Generator().manual_seed(3)
    for _ in range(micro_batches):
        x = torch.randn(B, IN, generator=gen)
        proj = torch.randn(B, OUT // world, generator=gen)
        (fused(x.clone().requires_grad_()) * proj).sum().backward()
        (plain(x.clone().requires_grad_()) * proj).sum().backward()
    assert fused.weight.grad is None and fused.bias.grad is None, "fused flag must bypass .grad when main_grad exists"
    close(fused.weight.main_grad, plain.weight.grad, "weight main_grad", rtol=1e-6, atol=1e-6)
    close(fused.bias.main_grad, plain.bias.grad, "bias main_grad", rtol=1e-6, atol=1e-6)
    assert hcg.mp_size == world


def fused_without_main_grad_accumulates_into_grad(world: int) -> None:
    init(make_strategy(world, flags=(True, False, True)))
    torch.manual_seed(0)
    layer = parallel.ColumnParallelLinear(IN, OUT, gather_output=False)
    x = torch.randn(B, IN)
    layer(x).sum().backward()
    first = layer.weight.grad.clone()
    layer(x).sum().backward()
    close(layer.weight.grad, 2 * first, "accumulated .grad", rtol=1e-6, atol=1e-6)


def mp_degree_1_layers_are_plain_torch(world: int) -> int:
    """With mp_degree 1 (dp = world) the layers issue no collective and match nn.Linear exactly."""
    init(make_strategy(1, dp=world, flags=(True, True, True)))
    torch.manual_seed(0)
    ref = torch.nn.Linear(IN, OUT)
    torch.manual_seed(0)
    col = parallel.ColumnParallelLinear(IN, OUT)
    x = torch.randn(B, IN)
    with count_collectives() as counts:
        y = col(x)
        y.sum().backward()
    assert torch.equal(y, ref(x))
    return sum(counts.values())


def bf16_fused_accumulates_in_fp32(world: int, micro_batches: int) -> tuple[float, float]:
    """bf16 weights, fp32 main_grad: the fused sum matches an fp32 reference; a bf16 .grad sum drifts more.

    Returns (relative error of fused main_grad, relative error of unfused bf16 .grad) against the reference.
    """
    init(make_strategy(world, flags=(True, False, True)))
    torch.manual_seed(0)
    fused = parallel.ColumnParallelLinear(32, 32, gather_output=False, dtype=torch.bfloat16)
    parallel.add_main_grad(fused)
    parallel.destroy()
    init(make_strategy(world, flags=(True, False, False)))
    torch.manual_seed(0)
    plain = parallel.ColumnParallelLinear(32, 32, gather_output=False, dtype=torch.bfloat16)
    gen = torch.Generator().manual_seed(5)
    reference = torch.zeros(32 // world, 32, dtype=torch.float64)
    for _ in range(micro_batches):
        x = torch.randn(16, 32, generator=gen).to(torch.bfloat16)
        g = torch.randn(16, 32 // world, generator=gen).to(torch.bfloat16)
        fused(x).backward(g)
        plain(x).backward(g)
        reference += g.double().t() @ x.double()
    assert fused.weight.main_grad.dtype == torch.float32 and fused.weight.grad is None
    close(fused.weight.main_grad.double(), reference, "fp32 main_grad", rtol=1.6e-2, atol=1e-2)
    err = lambda t: float((t.double() - reference).norm() / reference.norm())  # noqa: E731
    return err(fused.weight.main_grad), err(plain.weight.grad)


def fused_path_does_not_hide_nan_or_inf(world: int) -> tuple[bool, bool]:
    init(make_strategy(world, flags=(True, False, True)))
    layer = parallel.ColumnParallelLinear(IN, OUT, gather_output=False)
    parallel.add_main_grad(layer)
    x = torch.randn(B, IN)
    x[0, 0] = float("nan")
    layer(x).sum().backward()
    has_nan = bool(torch.isnan(layer.weight.main_grad).any())
    layer.weight.main_grad.zero_()
    x = torch.randn(B, IN)
    x[1, 1] = float("inf")
    layer(x).sum().backward()
    has_inf = bool((~torch.isfinite(layer.weight.main_grad)).any())
    return has_nan, has_inf


def async_path_works_under_autocast(world: int, fused: bool) -> None:
    """bf16 autocast: the custom-backward GEMM runs forward and backward in one dtype, grads reach fp32 params."""
    init(make_strategy(world, flags=(True, True, fused)))
    torch.manual_seed(0)
    layer = parallel.ColumnParallelLinear(IN, OUT, gather_output=False)
    torch.manual_seed(0)
    ref = parallel.ColumnParallelLinear(IN, OUT, gather_output=False)
    x = torch.randn(B, IN)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x.clone().requires_grad_())
    assert y.dtype == torch.bfloat16
    y.float().sum().backward()
    ref(x.clone().requires_grad_()).sum().backward()
    assert layer.weight.grad.dtype == torch.float32
    close(layer.weight.grad, ref.weight.grad, "autocast weight grad", rtol=2e-2, atol=5e-2)


def shard_init_works_with_any_seed(world: int) -> list[int]:
    init(make_strategy(world))
    torch.manual_seed(2**63 - 1)
    layer = parallel.VocabParallelEmbedding(16, 4, init="shard")
    return list(layer.weight.shape)


def cross_entropy_refuses_a_second_backward_clearly(world: int) -> str:
    init(make_strategy(world))
    loss_fn = parallel.ParallelCrossEntropy()
    logits = torch.randn(4, 8 // world, requires_grad=True)
    loss = loss_fn(logits, torch.tensor([0, 1, 2, 3]))
    loss.backward(retain_graph=True)
    try:
        loss.backward()
    except RuntimeError as e:
        return str(e)
    raise AssertionError("second backward did not raise")
