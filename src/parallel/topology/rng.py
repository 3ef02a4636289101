"""The ranks' random streams under tensor parallelism: tensor_init_seed seeds them all alike, and each rank keeps a
model-parallel stream of its own for what differs by rank (Paddle's model_parallel_random_seed, Megatron's RNG tracker).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from strategy import Resolved

__all__ = ["ModelParallelRNG", "seed_streams"]


class ModelParallelRNG:
    """A rank's model-parallel random stream: the state torch's default generators (the CPU one, and the current CUDA
    device's) take inside `fork()`, kept between forks. A DCP-style Stateful: the checkpointer saves it with the
    rank's other generators, recompute replays it.

    Args:
        seed: the stream's seed (seed + 1 + mp_rank · pp_degree + pp_rank, as Paddle's fleet computes it).
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._cpu = torch.Generator().manual_seed(seed).get_state()
        self._cuda: torch.Tensor | None = None  # made on first use, on the device current then

    def _cuda_state(self) -> torch.Tensor:
        if self._cuda is None:
            self._cuda = torch.Generator(device="cuda").manual_seed(self.seed).get_state()
        return self._cuda

    @contextlib.contextmanager
    def fork(self) -> Iterator[None]:
        """Inside: torch's default generators draw from this stream; after: they continue where they were."""
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        outer = torch.get_rng_state()
        outer_cuda = torch.cuda.get_rng_state() if cuda else None
        torch.set_rng_state(self._cpu)
        if cuda:
            torch.cuda.set_rng_state(self._cuda_state())
        try:
            yield
        finally:
            self._cpu = torch.get_rng_state()
            torch.set_rng_state(outer)
            if cuda:
                self._cuda = torch.cuda.get_rng_state()
                torch.cuda.set_rng_state(outer_cuda)  # type: ignore[arg-type]

    def state_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "cpu": self._cpu.clone(), "cuda": None if self._cuda is None else self._cuda.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.seed, self._cpu = int(state["seed"]), state["cpu"].clone()
        self._cuda = None if state.get("cuda") is None else state["cuda"].clone()


def seed_streams(resolved: Resolved, *, mp_rank: int, pp_rank: int, pp_size: int) -> ModelParallelRNG | None:
    """At mp_degree > 1: with tensor_init_seed, every rank's default generators seeded with it (whatever the script
    seeded before, replicated weights and dropout on replicated activations then agree across the mp group), and the
    model-parallel stream seeded seed + 1 + mp_rank · pp_size + pp_rank; with -1, the script's seeds are left alone
    and rank 0 draws the base every rank agrees on. None at mp_degree 1 (nothing differs by mp rank)."""
    if resolved.mp_degree == 1:
        return None
    seed = resolved.tensor_init_seed
    if seed != -1:
        torch.manual_seed(seed)  # the CPU generator and every CUDA device's
    else:
        agreed = [random.SystemRandom().randrange(2**31) if dist.get_rank() == 0 else None]
        dist.broadcast_object_list(agreed, src=0)
        seed = int(agreed[0])  # type: ignore[arg-type]
    return ModelParallelRNG(seed + 1 + mp_rank * pp_size + pp_rank)
