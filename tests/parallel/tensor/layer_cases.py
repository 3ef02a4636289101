"""Rank-side parity checks: each parallel layer against the single-process torch layer, over 5 SGD steps."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import parallel
from rank_helpers import close, init, make_strategy, shard

B, S, IN, OUT, VOCAB = 4, 3, 8, 12, 16
STEPS, LR = 5, 0.1


def _data(step: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1000 + step))


def column_parity(world: int, flags, policy: str, gather_output: bool, bias: bool = True) -> str:
    hcg = init(make_strategy(world, flags=flags), policy)
    torch.manual_seed(0)
    ref = nn.Linear(IN, OUT, bias=bias)
    torch.manual_seed(0)
    layer = parallel.ColumnParallelLinear(IN, OUT, bias=bias, gather_output=gather_output)
    close(layer.weight, shard(ref.weight, 0, hcg), "initial weight shard")
    assert (layer.bias is None) == (not bias)
    opt_ref, opt = torch.optim.SGD(ref.parameters(), lr=LR), torch.optim.SGD(layer.parameters(), lr=LR)
    for step in range(STEPS):
        x, proj = _data(step, B, S, IN), _data(50 + step, B, S, OUT)
        x_ref, x_par = x.clone().requires_grad_(), x.clone().requires_grad_()
        y_ref = ref(x_ref)
        (y_ref * proj).sum().backward()
        y = layer(x_par)
        if gather_output:
            close(y, y_ref, f"step {step} output")
            (y * proj).sum().backward()
        else:
            close(y, shard(y_ref, -1, hcg), f"step {step} output shard")
            (y * shard(proj, -1, hcg)).sum().backward()
        close(x_par.grad, x_ref.grad, f"step {step} input grad")
        for opt_ in (opt_ref, opt):
            opt_.step()
            opt_.zero_grad()
        close(layer.weight, shard(ref.weight, 0, hcg), f"step {step} weight")
        if bias:
            close(layer.bias, shard(ref.bias, 0, hcg), f"step {step} bias")
    return repr(hcg.resolved.mp)


def row_parity(world: int, flags, policy: str, input_is_parallel: bool, bias: bool = True) -> None:
    hcg = init(make_strategy(world, flags=flags), policy)
    torch.manual_seed(0)
    ref = nn.Linear(IN, OUT, bias=bias)
    torch.manual_seed(0)
    layer = parallel.RowParallelLinear(IN, OUT, bias=bias, input_is_parallel=input_is_parallel)
    close(layer.weight, shard(ref.weight, 1, hcg), "initial weight shard")
    assert (layer.bias is None) == (not bias)
    opt_ref, opt = torch.optim.SGD(ref.parameters(), lr=LR), torch.optim.SGD(layer.parameters(), lr=LR)
    for step in range(STEPS):
        x, proj = _data(step, B, S, IN), _data(50 + step, B, S, OUT)
        x_ref = x.clone().requires_grad_()
        x_par = (shard(x, -1, hcg) if input_is_parallel else x).clone().requires_grad_()
        y_ref = ref(x_ref)
        (y_ref * proj).sum().backward()
        y = layer(x_par)
        close(y, y_ref, f"step {step} output")
        (y * proj).sum().backward()
        expected_dx = shard(x_ref.grad, -1, hcg) if input_is_parallel else x_ref.grad
        close(x_par.grad, expected_dx, f"step {step} input grad")
        for opt_ in (opt_ref, opt):
            opt_.step()
            opt_.zero_grad()
        close(layer.weight, shard(ref.weight, 1, hcg), f"step {step} weight")
        if bias:
            close(layer.bias, ref.bias, f"step {step} bias (replicated)")


def embedding_parity(world: int, flags, policy: str) -> None:
    hcg = init(make_strategy(world, flags=flags), policy)
    torch.manual_seed(0)
    ref = nn.Embedding(VOCAB, OUT)
    torch.manual_seed(0)
    layer = parallel.VocabParallelEmbedding(VOCAB, OUT)
    close(layer.weight, shard(ref.weight, 0, hcg), "initial table shard")
    opt_ref, opt = torch.optim.SGD(ref.parameters(), lr=LR), torch.optim.SGD(layer.parameters(), lr=LR)
    for step in range(STEPS):
        ids = torch.randint(0, VOCAB, (B, S), generator=torch.Generator().manual_seed(step))
        proj = _data(50 + step, B, S, OUT)
        y_ref = ref(ids)
        (y_ref * proj).sum().backward()
        y = layer(ids)
        close(y, y_ref, f"step {step} output")
        (y * proj).sum().backward()
        for opt_ in (opt_ref, opt):
            opt_.step()
            opt_.zero_grad()
        close(layer.weight, shard(ref.weight, 0, hcg), f"step {step} table")


def cross_entropy_parity(world: int, reduction: str, ignore_index: int) -> None:
    hcg = init(make_strategy(world))
    loss_fn = parallel.ParallelCrossEntropy(reduction=reduction, ignore_index=ignore_index)
    for step in range(STEPS):
        logits = _data(step, B, S, VOCAB) * 3
        target = torch.randint(0, VOCAB, (B, S), generator=torch.Generator().manual_seed(step))
        target[0, 0] = ignore_index  # at least one ignored position
        full = logits.clone().requires_grad_()
        local = shard(logits, -1, hcg).clone().requires_grad_()
        expected = F.cross_entropy(full.reshape(-1, VOCAB), target.reshape(-1), reduction=reduction, ignore_index=ignore_index)
        if reduction == "none":
            expected = expected.reshape(target.shape)
        got = loss_fn(local, target)
        close(got, expected, f"step {step} loss ({reduction})")
        upstream = _data(70 + step, *got.shape) if reduction == "none" else torch.tensor(1.5)
        (expected * upstream).sum().backward()
        (got * upstream).sum().backward()
        close(local.grad, shard(full.grad, -1, hcg), f"step {step} logits grad ({reduction})")


def non_divisible_size_is_a_clear_error(world: int) -> str:
    init(make_strategy(world))
    try:
        parallel.ColumnParallelLinear(IN, world * 3 + 1)
    except ValueError as e:
        return str(e)
    raise AssertionError("no error for a non-divisible out_features")


def shard_init_draws_only_the_shard(world: int) -> tuple[list[int], float]:
    hcg = init(make_strategy(world))
    torch.manual_seed(0)
    layer = parallel.ColumnParallelLinear(IN, OUT, init="shard")
    return list(layer.weight.shape), float(layer.weight.abs().max()) if hcg else 0.0
