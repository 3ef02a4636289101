"""How a checkpoint sees an optimizer: the torch optimizer that keeps the state and, for each model parameter, the
tensor it steps (its fp32 master under pure amp): through HybridParallelOptimizer's own methods, or a plain torch
optimizer as it is. The checkpoint package reads nothing else of an optimizer."""

from __future__ import annotations

from typing import Any

import torch

from ..training.optimizer import HybridParallelOptimizer

__all__ = ["Optimizer", "OptimizerView"]

Optimizer = HybridParallelOptimizer | torch.optim.Optimizer


class OptimizerView:
    """`optimizer` as a checkpoint saves and restores it."""

    __slots__ = ("inner", "wrapper")

    def __init__(self, optimizer: Optimizer) -> None:
        self.wrapper = optimizer if isinstance(optimizer, HybridParallelOptimizer) else None
        self.inner: torch.optim.Optimizer = optimizer.optimizer if isinstance(optimizer, HybridParallelOptimizer) \
            else optimizer

    def stepped(self, p: torch.Tensor) -> torch.Tensor:
        """The tensor whose state the optimizer keeps for model parameter `p`."""
        return self.wrapper.stepped(p) if self.wrapper is not None else p

    def master(self, p: torch.Tensor) -> torch.Tensor | None:
        return self.wrapper.master_weight(p) if self.wrapper is not None else None

    def restored(self) -> None:
        """After a load: parameters with fp32 masters take the masters' values."""
        if self.wrapper is not None:
            self.wrapper.masters_restored()

    def extra_state(self) -> dict[str, Any] | None:
        """The loss scaler and the gradient-merge position (HybridParallelOptimizer's), else None."""
        return self.wrapper.extra_state() if self.wrapper is not None else None

    def load_extra_state(self, state: dict[str, Any]) -> None:
        if self.wrapper is not None:
            self.wrapper.load_extra_state(state)
