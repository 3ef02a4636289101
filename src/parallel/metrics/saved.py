"""What a rank holds, counted from its tensors: the activations autograd saves for backward (their peak, through
saved-tensor hooks) and the model states (parameters, gradients, optimizer state). These are the quantities
`strategy.estimate_memory` predicts; on a CPU, where no allocator keeps a peak, they are the measured memory a trial
reports (`strategy tune`), and tests/strategy/planning checks the memory model against them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

from ..topology.dtensors import local

__all__ = ["SavedTensorMeter", "state_bytes", "storage_bytes", "saved_activations"]


class SavedTensorMeter:
    """The bytes of the tensors autograd holds for backward, live at once: each storage counted once while any saved
    tensor of it is alive, the model's parameters left out. What it packs it holds detached: keeping the tensor itself
    (with its grad_fn) would make a reference cycle through the graph, keeping graphs alive that autograd had freed
    (torch's saved-tensor hooks docs warn of it: a pipeline's shape-inference step stayed alive for the whole run)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.count: dict[int, int] = {}
        self.live = self.peak = 0

    def pack(self, t: torch.Tensor) -> Any:
        s = t.untyped_storage()
        ptr = s.data_ptr()
        # (asked each time: FSDP2's gathered weights are the modules' parameters while their block runs)
        params = {local(p).untyped_storage().data_ptr() for p in self.model.parameters()}
        if ptr in params or s.nbytes() == 0:
            return t
        if not self.count.get(ptr):
            self.live += s.nbytes()
            self.peak = max(self.peak, self.live)
        self.count[ptr] = self.count.get(ptr, 0) + 1
        holder = _Holder(t.detach())
        weakref.finalize(holder, self._release, ptr, s.nbytes())
        return holder

    def _release(self, ptr: int, nbytes: int) -> None:
        self.count[ptr] -= 1
        if not self.count[ptr]:
            self.live -= nbytes

    @staticmethod
    def unpack(x: Any) -> torch.Tensor:
        return x.t if isinstance(x, _Holder) else x


class _Holder:
    __slots__ = ("t", "__weakref__")

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t


class _Recomputed:
    """Recompute's peak as a rank holds it. A checkpointed block's inputs reach the outer meter (checkpoint saves them
    with save_for_backward); its own saved tensors live inside torch.utils.checkpoint, out of the outer hooks' reach.
    When the backward recomputes a block, the rank holds what the outer meter holds then (every block input not yet
    consumed, the embeddings'; the logits and loss are freed by then) plus that block's saved tensors, counted here by
    running one block's forward once more under a meter of its own."""

    def __init__(self, meter: SavedTensorMeter, checkpoint: Callable[..., Any]) -> None:
        self.meter, self.checkpoint, self.layer, self.peak = meter, checkpoint, 0, 0

    def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not self.layer:
            one = SavedTensorMeter(self.meter.model)
            with saved_tensors_hooks(one.pack, one.unpack):
                held = fn(*args, **kwargs)
            self.layer = one.peak
            del held
        calls = 0

        def counted(*a: Any, **k: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls > 1:  # the recomputation, in the backward
                self.peak = max(self.peak, self.meter.live + self.layer)
            return fn(*a, **k)

        return self.checkpoint(counted, *args, **kwargs)


class _Measured:
    """What `saved_activations` found: `peak` the larger of the forward's saved bytes and recompute's peak; `forward`,
    `recompute` and `layer` (one recomputed block's own saved bytes) on their own."""

    forward = recompute = layer = 0

    @property
    def peak(self) -> int:
        return max(self.forward, self.recompute)


@contextmanager
def saved_activations(model: nn.Module) -> Iterator[_Measured]:
    """Count the activations saved for backward while the block runs (a step: forward and backward); the result is
    filled in when it ends. Recomputed blocks (the strategy's recompute, `parallel.training.recompute.checkpoint`) are
    counted as they are held: their inputs, and one block recomputed at a time."""
    import parallel.training.recompute as recompute

    meter = SavedTensorMeter(model)
    blocks = _Recomputed(meter, recompute.checkpoint)
    out = _Measured()
    recompute.checkpoint = blocks  # type: ignore[assignment]
    try:
        with saved_tensors_hooks(meter.pack, meter.unpack):
            yield out
    finally:
        recompute.checkpoint = blocks.checkpoint  # type: ignore[assignment]
        out.forward, out.recompute, out.layer = meter.peak, blocks.peak, blocks.layer


def storage_bytes(tensors: Iterable[torch.Tensor | None]) -> int:
    """The bytes of the storages behind `tensors` (a DTensor's local shard), each storage counted once."""
    seen: dict[int, int] = {}
    for t in tensors:
        if t is not None:
            s = local(t).untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def state_bytes(model: nn.Module, optimizer: Any) -> dict[str, int]:
    """This rank's model states after an optimizer step, as the memory model counts them: parameters; gradients (with
    `main_grad` buffers and the fp32 masters' gradients, which must not outlive the update under pure amp); the
    optimizer's state tensors with the fp32 masters (`optimizer`: a HybridParallelOptimizer or a torch optimizer)."""
    params = list(model.parameters())
    masters = [m for m in map(getattr(optimizer, "master_weight", lambda p: None), params) if m is not None]
    return {
        "parameters": storage_bytes(params),
        "gradients": storage_bytes([getattr(p, "main_grad", None) for p in params] + [p.grad for p in params]
                                   + [m.grad for m in masters]),
        "optimizer": storage_bytes([v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
                                   + masters),
    }
