"""Rank-side cases of expert parallelism (ep): small Qwen3-MoE and Mixtral models, experts split over ep, against one
process on the same rows (the router's auxiliary loss included)."""

from __future__ import annotations

import copy

import torch

import parallel
import strategy
from hf_models import MOE_EPS as EPS, moe
from rank_helpers import close, init, load_quietly, prompt_rows, train_beside_one_process
from parallel.topology.dtensors import local

VOCAB, SEQ, ROWS, LR = 64, 16, 2, 1e-3


def ep_text(ep: int, *, dp: int = -1, extra: str = "") -> str:
    return f"{extra} hybrid_configs {{ dp_degree: {dp} ep_degree: {ep} }}"


def _rows(step: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    return prompt_rows(step, count, vocab=VOCAB, seq=SEQ, seed=900)


def parity(text: str, kind: str = "qwen3_moe", steps: int = 3, clip: float | None = 1.0) -> dict:
    """Each data rank's loss (cross-entropy + the router's aux loss) on its rows; after `steps` AdamW steps the
    parameters (experts gathered) are the one-process ones, and each rank holds only its block of experts."""
    hcg = init(strategy.loads(text))
    reference = moe(kind)
    model = parallel.parallelize(copy.deepcopy(reference))
    result = train_beside_one_process(hcg, model, reference, _rows, rows_per_rank=ROWS, lr=LR, steps=steps, clip=clip,
                                      eps=EPS, split=False)  # the aux loss is per batch: each data rank's, averaged
    experts = [p for p in model.parameters() if p.dim() == 3]
    return result | {"local_experts": {p.shape[0] for p in experts},  # this ep rank's block
                     "held_rows": {local(p).shape[0] for p in experts}}  # of which this rank holds (moe_sharding)


def save_moe(text: str, path: str) -> dict:
    """Two steps at `text`, saved; the gathered state dict."""
    init(strategy.loads(text))
    model = parallel.parallelize(moe())
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR, eps=EPS))
    for step in range(2):
        ids, labels = _rows(step, ROWS)
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
    parallel.save(path, model, opt, step=2)
    return parallel.full_state_dict(model)


def load_moe(text: str, path: str) -> dict:
    init(strategy.loads(text))
    torch.manual_seed(3)
    model = parallel.parallelize(moe())
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR, eps=EPS))
    info = load_quietly(path, model, opt)
    state = [local(s["exp_avg"]).shape[0] for p, s in opt.state.items() if p.dim() == 3]
    return {"full": parallel.full_state_dict(model), "resharded": info.resharded, "expert_state_rows": set(state)}


def refusals(text: str) -> dict:
    """parallelize's refusals under ep, each before any change: a model without experts, and experts ep does not
    divide."""
    from torch import nn

    init(strategy.loads(text))
    out = {}
    for name, model in (("plain", nn.Sequential(nn.Linear(4, 4))), ("five", moe(experts=5))):
        try:
            parallel.parallelize(model, plan={})
        except strategy.StrategyError as e:
            out[name] = str(e)
    return out


def ep_with_pp() -> str:
    init(strategy.loads("hybrid_configs { dp_degree: -1 pp_degree: 2 ep_degree: 2 }"))
    try:
        parallel.parallelize(moe(), plan={})
    except strategy.StrategyError as e:
        return str(e)
    return ""


def finetune_losses(path: str, steps: int, model_type: str) -> list[float]:
    """examples/finetune_hf.py's MoE model (`--model-type`) and loop under `path`, with this file's AdamW eps."""
    import example_cases

    return example_cases.finetune_losses(path, steps, model_type, eps=EPS)


class OwnExperts(torch.nn.Module):
    """A module of one's own with transformers' experts interface, its forward the one-process loop."""

    def __init__(self, experts: int = 4, hidden: int = 8, inner: int = 6) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.gate_up_proj = torch.nn.Parameter(torch.randn(experts, 2 * inner, hidden, generator=g) / 3)
        self.down_proj = torch.nn.Parameter(torch.randn(experts, hidden, inner, generator=g) / 3)

    def forward(self, hidden_states, top_k_index, top_k_weights):
        out = torch.zeros_like(hidden_states)
        for t in range(hidden_states.shape[0]):
            for e, w in zip(top_k_index[t].tolist(), top_k_weights[t]):
                gate, up = torch.nn.functional.linear(hidden_states[t], self.gate_up_proj[e]).chunk(2)
                out[t] = out[t] + w * torch.nn.functional.linear(torch.nn.functional.silu(gate) * up, self.down_proj[e])
        return out


def own_experts_one_sided(text: str) -> dict:
    """Every rank's tokens routed to the first rank's experts only: the other ranks receive nothing, and still join
    the backward's all-to-alls. Outputs and gradients equal the one-process module's on the same tokens."""
    import torch.distributed as dist

    hcg = init(strategy.loads(text))
    reference = OwnExperts()
    split = parallel.parallelize(copy.deepcopy(reference), plan={})
    g = torch.Generator().manual_seed(10 + hcg.rank)
    hidden = torch.randn(5, 8, generator=g, requires_grad=True)
    index = torch.randint(0, 4 // hcg.ep_size, (5, 2), generator=g)  # only block 0's experts
    weights = torch.rand(5, 2, generator=g)
    out = split.forward(hidden, index, weights)
    ref = reference(hidden, index, weights)
    close(out, ref, "output")
    out.pow(2).sum().backward()
    # A rank whose experts received nothing has no gradient for them (the optimizer fills zeros).
    mine = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in (split.gate_up_proj, split.down_proj)]
    hidden_grad = hidden.grad.clone()
    hidden.grad = None
    ref.pow(2).sum().backward()
    close(hidden_grad, hidden.grad, "hidden grad")
    whole = [p.grad.clone() for p in (reference.gate_up_proj, reference.down_proj)]
    for w in whole:
        dist.all_reduce(w)  # every rank's tokens' contributions, as the split experts got them
    block = 4 // hcg.ep_size
    for m, w in zip(mine, whole):
        close(m, w[hcg.ep_rank * block:(hcg.ep_rank + 1) * block], "expert grad")
    return {"received_nothing": hcg.ep_rank != 0}


def own_experts_unused_on_one_replica(text: str) -> dict:
    """ep 2 × edp 2 without dp (sharding 4): the first edp position's tokens reach only the first block, so ep rank 1
    there has no expert gradient while its replica has one. The step still averages over edp (a zero for the unused
    block) and leaves the replicas equal."""
    hcg = init(strategy.loads(text))
    model = torch.nn.Module()
    model.blocks = torch.nn.ModuleList([torch.nn.Linear(8, 8), OwnExperts()])  # FSDP2's units: the dense block
    parallel.parallelize(model, plan={})
    dense, experts = model.blocks
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR))
    g = torch.Generator().manual_seed(20 + hcg.rank)
    hidden = dense(torch.randn(5, 8, generator=g))
    high = 2 if hcg.edp_rank == 0 else 4
    experts(hidden, torch.randint(0, high, (5, 2), generator=g), torch.rand(5, 2, generator=g)).pow(2).sum().backward()
    had_grad = experts.gate_up_proj.grad is not None
    opt.step()
    parallel.check_replicas(model, grads=False)
    return {"had_grad": had_grad, "edp_rank": hcg.edp_rank, "ep_rank": hcg.ep_rank}
