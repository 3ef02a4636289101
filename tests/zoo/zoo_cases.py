"""Rank-side case of the zoo: one tiny causal LM of the installed transformers at one layout, three AdamW steps beside
one process; the outcome is "trains" (losses and parameters as one process's), a refusal (parallelize's StrategyError,
before anything changed) or "diverges"; a crash raises (the pool reports the rank's traceback, the zoo says "crash"),
so that the other ranks are not left waiting in a collective."""

from __future__ import annotations

import copy

import torch

import parallel
import strategy
from hf_models import MOE_EPS, hf_model
from rank_helpers import data_mean, init, match_one_process, prompt_rows, train_beside_one_process
from tiny_models import tiny_model

VOCAB, SEQ, BATCH, LR, STEPS = 128, 32, 8, 1e-3, 3

# The layouts every architecture is tried at, on 2 ranks: each axis alone.
LAYOUTS = {
    "dp2": "hybrid_configs { dp_degree: 2 }",
    "mp2": "hybrid_configs { mp_degree: 2 }",
    "pp2": ("hybrid_configs { pp_degree: 2 } pipeline_configs { micro_batch_size: 4 accumulate_steps: 2 "
            'schedule_mode: "1F1B" }'),
    "sep2": "hybrid_configs { sep_degree: 2 }",
    "cp2": "hybrid_configs { cp_degree: 2 }",
    "sharding2_stage1": "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 1 } }",
    "sharding2_stage2": "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 2 } }",
    "sharding2_stage3": "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } }",
    "ep2": "hybrid_configs { dp_degree: -1 ep_degree: 2 }",
}


# How a case that trains only in float64 says so (run_zoo marks it in the table).
FLOAT64 = "in float64; float32 misses by rounding: "


def rows(step: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    return prompt_rows(step, count, vocab=VOCAB, seq=SEQ, seed=1200)


def has_experts(model: torch.nn.Module) -> bool:
    return any(p.dim() == 3 for p in model.parameters())


def outcome(model_type: str, layout: str) -> dict:
    """The outcome of `model_type` at `layout` (a LAYOUTS name, or a strategy's text) on this rank: {"outcome": "trains" | "refused" | "diverges" | "crash",
    "detail": the refusal's message, the divergence, or the crash's last lines}.

    Where float32 keeps the losses but misses the parameters, the case runs again in float64 and that run decides:
    AdamW turns float32 rounding in a gradient near zero into a step of lr·Δg/eps (Gemma 4's unscaled q/k-normed
    attention does it at mp, sep and cp), while a feature the layout loses moves float64 as much as float32."""
    hcg = init(strategy.loads(LAYOUTS.get(layout, layout)))  # (a layout's name, or a strategy's text)
    if layout == "ep2" and not has_experts(tiny_model(model_type)):
        return {"outcome": "n/a", "detail": "no experts"}
    result = _train(hcg, model_type, torch.float32)
    if result["outcome"] == "diverges" and result.get("parameters_only"):
        again = _train(hcg, model_type, torch.float64)
        result = ({"outcome": "trains", "detail": FLOAT64 + result["detail"]}
                  if again["outcome"] == "trains" else again)
    result.pop("parameters_only", None)
    return result


def _train(hcg: parallel.HybridGroup, model_type: str, dtype: torch.dtype) -> dict:
    reference = tiny_model(model_type).to(dtype)
    # AdamW's eps 1e-4 (hf_models.MOE_EPS) for every family: a gradient that cancels to ~1e-7 differs by float32
    # rounding between layouts, which eps 1e-5 amplifies to ~3e-6 in a weight or two of the tiny models with softcaps
    # (lr·Δg/eps, rank_helpers.ADAMW_EPS); a feature a layout loses moves the losses themselves.
    eps = MOE_EPS
    try:
        model = parallel.parallelize(copy.deepcopy(reference))
    except strategy.StrategyError as e:
        return {"outcome": "refused", "detail": str(e)}
    try:
        if hcg.pp_size > 1:
            result = _pipeline(hcg, model, reference, eps)
        else:
            result = train_beside_one_process(hcg, model, reference, rows, rows_per_rank=BATCH // hcg.data_size, lr=LR,
                                              steps=STEPS, clip=None, eps=eps, split=hcg.sep_size > 1 or hcg.cp_size > 1,
                                              match=False)
    except strategy.StrategyError as e:  # a check of the first forward (what only running shows), on every rank alike
        return {"outcome": "refused", "detail": f"at the first forward: {e}"}
    close = torch.allclose(torch.tensor(result["losses"]), torch.tensor(result["ref_losses"]), rtol=1e-5, atol=0)
    if not close:
        return {"outcome": "diverges", "detail": f"losses {result['losses']} vs one process {result['ref_losses']}"}
    try:
        match_one_process(model, reference)
    except AssertionError as e:  # (on every rank alike)
        return {"outcome": "diverges", "detail": " ".join(str(e).split())[:300], "parameters_only": True}
    return {"outcome": "trains", "detail": ""}


def _pipeline(hcg: parallel.HybridGroup, model, reference, eps: float) -> dict:
    """train_batch beside one process running the model's own loss on each micro-batch, the mean over them."""
    p = hcg.resolved.pipeline
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR, eps=eps))
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=LR, eps=eps)
    out: dict[str, list[float]] = {"losses": [], "ref_losses": []}
    for step in range(STEPS):
        ids, labels = rows(step, BATCH)
        out["losses"].append(data_mean(model.train_batch((ids, labels), opt), hcg))
        total = 0.0
        for i, l in zip(ids.chunk(p.accumulate_steps), labels.chunk(p.accumulate_steps)):
            loss = reference(input_ids=i, labels=l).loss / p.accumulate_steps
            loss.backward()
            total += loss.item()
        out["ref_losses"].append(total)
        ref_opt.step()
        ref_opt.zero_grad()
    return out


def two_models_keep_their_own_attention() -> dict:
    """Gemma 2 parallelised, then a Llama in the same process: the Gemma 2 still trains as one process. (transformers
    finds the axis' attention by one name: had the Llama's install replaced Gemma 2's, its layers would run sdpa,
    which cannot apply their logit softcap, instead of their eager function.) A model that names that attention by
    hand, never parallelised, is refused at its forward, naming the module."""
    hcg = init(strategy.loads("hybrid_configs { sep_degree: 2 }"))
    reference = tiny_model("gemma2")
    model = parallel.parallelize(copy.deepcopy(reference))
    other = parallel.parallelize(hf_model("llama"))
    result = train_beside_one_process(hcg, model, reference, rows, rows_per_rank=BATCH // hcg.data_size, lr=LR,
                                      steps=STEPS, clip=None, eps=MOE_EPS, match=False)
    match_one_process(model, reference)
    stray = hf_model("llama")
    stray.config._attn_implementation = model.config._attn_implementation
    try:
        stray(input_ids=torch.zeros(1, 4, dtype=torch.long))
        refused = ""
    except strategy.StrategyError as e:
        refused = str(e)
    return {"implementations": [model.config._attn_implementation, other.config._attn_implementation],
            "losses": result["losses"], "ref_losses": result["ref_losses"], "refused": refused}
