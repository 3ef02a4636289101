"""Rank-side cases both ways of splitting a sequence over ranks share (sep's all-to-all, cp's ring, which
split_sequence, the attention switch and the optimizer serve alike): a Hugging Face Llama with grouped-query attention
and its rows, parity with one process, a plain model calling the attention, a model of one's own that does not, the
refusal beside pp, the activations saved, checkpoints, and a model (a Llama, or a Mixture-of-Experts one for ep's
tests) trained with amp, gradient merge and recompute beside one process."""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import parallel
import strategy
from rank_helpers import ADAMW_EPS, RTOL, close, data_mean, init, load_quietly, match_one_process, train_beside_one_process

VOCAB, SEQ, ROWS, LR = 64, 16, 2, 1e-3


def llama(heads: int = 4, kv_heads: int = 2):
    import transformers

    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=8 * heads, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=SEQ,
                                      tie_word_embeddings=False, attn_implementation="sdpa")
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)



def _rows(step: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows and labels whose prompt (-100) ends at a different place in each row: uneven across chunks."""
    g = torch.Generator().manual_seed(700 + step)
    ids = torch.randint(0, VOCAB, (count, SEQ), generator=g)
    labels = ids.clone()
    for r in range(count):
        labels[r, : 3 + 2 * r + step] = -100
    return ids, labels



def llama_parity(text: str, steps: int = 3, clip: float | None = 1.0, heads: int = 4, kv_heads: int = 2) -> dict:
    """Each rank's share of `model(**split_sequence(batch)).loss`: the shares of a sep (cp) group sum to the
    one-process loss, and after `steps` AdamW steps the parameters are the one-process ones."""
    hcg = init(strategy.loads(text))
    reference = llama(heads, kv_heads)
    model = parallel.parallelize(copy.deepcopy(reference))
    result = train_beside_one_process(hcg, model, reference, _rows, rows_per_rank=ROWS, lr=LR, steps=steps, clip=clip)
    return result | {"attention": model.config._attn_implementation}



class Plain(nn.Module):
    """A model of one's own: one attention layer calling parallel.sep_attention, grouped-query (4 heads, 1 kv)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.q = nn.Linear(32, 32)
        self.kv = nn.Linear(32, 16)
        self.out = nn.Linear(32, VOCAB)

    def forward(self, ids: torch.Tensor, attend) -> torch.Tensor:
        h = self.embed(ids)
        b, s, _ = h.shape
        q = self.q(h).view(b, s, 4, 8).transpose(1, 2)
        k, v = self.kv(h).view(b, s, 2, 1, 8).unbind(2)
        y = attend(q, k.transpose(1, 2), v.transpose(1, 2))
        return self.out(y.transpose(1, 2).reshape(b, s, 32))



def plain_parity(text: str, causal: bool = True) -> dict:
    """parallel.sep_attention on this rank's chunk (cp_attention on its two, under cp) equals SDPA over the whole
    rows: outputs and gradients."""
    hcg = init(strategy.loads(text))
    torch.manual_seed(0)
    model = Plain()
    reference = copy.deepcopy(model)
    ids, _ = _rows(0, ROWS)
    mine = parallel.split_sequence({"input_ids": ids})["position_ids"][0]
    attend, group = (parallel.cp_attention, hcg.cp_group) if hcg.cp_size > 1 else (parallel.sep_attention, hcg.sep_group)
    out = model(ids[:, mine], lambda q, k, v: attend(q, k, v, is_causal=causal))
    ref = reference(ids, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True))
    close(out, ref[:, mine], "output")
    out.pow(2).sum().backward()
    ref.pow(2).sum().backward()
    for (name, p), r in zip(model.named_parameters(), reference.parameters()):
        g = p.grad.clone()
        dist.all_reduce(g, group=group)  # each rank's gradient covers its tokens' outputs
        # Summed over every token in another order: float32 rounding scales with the gradient, not with each entry.
        close(g, r.grad, f"grad {name}", atol=RTOL * float(r.grad.abs().max()))
    return {"ok": True}



