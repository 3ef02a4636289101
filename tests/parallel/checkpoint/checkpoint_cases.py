"""Rank-side checkpoint cases: exact resume, resharding across layouts, fit checks, Hugging Face export."""

from __future__ import annotations

import copy
import importlib
import sys
from pathlib import Path

import torch

import parallel
import strategy
from conftest import ROOT
from rank_helpers import init, make_strategy

STEPS = 6


def _train_gpt():
    sys.path.insert(0, str(ROOT / "examples"))
    return importlib.import_module("train_gpt")


def _cfg(steps: int = STEPS):
    return _train_gpt().Config(steps=steps, batch_size=8, seq_len=32)


def _optimizer_shards(opt) -> list[list[torch.Tensor]]:
    """Every tensor of the optimizer's state, parameter by parameter, in order (this rank's shards)."""
    inner = opt.optimizer
    return [[v.clone() for _, v in sorted(inner.state[p].items()) if torch.is_tensor(v)]
            for g in inner.param_groups for p in g["params"]]


def straight_vs_resumed(mp: int, flags, split: int, ckpt: str) -> dict:
    """STEPS steps straight vs `split` steps, save, a fresh model and optimizer (another seed), load, the rest."""
    gpt = _train_gpt()
    hcg = init(make_strategy(mp, flags=flags))
    straight = gpt.train(_cfg(), hcg)
    model, opt = _last_model_and_optimizer(gpt, hcg, _cfg())
    expected_params = {k: v.clone() for k, v in model.state_dict().items()}
    expected_state = _optimizer_shards(opt)
    saving = strategy.CheckpointSettings(dir=ckpt)  # resume "auto": the newest checkpoint there
    first = gpt.train(_cfg(split), hcg, checkpoints=saving)  # saved at its last step
    torch.manual_seed(12345)  # nothing but the checkpoint may carry the state over
    resumed = gpt.train(_cfg(), hcg, checkpoints=saving)
    model, opt = _last_model_and_optimizer(gpt, hcg, _cfg(), resume=Path(ckpt) / f"step-{split}")
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, expected_params[name], rtol=1e-6, atol=0, msg=lambda m: f"{name}: {m}")
    for got, want in zip(_optimizer_shards(opt), expected_state):
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-6, atol=0)
    return {"straight": straight["losses"], "resumed": first["losses"] + resumed["losses"]}


def _last_model_and_optimizer(gpt, hcg, cfg, resume: Path | None = None):
    """Train like `train` does and keep the model (train returns only the summary)."""
    model, opt = gpt.build(cfg, hcg)
    scheduler = gpt.warmup(opt, cfg)
    first = 0
    if resume:  # as the Checkpointer restores them: the parameters and optimizer, then the scheduler
        ckpt = parallel.Checkpointer(hcg, settings=strategy.CheckpointSettings(resume=str(resume)))
        first = ckpt.start(model, opt, scheduler=scheduler)
    data = gpt.corpus()
    for step in range(first, cfg.steps):
        ids, targets = gpt.batch(data, step, cfg, hcg)
        model(ids, targets).backward()
        if cfg.clip:
            opt.clip_grad_norm_(cfg.clip)  # as train() does
        opt.step()
        opt.zero_grad()
        scheduler.step()
    return model, opt


def save_gpt(mp: int, dp: int, steps: int, ckpt: str, text: str | None = None) -> dict:
    """Train the demo model, save it, and return its full state dict and the next step's loss."""
    gpt = _train_gpt()
    hcg = init(strategy.loads(text) if text else make_strategy(mp, dp=dp))
    model, opt = _last_model_and_optimizer(gpt, hcg, _cfg(steps))
    parallel.save(ckpt, model, opt, step=steps, extra={"note": "from mp test"})
    full = parallel.full_state_dict(model)
    return {"full": full, "next_loss": _next_loss(gpt, hcg, model, opt, steps)}


def _next_loss(gpt, hcg, model, opt, step: int) -> float:
    cfg = _cfg(step + 1)
    ids, targets = gpt.batch(gpt.corpus(), step, cfg, hcg)
    loss = model(ids, targets)
    loss.backward()
    opt.clip_grad_norm_(cfg.clip)
    opt.step()
    opt.zero_grad()
    return gpt.global_mean(loss, hcg)


def load_gpt(mp: int, dp: int, steps: int, ckpt: str, text: str | None = None) -> dict:
    """Load into another layout: the full state dict, what load reports, and the next step's loss."""
    import warnings

    gpt = _train_gpt()
    hcg = init(strategy.loads(text) if text else make_strategy(mp, dp=dp))
    torch.manual_seed(999)
    model, opt = gpt.build(_cfg(steps), hcg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        info = parallel.load(ckpt, model, opt)
    full = parallel.full_state_dict(model)
    return {"full": full, "step": info.step, "extra": info.extra, "resharded": info.resharded, "layout": info.layout,
            "warnings": [str(w.message) for w in caught], "strategy": info.strategy,
            "next_loss": _next_loss(gpt, hcg, model, opt, steps)}


def load_error(mp: int, ckpt: str, change: str) -> tuple[str, bool]:
    """Loading into a model that does not fit: the error, and whether the model was left as it was."""
    gpt = _train_gpt()
    init(make_strategy(mp))
    cfg = _cfg()
    if change == "wider":
        cfg = type(cfg)(steps=cfg.steps, batch_size=8, seq_len=32, d_model=cfg.d_model * 2)
    elif change == "deeper":
        cfg = type(cfg)(steps=cfg.steps, batch_size=8, seq_len=32, layers=cfg.layers + 1)
    model, opt = gpt.build(cfg, parallel.current())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        parallel.load(ckpt, model, opt)
    except ValueError as e:
        same = all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
        return str(e), same
    raise AssertionError("no error")


def hf_full_state_dict_round_trip(mp: int) -> float:
    """parallelize a Llama, take full_state_dict, load it into a fresh unparallelised one: same logits."""
    from hf_models import hf_model

    init(make_strategy(mp, flags=(True, True, True)))
    reference = hf_model("llama")
    model = parallel.parallelize(copy.deepcopy(reference))
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(300))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    full = parallel.full_state_dict(model)
    fresh = hf_model("llama")
    torch.nn.init.zeros_(fresh.lm_head.weight)  # make sure the weights come from `full`
    missing, unexpected = fresh.load_state_dict(full, strict=True)
    assert not missing and not unexpected
    with torch.no_grad():
        again = fresh(input_ids=ids).logits
    torch.testing.assert_close(again, logits, rtol=1e-5, atol=1e-5)
    assert set(full) == set(reference.state_dict())
    return float((again - logits).abs().max())


def small_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(parallel.ColumnParallelLinear(8, 16, gather_output=False),
                               parallel.RowParallelLinear(16, 8, input_is_parallel=True))


def load_small(path: str) -> dict:
    init(make_strategy(1))
    model = small_model(7)
    info = parallel.load(path, model)
    return {"step": info.step, "full": parallel.full_state_dict(model)}


def save_before_the_first_step_then_load(path: str) -> int:
    """A checkpoint with no optimizer state yet loads into an optimizer (which keeps no state either)."""
    init(make_strategy(2))
    model = small_model(0)
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3))
    parallel.save(path, model, opt, step=0)
    fresh = small_model(1)
    opt2 = parallel.HybridParallelOptimizer(torch.optim.AdamW(fresh.parameters(), lr=1e-3))
    info = parallel.load(path, fresh, opt2)
    for a, b in zip(model.parameters(), fresh.parameters()):
        assert torch.equal(a, b)
    assert not opt2.optimizer.state  # nothing invented
    return info.step
