"""Rank-side: run examples/train_gpt.py's training loop for a few steps under a given strategy."""

from __future__ import annotations

import importlib
import sys

from conftest import ROOT
from rank_helpers import init, make_strategy


def train_gpt(mp: int, dp: int, flags, steps: int, sync: dict | None = None) -> list[float]:
    sys.path.insert(0, str(ROOT / "examples"))
    train_gpt = importlib.import_module("train_gpt")
    hcg = init(make_strategy(mp, dp=dp, flags=flags, **(sync or {})))
    cfg = train_gpt.Config(steps=steps, batch_size=8, seq_len=32)
    return train_gpt.train(cfg, hcg)["losses"]
