"""Rank-side cases of sep (Ulysses) sequence parallelism: a Hugging Face Llama with grouped-query attention and a
plain model calling parallel.sep_attention, against one process on the same rows."""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import parallel
import strategy
from rank_helpers import ADAMW_EPS, RTOL, close, data_mean, init, match_one_process, train_beside_one_process

VOCAB, SEQ, ROWS, LR = 64, 16, 2, 1e-3


def llama(heads: int = 4, kv_heads: int = 2):
    import transformers

    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=8 * heads, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=SEQ,
                                      tie_word_embeddings=False, attn_implementation="sdpa")
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def sep_text(sep: int, *, dp: int = 1, mp: int = 1, sharding: int = 1, stage: int = 3) -> str:
    text = f"hybrid_configs {{ dp_degree: {dp} mp_degree: {mp} sep_degree: {sep} sharding_degree: {sharding}"
    return text + (f" sharding_configs {{ stage: {stage} }} }}" if sharding > 1 else " }")


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


def demo_losses(text: str, steps: int) -> list[float]:
    """examples/train_gpt.py's loop (its attention through parallel.sep_attention) under `text`."""
    import importlib
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "examples"))
    gpt = importlib.import_module("train_gpt")
    hcg = init(strategy.loads(text))
    return gpt.train(gpt.Config(steps=steps, batch_size=4, seq_len=32), hcg)["losses"]


def finetune_losses(path: str, steps: int, model_type: str = "llama", eps: float = 1e-8) -> list[float]:
    """examples/finetune_hf.py's model (`--model-type`) and loop (split_sequence, the Hugging Face attention switched)
    under `path` (a file, or strategy text); AdamW with `eps`."""
    import argparse
    import importlib
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "examples"))
    finetune = importlib.import_module("finetune_hf")
    hcg = init(strategy.load(path) if path.endswith(".prototxt") else strategy.loads(path))
    model, encode = finetune.build_model(None, 32, model_type)
    parallel.parallelize(model)
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3, eps=eps))
    args = argparse.Namespace(steps=steps, batch_size=2, seq_len=32)
    return finetune.train(model, opt, encode(finetune.corpus_text()), args, hcg, progress=False)["losses"]


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
    import warnings

    init(strategy.loads(text))
    torch.manual_seed(3)
    model = parallel.parallelize(llama())
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = parallel.load(path, model, opt)
    return {"full": parallel.full_state_dict(model), "resharded": info.resharded}