class Own(nn.Module):
    """A model of one's own for parallelize: learned positions, one grouped-query attention block (4 heads, 2 kv)
    attending through parallel.sep_attention, or through SDPA with `through_sep` off. Heads come from the local
    width (`view(..., -1, 8)`), so tensor parallelism may split them too."""

    def __init__(self, *, through_sep: bool = True) -> None:
        super().__init__()
        self.through_sep = through_sep
        self.embed, self.pos = nn.Embedding(VOCAB, 32), nn.Embedding(SEQ, 32)
        # No key bias: it shifts a row's scores alike, so its gradient is rounding noise, which AdamW would amplify.
        self.q, self.k, self.v = nn.Linear(32, 32), nn.Linear(32, 16, bias=False), nn.Linear(32, 16)
        self.o, self.head = nn.Linear(32, 32), nn.Linear(32, VOCAB)

    def forward(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids) + self.pos(positions)
        b, s, _ = h.shape
        q, k, v = (proj(h).view(b, s, -1, 8).transpose(1, 2) for proj in (self.q, self.k, self.v))
        if self.through_sep:
            y = parallel.sep_attention(q, k, v)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.head(h + self.o(y.transpose(1, 2).reshape(b, s, -1)))



def own_without_sep_attention(text: str) -> dict:
    """A model of one's own that attends through SDPA: parallelize accepts it, its first forward says what is wrong."""
    init(strategy.loads(text))
    model = parallel.parallelize(Own(through_sep=False))
    ids, _ = _rows(0, ROWS)
    positions = torch.arange(SEQ // 2).expand(ROWS, -1)
    try:
        model(ids[:, : SEQ // 2], positions)
    except strategy.StrategyError as e:
        return {"error": str(e), "field": e.field}
    return {"error": None}



def pp_with_sep_refused(
        text: str = "hybrid_configs { pp_degree: 2 sep_degree: 2 } pipeline_configs { accumulate_steps: 2 }") -> dict:
    """pp_degree 2 with sep_degree (or cp_degree) 2: parallelize refuses it, naming both, before changing the model."""
    init(strategy.loads(text))
    model = llama()
    before = [type(m).__name__ for m in model.modules()]
    try:
        parallel.parallelize(model, plan={})
    except strategy.StrategyError as e:
        return {"error": str(e), "field": e.field, "unchanged": [type(m).__name__ for m in model.modules()] == before
                and model.config._attn_implementation not in ("parallel_sep", "parallel_cp")}
    return {"error": None}



def saved_activations(text: str) -> dict:
    """Bytes autograd saves for backward in one Llama forward on this rank's rows."""
    hcg = init(strategy.loads(text))
    model = parallel.parallelize(llama())
    ids, labels = _rows(0, ROWS)
    ids, labels = ids.repeat(1, 4), labels.repeat(1, 4)  # longer rows: activations dominate
    saved: list[int] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(**parallel.split_sequence({"input_ids": ids, "labels": labels})).loss
    return {"saved": sum(saved), "sep": hcg.sep_size}



def save_llama(text: str, path: str) -> dict:
    """Two steps at `text`, saved; the gathered state dict."""
    init(strategy.loads(text))
    model = parallel.parallelize(llama())
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR))
    for step in range(2):
        ids, labels = _rows(step, ROWS)
        model(**parallel.split_sequence({"input_ids": ids, "labels": labels})).loss.backward()
        opt.step()
        opt.zero_grad()
    parallel.save(path, model, opt, step=2)
    return parallel.full_state_dict(model)



def load_llama(text: str, path: str) -> dict:
    init(strategy.loads(text))
    torch.manual_seed(3)
    model = parallel.parallelize(llama())
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR))
    info = load_quietly(path, model, opt)
    return {"full": parallel.full_state_dict(model), "resharded": info.resharded}


def _model(kind: str):
    """A Llama, or one of the Mixture-of-Experts models ("qwen3_moe", "mixtral"), and its AdamW eps."""
    if kind == "llama":
        return llama(), ADAMW_EPS
    from hf_models import MOE_EPS, moe

    return moe(kind), MOE_EPS


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
