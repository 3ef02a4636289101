"""Rank-side case of the Paddle import: a checkpoint `parallel.import_paddle` wrote, loaded at another layout, takes
Paddle's third AdamW step."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

import parallel
import strategy
from parallel.checkpoint.paddle.layout import apply, rule_for
from rank_helpers import init, load_quietly


def third_step(path: str, fixture: str, text: str) -> dict:
    """Load the imported checkpoint at `text`'s layout, take one AdamW step on Paddle's batch with Paddle's loss
    (cross entropy of logits[t] against ids[t], unshifted); the loss, the step loaded, and the largest distance of the
    gathered parameters from Paddle's after its third step."""
    import transformers

    hcg = init(strategy.loads(text))
    folder = Path(fixture)
    config = json.loads((folder / "paddle_pdparams" / "config.json").read_text())
    torch.manual_seed(0)
    model = parallel.parallelize(transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**config)))
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters()))
    info = load_quietly(path, model, opt)
    ids = torch.from_numpy(np.load(folder / "train_ids.npy"))
    logits = model(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids.reshape(-1))
    loss.backward()
    opt.step()
    full = parallel.full_state_dict(model)
    after = np.load(folder / "params_after_step3.npz")
    worst = 0.0
    for key in after.files:
        for hf, value in apply(rule_for("llama", key, False), key, after[key], config).items():
            worst = max(worst, (full[hf] - torch.from_numpy(np.ascontiguousarray(value))).abs().max().item())
    return {"loss": loss.item(), "step": info.step, "worst": worst, "lr": opt.optimizer.param_groups[0]["lr"],
            "mp": hcg.mp_size}


def logits_after_load(path: str, fixture: str, text: str) -> float:
    """Load the imported checkpoint (weights only) at `text`'s layout, gather the whole model, and run it in one
    process on Paddle's evaluation batch: the largest distance from Paddle's logits (its first 4 positions)."""
    import transformers

    init(strategy.loads(text))
    folder = Path(fixture)
    config = json.loads((folder / "paddle_pdparams" / "config.json").read_text())
    build = lambda: transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**config))  # noqa: E731
    torch.manual_seed(0)
    model = parallel.parallelize(build())
    load_quietly(path, model, None)
    full = parallel.full_state_dict(model)
    plain = build().eval()
    plain.load_state_dict(full)
    with torch.no_grad():
        logits = plain(input_ids=torch.from_numpy(np.load(folder / "eval_ids.npy"))).logits[:, :4]
    return (logits - torch.from_numpy(np.load(folder / "eval_logits_first4.npy"))).abs().max().item()
