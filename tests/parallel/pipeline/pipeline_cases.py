"""Rank-side cases of pipeline parallelism (pp_degree) on torch.distributed.pipelining: every schedule against one
process running the same micro-batches, composition with mp, dp and sharding, checkpoints across pp degrees."""

from __future__ import annotations

import copy

import torch

import parallel
import strategy
from parallel.pipeline import next_token_loss
from rank_helpers import ADAMW_EPS, data_mean, init, load_quietly, match_one_process, tiny_llama

VOCAB, SEQ, LR = 64, 16, 1e-3


def llama(layers: int = 4):
    return tiny_llama(layers, vocab=VOCAB, seq=SEQ)


def _batch(step: int, rows: int, length: int = SEQ) -> torch.Tensor:
    return torch.randint(0, VOCAB, (rows, length), generator=torch.Generator().manual_seed(500 + step))


def llama_parity(text: str, steps: int = 3, clip: float | None = None, layers: int = 4,
                 lengths: tuple[int, ...] | None = None) -> dict:
    """train_batch's losses and, after `steps` steps, the gathered parameters equal one process's; step k's batch of
    `lengths[k]` tokens (SEQ each by default)."""
    hcg = init(strategy.loads(text))
    p = hcg.resolved.pipeline
    reference = llama(layers)
    model = parallel.parallelize(copy.deepcopy(reference))
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR, eps=ADAMW_EPS), max_grad_norm=clip)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=LR, eps=ADAMW_EPS)
    rows = p.micro_batch_size * p.accumulate_steps
    losses, ref_losses, norms, ref_norms = [], [], [], []
    for step in range(steps):
        ids = _batch(step, rows * hcg.data_size, lengths[step] if lengths else SEQ)
        mine = ids[hcg.data_rank * rows:(hcg.data_rank + 1) * rows]
        loss = model.train_batch((mine, mine), opt)
        losses.append(data_mean(loss, hcg))
        total = 0.0
        for r in range(hcg.data_size):  # the reference: every data rank's micro-batches, averaged
            part = ids[r * rows:(r + 1) * rows]
            for chunk in part.chunk(p.accumulate_steps):
                ref = next_token_loss(reference(input_ids=chunk).logits, chunk) / (p.accumulate_steps * hcg.data_size)
                ref.backward()
                total += float(ref)
        ref_losses.append(total)
        if clip:
            norms.append(float(opt.last_grad_norm))
            ref_norms.append(float(torch.nn.utils.clip_grad_norm_(reference.parameters(), clip)))
        ref_opt.step()
        ref_opt.zero_grad()
    match_one_process(model, reference)
    names = sorted(n for n, _ in model.named_parameters())
    return {"losses": losses, "ref_losses": ref_losses, "norms": norms, "ref_norms": ref_norms,
            "stages": list(model.stage_ids), "names": names, "schedule": p.schedule,
            "overlapped": opt.dp_buckets.overlapped if opt.dp_buckets is not None else 0}


def batch_error(text: str, rows: int, lengths: tuple[int, ...] = (SEQ,)) -> str:
    """The error of train_batch on batches of `rows` rows, one step per length (the last fails)."""
    init(strategy.loads(text))
    model = parallel.parallelize(llama())
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters()))
    try:
        for step, length in enumerate(lengths):
            ids = _batch(step, rows, length)
            model.train_batch((ids, ids), opt)
    except strategy.StrategyError as e:
        return str(e)
    raise AssertionError("no error")


def split_error(text: str, layers: int, tied: bool = False) -> tuple[str, bool]:
    """A model the stages cannot cut: the error, and whether the model was left whole."""
    init(strategy.loads(text))
    model = llama(layers)
    if tied:
        model.lm_head.weight = model.model.embed_tokens.weight
    names = [n for n, _ in model.named_parameters()]
    try:
        parallel.parallelize(model, plan={})
    except strategy.StrategyError as e:
        return str(e), [n for n, _ in model.named_parameters()] == names
    raise AssertionError("no error")


def demo_parity(text: str, steps: int = 3, layers: int = 2) -> dict:
    """The demo GPT pipelined (train_gpt's build and loop) against one process on the same batches."""
    import importlib
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "examples"))
    gpt = importlib.import_module("train_gpt")
    hcg = init(strategy.loads(text))
    p = hcg.resolved.pipeline
    cfg = gpt.Config(steps=steps, batch_size=p.micro_batch_size * p.accumulate_steps * hcg.data_size, seq_len=32, lr=1e-3,
                     layers=layers)
    summary = gpt.train(cfg, hcg)
    model, _ = gpt.build(cfg, hcg)  # a fresh one, for the parameter names of this rank
    names = sorted(n for n, _ in model.named_parameters())
    parallel.destroy()
    # The same batches without a pipeline: dp over the same ranks, each half of the rows (the same mean gradient).
    reference = init(strategy.loads(f"hybrid_configs {{ dp_degree: {hcg.world_size // hcg.mp_size} mp_degree: {hcg.mp_size} }}"))
    return {"losses": summary["losses"], "ref_losses": gpt.train(cfg, reference)["losses"], "names": names}


def save_pipelined(text: str, path: str, steps: int = 2) -> dict:
    """Train a pipelined Llama, save it; the gathered state dict."""
    hcg = init(strategy.loads(text))
    p = hcg.resolved.pipeline
    model = parallel.parallelize(llama())
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR))
    rows = p.micro_batch_size * p.accumulate_steps
    for step in range(steps):
        ids = _batch(step, rows * hcg.data_size)[hcg.data_rank * rows:(hcg.data_rank + 1) * rows]
        model.train_batch((ids, ids), opt)
    parallel.save(path, model, opt, step=steps)
    return parallel.full_state_dict(model)


def load_pipelined(text: str, path: str) -> dict:
    """Load into another pipeline layout: the gathered state dict and what load says."""

    hcg = init(strategy.loads(text))
    torch.manual_seed(7)
    model = llama()
    if hcg.pp_size > 1 or hcg.mp_size > 1:
        model = parallel.parallelize(model)
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR))
    info = load_quietly(path, model, opt)
    return {"full": parallel.full_state_dict(model), "resharded": info.resharded, "step": info.step}


def paddle_4d_fine_tunes(path: str, steps: int) -> dict:
    """Paddle's own 4-D strategy file (mp 2 × pp 2 × sharding 2, bf16, recompute) through examples/finetune_hf.py's
    loop on a small Llama: this rank's part and the losses."""
    import argparse
    import importlib
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "examples"))
    finetune = importlib.import_module("finetune_hf")
    hcg = init(strategy.load(path))
    model = parallel.parallelize(llama())
    parallel.cast_for_amp(model.module)
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3), max_grad_norm=1.0)
    rows = hcg.resolved.pipeline.micro_batch_size * hcg.resolved.pipeline.accumulate_steps * hcg.data_size
    args = argparse.Namespace(steps=steps, batch_size=rows, seq_len=SEQ)
    data = torch.randint(0, VOCAB, (4096,), generator=torch.Generator().manual_seed(0))
    summary = finetune.train(model, opt, data, args, hcg, progress=False)
    return {"losses": summary["losses"], "stages": list(model.stage_ids), "degrees": hcg.resolved.degrees,
            "stage": hcg.resolved.sharding.stage, "amp": hcg.resolved.amp.dtype,
            "units": sorted(n for n, m in model.module.named_modules() if getattr(m, "_parallel_recompute", False))}

