"""Rank-side: loss scaling (fp16), bf16 autocast, gradient merge and recompute, on the small TP model."""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist

import parallel
import strategy
from rank_helpers import close, init
from small_model import BATCH, SEQ, SHARD_DIMS, V, Parallel, twins


def _strategy(mp: int, dp: int, extra: str, flags: str = "") -> strategy.DistributedStrategy:
    return strategy.loads(f"hybrid_configs {{ dp_degree: {dp} mp_degree: {mp} mp_configs {{ {flags} }} }} {extra}")


def _batch(step: int):
    gen = torch.Generator().manual_seed(40 + step)
    return torch.randint(0, V, (BATCH, SEQ), generator=gen), torch.randint(0, V, (BATCH, SEQ), generator=gen)


def scaler_skips_together(mp: int, dp: int) -> list[tuple]:
    """fp16 scaling: an inf in one rank's gradient shard makes every rank skip and halve the scale; after
    incr_every_n_steps clean steps the scale doubles on every rank."""
    hcg = init(_strategy(mp, dp, "amp: true amp_configs { init_loss_scaling: 1024 decr_every_n_nan_or_inf: 1 "
                                 "decr_ratio: 0.5 incr_every_n_steps: 2 incr_ratio: 2 }"))
    torch.manual_seed(0)
    model = Parallel()
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    log = []
    for step in range(4):
        ids, target = _batch(step)
        rows = slice(hcg.dp_rank * BATCH // dp, (hcg.dp_rank + 1) * BATCH // dp)
        with parallel.autocast():
            loss = model(ids[rows], target[rows])
        opt.scale(loss).backward()
        if step == 0 and dist.get_rank() == dist.get_world_size() - 1:
            model.up.weight.grad[0, 0] = float("inf")  # one shard, on one rank only
        before = model.up.weight.detach().clone()
        opt.step()
        opt.zero_grad()
        log.append((opt.loss_scale, opt.skipped_last_step, not torch.equal(before, model.up.weight)))
    return log


def bf16_tracks_fp32(mp: int, steps: int) -> tuple[list[float], list[float]]:
    """The demo model's first steps under bf16 autocast next to the fp32 run (same data, same init)."""
    import importlib
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "examples"))
    gpt = importlib.import_module("train_gpt")
    cfg = gpt.Config(steps=steps, batch_size=8, seq_len=32)
    out = []
    for extra in ("", 'amp: true amp_configs { dtype: "bfloat16" }'):
        hcg = init(_strategy(mp, 1, extra))
        out.append(gpt.train(cfg, hcg)["losses"])
        parallel.destroy()
    return out[0], out[1]


def merge_equals_big_batch(mp: int, dp: int, fused: bool, k: int) -> dict:
    """k micro-steps of B samples with gradient merge = one step on the k*B batch; dp all-reduces once."""
    flags = "mp_async_allreduce: true mp_fused_linear_param_grad_add: true" if fused else ""
    hcg = init(_strategy(mp, dp, f"gradient_merge: true gradient_merge_configs {{ k_steps: {k} avg: true }}", flags))
    ref, model = twins()
    if fused:
        parallel.add_main_grad(model)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.5)
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(model.parameters(), lr=0.5))
    counts = []
    for update in range(2):
        batches = [_batch(10 * update + i) for i in range(k)]
        ids = torch.cat([b[0] for b in batches])
        target = torch.cat([b[1] for b in batches])
        ref(ids, target).backward()  # mean over the k*B batch
        opt_ref.step()
        opt_ref.zero_grad()
        with _dp_all_reduces(hcg) as c:
            for i, (ids_i, target_i) in enumerate(batches):
                rows = slice(hcg.dp_rank * BATCH // dp, (hcg.dp_rank + 1) * BATCH // dp)
                model(ids_i[rows], target_i[rows]).backward()
                assert opt.accumulating == (i < k - 1)  # only the k-th step updates
                opt.step()
                opt.zero_grad()
        counts.append(c[0])
        refs = dict(ref.named_parameters())
        for name, p in model.named_parameters():
            full = refs[name].detach()
            want = full.chunk(hcg.mp_size, dim=SHARD_DIMS[name])[hcg.mp_rank] if name in SHARD_DIMS else full
            close(p, want, f"update {update} {name}", rtol=1e-5, atol=1e-6)
    return {"counts": counts}


@contextlib.contextmanager
def _dp_all_reduces(hcg):
    """Count all-reduces over the dp group (the model's own all-reduces run over the mp group)."""
    real, box = dist.all_reduce, [0]

    def counted(tensor, *args, group=None, **kwargs):
        if group is hcg.dp_group:
            box[0] += 1
        return real(tensor, *args, group=group, **kwargs)

    dist.all_reduce = counted
    try:
        yield box
    finally:
        dist.all_reduce = real


def recompute_matches(mp: int) -> dict:
    """Recompute the MLP: the same loss and gradients, and its activations are not kept for the backward."""
    results = {}
    for on in (False, True):
        extra = 'recompute: true recompute_configs { checkpoints: "up" checkpoints: "down" }' if on else ""
        init(_strategy(mp, 1, extra))
        torch.manual_seed(0)
        model = Parallel()
        wrapped = parallel.apply_recompute(model)
        ids, target = _batch(0)
        saved: list[int] = []

        def pack(t: torch.Tensor) -> torch.Tensor:
            saved.append(t.numel() * t.element_size())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = model(ids, target)
        loss.backward()
        results[on] = {"loss": float(loss), "saved": sum(saved), "wrapped": wrapped,
                       "grads": {n: p.grad.clone() for n, p in model.named_parameters()}}
        parallel.destroy()
    for name, g in results[False]["grads"].items():
        close(results[True]["grads"][name], g, f"grad {name}", rtol=1e-6, atol=1e-7)
    return {k: {"loss": v["loss"], "saved": v["saved"], "wrapped": v["wrapped"]} for k, v in results.items()}


def recompute_without_names(mp: int) -> dict:
    """`recompute: true` naming no module: every block of a model that has blocks, an error for one that has none."""
    init(_strategy(mp, 1, "recompute: true"))
    stack = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)]))
    wrapped = parallel.apply_recompute(stack)
    try:
        parallel.apply_recompute(Parallel())
    except strategy.StrategyError as e:
        return {"wrapped": wrapped, "error": str(e)}
    raise AssertionError("no error")


def example_strategy_trains(path: str, steps: int) -> dict:
    """examples/train_gpt.py's loop under an example strategy file (bf16, recompute, gradient merge)."""
    import importlib
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "examples"))
    gpt = importlib.import_module("train_gpt")
    hcg = init(strategy.load(path))
    summary = gpt.train(gpt.Config(steps=steps, batch_size=8, seq_len=32), hcg)
    return {"losses": summary["losses"], "norms": summary["grad_norms"], "amp": hcg.resolved.amp.dtype,
            "merge": hcg.resolved.gradient_merge.k_steps, "recompute": hcg.resolved.recompute.checkpoints}
