"""Under sep or cp each rank holds a share of every row, so attention must exchange it: a model's forward has to reach
`sep_attention` (or `cp_attention`). Whether it does is known only by running it, so the first forward checks, then
the check goes away.
"""

from __future__ import annotations

import contextvars
from typing import Any, NamedTuple

from torch import nn
from torch.utils.hooks import RemovableHandle

from strategy import StrategyError

from .attention import CALLS

__all__ = ["FIELD", "SEP", "Requirement", "require_attention", "require_sep_attention"]

FIELD = "hybrid_configs.sep_degree"


class Requirement(NamedTuple):
    """What a sequence axis asks of a model's forward: the degree's field, the function to call, where its calls are
    counted, and what each rank holds of a row (for the message)."""

    field: str
    function: str
    calls: contextvars.ContextVar[list[int] | None]
    share: str  # "a chunk of every row"
    seen: str  # "this rank's chunk"


SEP = Requirement(FIELD, "sep_attention", CALLS, "a chunk of every row", "this rank's chunk")


def require_sep_attention(model: nn.Module) -> None:
    """Make the first forward of `model` raise unless it called `sep_attention`."""
    require_attention(model, SEP)


def require_attention(model: nn.Module, requirement: Requirement) -> None:
    """Make the first forward of `model` raise unless it called `requirement.function`."""
    _Check(model, type(model).__name__, requirement)


class _Check:
    """One module's first-forward check: a pre-hook opens a list of calls, the forward hook reads it."""

    def __init__(self, module: nn.Module, name: str, requirement: Requirement) -> None:
        self.name, self.requirement = name, requirement
        self.token: Any = None
        self.calls: list[int] = []
        self.handles: list[RemovableHandle] = [module.register_forward_pre_hook(self.before),
                                               module.register_forward_hook(self.after)]

    def before(self, module: nn.Module, args: Any) -> None:
        self._restore()  # a forward that raised never reached `after`: its list must not stay current
        self.calls = []
        self.token = self.requirement.calls.set(self.calls)

    def after(self, module: nn.Module, args: Any, output: Any) -> None:
        self._restore()
        if not self.calls:
            r = self.requirement
            degree = r.field.rpartition(".")[2]
            raise StrategyError(
                f"{r.field} > 1 gives each rank {r.share}, but {self.name}'s forward never called "
                f"parallel.{r.function}, so its attention saw only {r.seen}: it is neither a Hugging Face "
                "model whose attention parallelize switches (through transformers' AttentionInterface) nor a model "
                f"that attends through parallel.{r.function}; call parallel.{r.function}(q, k, v) where it attends "
                f"(a drop-in for F.scaled_dot_product_attention), or set {degree}: 1", field=r.field)
        for handle in self.handles:  # it attends through the function: nothing more to check
            handle.remove()

    def _restore(self) -> None:
        if self.token is not None:
            self.requirement.calls.reset(self.token)
            self.token = None
