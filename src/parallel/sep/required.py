"""Under sep each rank holds a chunk of every row, so attention must exchange chunks: a model's forward has to reach
`sep_attention`. Whether it does is known only by running it, so the first forward checks, then the check goes away.
"""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.utils.hooks import RemovableHandle

from strategy import StrategyError

from .attention import CALLS

__all__ = ["FIELD", "require_sep_attention"]

FIELD = "hybrid_configs.sep_degree"


def require_sep_attention(model: nn.Module) -> None:
    """Make the first forward of `model` raise unless it called `sep_attention`."""
    _Check(model, type(model).__name__)


class _Check:
    """One module's first-forward check: a pre-hook opens a list of calls, the forward hook reads it."""

    def __init__(self, module: nn.Module, name: str) -> None:
        self.name = name
        self.token: Any = None
        self.calls: list[int] = []
        self.handles: list[RemovableHandle] = [module.register_forward_pre_hook(self.before),
                                               module.register_forward_hook(self.after)]

    def before(self, module: nn.Module, args: Any) -> None:
        self._restore()  # a forward that raised never reached `after`: its list must not stay current
        self.calls = []
        self.token = CALLS.set(self.calls)

    def after(self, module: nn.Module, args: Any, output: Any) -> None:
        self._restore()
        if not self.calls:
            raise StrategyError(
                f"{FIELD} > 1 gives each rank a chunk of every row, but {self.name}'s forward never called "
                "parallel.sep_attention, so its attention saw only this rank's chunk: it is neither a Hugging Face "
                "model whose attention parallelize switches (through transformers' AttentionInterface) nor a model "
                "that attends through parallel.sep_attention; call parallel.sep_attention(q, k, v) where it attends "
                "(a drop-in for F.scaled_dot_product_attention), or set sep_degree: 1", field=FIELD)
        for handle in self.handles:  # it attends through sep_attention: nothing more to check
            handle.remove()

    def _restore(self) -> None:
        if self.token is not None:
            CALLS.reset(self.token)
            self.token = None
