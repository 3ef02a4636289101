"""What each rank holds besides tensors that an exact continuation needs: its random number generators (torch's
CPU and CUDA ones, Python's, NumPy's where it is loaded), the data position and the learning-rate scheduler. Each
rank writes its own small file beside the shards (`rank-R.pt`)."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path
from typing import Any, Protocol

import torch

__all__ = ["Stateful", "capture", "read", "restore", "write"]


class Stateful(Protocol):
    """Anything with `state_dict()` / `load_state_dict(state)`: a scheduler, a sampler, a data loader, a batch
    generator of one's own."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> Any: ...


def capture(objects: dict[str, Stateful | None]) -> dict[str, Any]:
    """This rank's RNG states and each object's state dict."""
    rng: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        rng["numpy"] = numpy.random.get_state()
    return {"rng": rng, **{name: obj.state_dict() for name, obj in objects.items() if obj is not None}}


def restore(state: dict[str, Any], objects: dict[str, Stateful | None], *, rng: bool = True) -> None:
    """Put the RNG states (unless `rng` is false) and each object's state back."""
    if rng:
        saved = state["rng"]
        torch.set_rng_state(saved["torch"])
        random.setstate(saved["python"])
        if "cuda" in saved and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(saved["cuda"])
        numpy = sys.modules.get("numpy")
        if "numpy" in saved and numpy is not None:
            numpy.random.set_state(saved["numpy"])
    for name, obj in objects.items():
        if obj is not None and name in state:
            obj.load_state_dict(state[name])


def write(directory: Path, rank: int, state: dict[str, Any]) -> None:
    """Atomically and durably (a temporary file, fsynced, renamed): a crash leaves no half-written rank file."""
    target = directory / f"rank-{rank}.pt"
    tmp = directory / f".rank-{rank}.pt.tmp"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def read(directory: Path, rank: int) -> dict[str, Any]:
    # The project's own file (Python's and NumPy's RNG states are tuples and arrays): not weights-only.
    return torch.load(directory / f"rank-{rank}.pt", weights_only=False)
