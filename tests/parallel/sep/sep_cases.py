"""Rank-side cases of sep (Ulysses) sequence parallelism: a model of one's own parallelized beside one process, the
lengths and head counts sep refuses, and the examples' loops under sep. What cp shares with sep (the Llama, parity,
checkpoints, ...) is `split_sequence_cases`'."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

import parallel
import strategy
from rank_helpers import ADAMW_EPS, data_mean, init, match_one_process
from split_sequence_cases import LR, ROWS, VOCAB, Own, _rows


def sep_text(sep: int, *, dp: int = 1, mp: int = 1, sharding: int = 1, stage: int = 3) -> str:
    text = f"hybrid_configs {{ dp_degree: {dp} mp_degree: {mp} sep_degree: {sep} sharding_degree: {sharding}"
    return text + (f" sharding_configs {{ stage: {stage} }} }}" if sharding > 1 else " }")


def _token_loss(logits: torch.Tensor, targets: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """The summed next-token loss over these targets (-100 skipped), over the whole batch's target count."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100, reduction="sum") / count


OWN_PLAN = {"q": "colwise", "k": "colwise", "v": "colwise", "o": "rowwise"}


def own_parity(text: str, steps: int = 3) -> dict:
    """parallelize(a model of one's own) under sep: each rank's loss share on its chunk (split_sequence), and after
    `steps` AdamW steps of HybridParallelOptimizer the parameters equal one process's on the whole rows."""
    hcg = init(strategy.loads(text))
    torch.manual_seed(0)
    reference = Own(through_sep=False)
    model = parallel.parallelize(copy.deepcopy(reference).requires_grad_(True), OWN_PLAN if hcg.mp_size > 1 else "auto")
    model.through_sep = True
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR, eps=ADAMW_EPS))
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=LR, eps=ADAMW_EPS)
    losses, ref_losses = [], []
    for step in range(steps):
        ids, labels = _rows(step, ROWS * hcg.data_size)
        mine = slice(hcg.data_rank * ROWS, (hcg.data_rank + 1) * ROWS)
        piece = parallel.split_sequence({"input_ids": ids[mine], "labels": labels[mine]})
        share = _token_loss(model(piece["input_ids"], piece["position_ids"]), piece["shift_labels"],
                            piece["num_items_in_batch"])
        share.backward()
        opt.step()
        opt.zero_grad()
        losses.append(data_mean(share, hcg))
        ref = 0.0
        for r in range(hcg.data_size):
            whole = parallel.split_sequence({"input_ids": ids[r * ROWS:(r + 1) * ROWS],
                                             "labels": labels[r * ROWS:(r + 1) * ROWS]}, hcg=_one(hcg))
            ref = ref + _token_loss(reference(whole["input_ids"], whole["position_ids"]), whole["shift_labels"],
                                    whole["num_items_in_batch"]) / hcg.data_size
        ref.backward()
        ref_losses.append(float(ref.detach()))
        ref_opt.step()
        ref_opt.zero_grad()
    match_one_process(model, reference)
    return {"losses": losses, "ref_losses": ref_losses}


def _one(hcg):
    """The same hybrid group seen as sep_degree 1: split_sequence then gives the whole rows (for the reference)."""
    from parallel.topology import AxisGroup

    return hcg.with_axis("sep", AxisGroup(hcg.sep_group, 0, 1, (hcg.rank,)))


def split_errors(text: str) -> dict:
    """A length sep_degree does not divide, and heads mp × sep do not divide (the model unchanged)."""
    import transformers

    init(strategy.loads(text))
    out = {}
    try:
        parallel.split_sequence({"input_ids": torch.zeros(1, 15, dtype=torch.long)})
    except strategy.StrategyError as e:
        out["length"] = str(e)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=24, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=3, num_key_value_heads=1, tie_word_embeddings=False)
    model = transformers.LlamaForCausalLM(config)
    before = [type(m).__name__ for m in model.modules()]
    try:
        parallel.parallelize(model, plan={})
    except strategy.StrategyError as e:
        out["heads"] = str(e)
        out["unchanged"] = [type(m).__name__ for m in model.modules()] == before and \
            model.config._attn_implementation != "parallel_sep"
    return out
