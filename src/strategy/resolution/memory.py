"""Model-state memory per rank (parameters, gradients, Adam state) by ZeRO's formulas, as DeepSpeed's estimator gives it.

Model states only: activations, communication buffers and a stage-3 block's gathered parameters come on top.
"""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["FP32", "MIXED", "ModelStateBytes", "ModelStateMemory", "human_bytes", "model_state"]

# Bytes a parameter (parameter, gradient, optimizer state) for Adam, as the ZeRO paper (Rajbhandari et al., 2020,
# §3.1, Figure 1) counts them. Mixed precision: 16-bit weights and gradients, fp32 master weights, momentum and variance
# (2 + 2 + 12 = 16). fp32 training: fp32 weights, gradients, momentum and variance (4 + 4 + 8 = 16).
MIXED = (2, 2, 12)
FP32 = (4, 4, 8)


class ModelStateBytes(NamedTuple):
    """Bytes of model state: parameters, gradients and optimizer (Adam) state."""

    parameters: float
    gradients: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.parameters + self.gradients + self.optimizer


class ModelStateMemory(NamedTuple):
    """`per_rank`: what each rank holds; `unsharded`: one process holding the whole model (no mp, pp or sharding)."""

    per_rank: ModelStateBytes
    unsharded: ModelStateBytes


def model_state(params: float, *, model_split: int, sharding: int, stage: int, mixed: bool) -> ModelStateMemory:
    """ZeRO's per-rank model states for `params` parameters (Ψ), with N = `sharding` and (P, G, K) the bytes a
    parameter (MIXED or FP32): stage 1 (P_os) shards the optimizer state, (P + G + K/N)Ψ; stage 2 (P_os+g) the
    gradients too, (P + (G + K)/N)Ψ; stage 3 (P_os+g+p) the parameters too, (P + G + K)Ψ/N. `model_split` (mp · pp)
    divides everything, assuming an even split; N = 1 shards nothing.

    The figure is ZeRO's, not a measurement: this project's stage 1 runs on FSDP2, which also keeps gradients
    sharded between steps, so ZeRO-1's full gradients are what a rank holds while gradient merge accumulates (its
    peak), not at rest.

    Raises:
        ValueError: `params` is not a positive finite number, or `stage` is not 1, 2 or 3.
    """
    if not (isinstance(params, (int, float)) and not isinstance(params, bool) and math.isfinite(params) and params > 0):
        raise ValueError(f"params must be a positive number of parameters, got {params!r}")
    if stage not in (1, 2, 3):
        raise ValueError(f"stage must be 1, 2 or 3, got {stage!r}")
    full = ModelStateBytes(*(params * b for b in (MIXED if mixed else FP32)))
    shard = lambda value, sharded: value / model_split / (sharding if sharded else 1)  # noqa: E731
    per_rank = ModelStateBytes(shard(full.parameters, stage >= 3), shard(full.gradients, stage >= 2),
                               shard(full.optimizer, True))
    return ModelStateMemory(per_rank, full)


def human_bytes(n: float) -> str:
    """`n` bytes in binary units, as memory is reported: "13.04 GiB", "512 B"."""
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024:
            break
    return f"{n:.2f} {unit}"
