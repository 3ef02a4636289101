"""Model-state memory per rank (parameters, gradients, Adam state) as this runtime holds them (ZeRO's byte counts,
FSDP2's sharding), for `strategy explain --params`; `strategy.estimate_memory` adds activations and the weights FSDP2
gathers during a step.
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
    """Each rank's model states for `params` parameters (Ψ) as this runtime holds them after an optimizer step, with
    `model_split` (mp · pp, or ep · pp for experts) dividing everything, assuming an even split:
    - sharding N = 1: (P + G + K)Ψ with (P, G, K) = MIXED under pure amp (the fp32 master's gradient is a temporary
      of the step) or FP32;
    - sharding N > 1: FSDP2 keeps fp32 shards of the weights (the masters themselves under pure amp), gradients and
      moments between steps at every stage, (4 + 4 + 8)Ψ / N. ZeRO's stage 1 and 2 keep full gradients (stage 1) and
      full weights; FSDP2 gathers those only during the step (`strategy.estimate_memory` counts them there).

    Raises:
        ValueError: `params` is not a positive finite number, or `stage` is not 1, 2 or 3.
    """
    if not (isinstance(params, (int, float)) and not isinstance(params, bool) and math.isfinite(params) and params > 0):
        raise ValueError(f"params must be a positive number of parameters, got {params!r}")
    if stage not in (1, 2, 3):
        raise ValueError(f"stage must be 1, 2 or 3, got {stage!r}")
    full = ModelStateBytes(*(params * b for b in (MIXED if mixed else FP32)))
    if sharding > 1:
        per_rank = ModelStateBytes(*(params * b / model_split / sharding for b in FP32))
    else:
        per_rank = ModelStateBytes(*(v / model_split for v in full))
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
