"""Rank-side: run the examples' training loops (train_gpt.py, finetune_hf.py) for a few steps under a given strategy
(the axes' tests run them under sep, cp and experts)."""

from __future__ import annotations

import importlib
import sys

import torch

import parallel
import strategy
from conftest import ROOT
from rank_helpers import init, make_strategy


def train_gpt(mp: int, dp: int, flags, steps: int, sync: dict | None = None) -> list[float]:
    sys.path.insert(0, str(ROOT / "examples"))
    train_gpt = importlib.import_module("train_gpt")
    hcg = init(make_strategy(mp, dp=dp, flags=flags, **(sync or {})))
    cfg = train_gpt.Config(steps=steps, batch_size=8, seq_len=32)
    return train_gpt.train(cfg, hcg)["losses"]


def demo_losses(text: str, steps: int) -> list[float]:
    """examples/train_gpt.py's loop (its attention through parallel.sep_attention) under `text`."""
    sys.path.insert(0, str(ROOT / "examples"))
    gpt = importlib.import_module("train_gpt")
    hcg = init(strategy.loads(text))
    return gpt.train(gpt.Config(steps=steps, batch_size=4, seq_len=32), hcg)["losses"]


def finetune_losses(path: str, steps: int, model_type: str = "llama", eps: float = 1e-8) -> list[float]:
    """examples/finetune_hf.py's model (`--model-type`) and loop (split_sequence, the Hugging Face attention switched)
    under `path` (a file, or strategy text); AdamW with `eps`."""
    import argparse

    sys.path.insert(0, str(ROOT / "examples"))
    finetune = importlib.import_module("finetune_hf")
    hcg = init(strategy.load(path) if path.endswith(".prototxt") else strategy.loads(path))
    model, encode = finetune.build_model(None, 32, model_type)
    parallel.parallelize(model)
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3, eps=eps))
    args = argparse.Namespace(steps=steps, batch_size=2, seq_len=32)
    return finetune.train(model, opt, encode(finetune.corpus_text()), args, hcg, progress=False)["losses"]
