"""Dropout inside the tensor-parallel region: each mp rank's own random stream (tensor_init_seed), switched to for a
block, so split heads draw independent masks while replicated activations keep drawing the shared one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..topology.groups import HybridGroup, current

__all__ = ["model_parallel_rng"]


@contextlib.contextmanager
def model_parallel_rng(*, hcg: HybridGroup | None = None) -> Iterator[None]:
    """Inside, torch's default generator (and the current CUDA device's) is this rank's model-parallel stream,
    seeded seed + 1 + mp_rank · pp_degree + pp_rank (Megatron's `get_cuda_rng_tracker().fork()`, Paddle's
    `get_rng_state_tracker().rng_state()`); on exit the default stream continues where it was. At mp_degree 1 it
    changes nothing.

    Example::

        with parallel.model_parallel_rng():
            probs = F.dropout(probs, p=0.1)     # attention probabilities of this rank's heads
    """
    hcg = hcg or current()
    if hcg.mp_rng is None:
        yield
        return
    with hcg.mp_rng.fork():
        yield
