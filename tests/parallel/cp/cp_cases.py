"""Rank-side cases of context parallelism (cp): the composition with amp, gradient merge and recompute, against one
process on the same rows. The Hugging Face Llama, plain-model, checkpoint and refusal cases are sep's
(`sep_cases`), which split_sequence, the attention switch and the optimizer serve under cp as under sep."""

from __future__ import annotations

import copy

import torch

import parallel
import strategy
from rank_helpers import ADAMW_EPS, data_mean, init, match_one_process
from sep_cases import LR, ROWS, _rows, llama


def cp_text(cp: int, *, dp: int = 1, mp: int = 1, sharding: int = 1, stage: int = 3, extra: str = "") -> str:
    text = f"{extra} hybrid_configs {{ dp_degree: {dp} mp_degree: {mp} cp_degree: {cp} sharding_degree: {sharding}"
    return text + (f" sharding_configs {{ stage: {stage} }} }}" if sharding > 1 else " }")


def _model(kind: str):
    """A Llama, or one of expert_cases' Mixture-of-Experts models ("qwen3_moe", "mixtral"), and its AdamW eps."""
    if kind == "llama":
        return llama(), ADAMW_EPS
    from expert_cases import EPS, moe

    return moe(kind), EPS


def options_parity(text: str, steps: int = 4, kind: str = "llama") -> dict:
    """A model (a Llama under cp, an MoE under ep) with recompute and gradient merge (k_steps 2), every rank on the
    same rows: every micro-step's loss is the one-process loss, and after `steps` micro-steps the parameters are
    those of one process accumulating the same micro-batches."""
    hcg = init(strategy.loads(text))
    reference, eps = _model(kind)
    model = parallel.parallelize(copy.deepcopy(reference))
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR, eps=eps))
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=LR, eps=eps)
    k = hcg.resolved.gradient_merge.k_steps
    losses, ref_losses = [], []
    for step in range(steps):
        ids, labels = _rows(step, ROWS)
        share = model(**parallel.split_sequence({"input_ids": ids, "labels": labels})).loss
        share.backward()
        opt.step()
        opt.zero_grad()
        losses.append(data_mean(share, hcg))
        ref = reference(input_ids=ids, labels=labels).loss
        (ref / k).backward()  # gradient merge averages its k micro-steps (gradient_merge_configs.avg)
        ref_losses.append(float(ref))
        if (step + 1) % k == 0:
            ref_opt.step()
            ref_opt.zero_grad()
    match_one_process(model, reference)
    recomputed = sum(hasattr(m, "_parallel_recompute") for m in model.modules())  # recompute's mark on a module
    return {"losses": losses, "ref_losses": ref_losses, "merge": k, "recompute": hcg.resolved.recompute.enabled,
            "wrapped": recomputed}


def amp_losses(text: str, steps: int = 3, kind: str = "llama") -> list[float]:
    """A model under bf16 autocast: the whole batch's loss each step (the shares summed over cp)."""
    hcg = init(strategy.loads(text))
    model, eps = _model(kind)
    model = parallel.parallelize(model)
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR, eps=eps))
    losses = []
    for step in range(steps):
        ids, labels = _rows(step, ROWS)
        with parallel.autocast():
            share = model(**parallel.split_sequence({"input_ids": ids, "labels": labels})).loss
        opt.scale(share).backward()
        opt.step()
        opt.zero_grad()
        losses.append(data_mean(share, hcg))
    return losses
