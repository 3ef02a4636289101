"""Rank-side cases of the dp average overlapped with the backward (training/dp_overlap.py): what the gradients hold
when the update's last backward returns, and when each bucket's all-reduce started."""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist

import parallel
import strategy
from rank_helpers import tiny_llama, ADAMW_EPS, init, match_one_process

VOCAB, SEQ, ROWS = 64, 16, 4


def llama(layers: int = 2):
    return tiny_llama(layers, vocab=VOCAB, seq=SEQ)


def _rows(step: int, micro: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 * step + micro)
    return torch.randint(0, VOCAB, (ROWS, SEQ), generator=g)


def averaged_when_backward_returns(text: str, steps: int = 2, bucket_bytes: int | None = None) -> dict:
    """Each micro-step's backward on this dp rank's rows; after the update's last one, before step(), every gradient
    must equal the mean over dp of what each rank accumulated (a plain copy of the model computes those). Then the
    step; after `steps` updates the model equals one process training on every rank's rows."""
    hcg = init(strategy.loads(text))
    reference = llama()
    model = copy.deepcopy(reference)
    local = copy.deepcopy(reference)  # this rank's own gradients, no hooks
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3, eps=ADAMW_EPS))
    if bucket_bytes is not None:  # smaller buckets: several all-reduces, launched one after another
        from parallel.training.dp_overlap import DpBuckets

        opt.dp_buckets.remove()
        opt.dp_buckets = DpBuckets(list(model.parameters()), hcg.dp_group, reducing=lambda: not opt.accumulating,
                                   bucket_bytes=bucket_bytes, first_bucket_bytes=bucket_bytes)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-3, eps=ADAMW_EPS)
    k = hcg.resolved.gradient_merge.k_steps
    local_between, starts = [], []
    for step in range(steps):
        for micro in range(k):
            ids = _rows(step, micro)
            mine = ids[hcg.dp_rank * (ROWS // hcg.dp_size):(hcg.dp_rank + 1) * (ROWS // hcg.dp_size)]
            model(input_ids=mine, labels=mine).loss.backward()
            local(input_ids=mine, labels=mine).loss.backward()
            if micro < k - 1:  # merge's other micro-steps reduce nothing: each rank keeps its own sum
                local_between.append(all(torch.equal(p.grad, q.grad) for p, q in zip(model.parameters(),
                                                                                       local.parameters())))
            ref = reference(input_ids=ids, labels=ids).loss / (k * hcg.dp_size) * hcg.dp_size
            ref.backward()
            opt.step()
            if micro == k - 1:
                starts.append(opt.dp_buckets.starts() if opt.dp_buckets else [])
        # (checked after the last backward, before the step: recomputed below from the pre-step copy)
        opt.zero_grad()
        for p in local.parameters():
            p.grad = None
        ref_opt.step()
        ref_opt.zero_grad()
        with torch.no_grad():
            for p, q in zip(local.parameters(), model.parameters()):
                p.copy_(q)
    match_one_process(model, reference)
    return {"local_between": local_between, "starts": starts,
            "buckets": len(opt.dp_buckets.buckets) if opt.dp_buckets else 0}


def gradient_at_backward_end(text: str) -> dict:
    """After one backward (the update's last), before step(): the model's gradients and the mean of every rank's own."""
    hcg = init(strategy.loads(text))
    model = llama()
    local = copy.deepcopy(model)
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    ids = _rows(0, 0)
    mine = ids[hcg.dp_rank * (ROWS // hcg.dp_size):(hcg.dp_rank + 1) * (ROWS // hcg.dp_size)]
    model(input_ids=mine, labels=mine).loss.backward()
    local(input_ids=mine, labels=mine).loss.backward()
    worst = 0.0
    for p, q in zip(model.parameters(), local.parameters()):
        mean = q.grad.clone()
        dist.all_reduce(mean, group=hcg.dp_group)
        mean /= hcg.dp_size
        worst = max(worst, float((p.grad - mean).abs().max()))
    reduced = len(opt.dp_buckets.reduced) if opt.dp_buckets else 0
    return {"worst": worst, "reduced": reduced, "params": len(list(model.parameters()))}


def one_rank_reaches_no_parameter() -> dict:
    """dp 2: rank 0's loss reaches every parameter, rank 1's none (its backward fires no hook): both ranks start the
    buckets in the same order (rank 1 in step()) and end with rank 0's gradient halved."""
    hcg = init(strategy.loads("hybrid_configs { dp_degree: 2 }"))
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 2)
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(layer.parameters(), lr=1.0))
    before = layer.weight.detach().clone()
    if hcg.dp_rank == 0:
        layer(torch.ones(1, 4)).sum().backward()
    else:
        (torch.ones(1, requires_grad=True) * 2).sum().backward()
    opt.step()
    return {"weight": layer.weight.detach().clone(), "expected": before - 0.5}  # d(sum)/dW = 1, averaged: 0.5
