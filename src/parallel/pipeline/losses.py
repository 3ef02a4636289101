"""The loss a pipeline's last stage computes, and the Hugging Face losses it would miss.

The last stage sees the logits only: its loss is the next-token cross entropy (`next_token_loss`). A model whose own
loss adds terms from inside its layers (a router's load-balancing loss) or is another loss altogether would train on
something else at pp_degree > 1, so it is refused before anything changes.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from strategy import StrategyError

from .split import FIELD

__all__ = ["check_whole_loss", "next_token_loss"]


def next_token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """A Hugging Face causal LM's own loss: cross entropy of each position's logits against the next token
    (-100 ignored), the mean over the micro-batch's targets."""
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(), ignore_index=-100)


def check_whole_loss(model: nn.Module) -> None:
    """Raise when `model`'s own training loss is more than `next_token_loss` of its logits."""
    config: Any = model.config
    name = type(model).__name__
    coefficient = getattr(config, "router_aux_loss_coef", 0.0) or 0.0
    if getattr(config, "output_router_logits", False) and coefficient:
        raise StrategyError(
            f"{FIELD} > 1 with {name}'s router load-balancing loss (config.output_router_logits, router_aux_loss_coef "
            f"{coefficient}): it sums every layer's router logits, which the stages do not pass on, so the last stage "
            "would train on the next-token loss alone; set config.output_router_logits = False (the loss then is the "
            "next-token loss, on one process too), or pp_degree: 1", field=FIELD)
    loss_type = getattr(model, "loss_type", None) or "ForCausalLM"
    if loss_type != "ForCausalLM":
        raise StrategyError(f"{FIELD} > 1: {name}'s loss is {loss_type!r}, and a pipeline's last stage computes the "
                            "next-token cross entropy; pass parallelize(..., loss_fn=...) with the model's loss, or "
                            "set pp_degree: 1", field=FIELD)
