"""Bytes on one rank for a decoder under a resolved strategy: parameters, gradients and optimizer state as this runtime
holds them after an optimizer step, and the activations saved for backward during a step.

Model states, by what the runtime keeps (measured on it, tests/test_plan_memory.py):
- Without sharding, fp32: 4 + 4 + 8 bytes a parameter (weights, gradients, AdamW's two moments). Under pure
  bf16/fp16 (amp use_pure_*): 16-bit weights and gradients, fp32 masters and moments, 2 + 2 + 12 (the fp32 master's
  gradient is a temporary of the step); normalisation weights stay fp32 (Paddle's O2), 4 + 4 + 8.
- FSDP2 (sharding_degree N > 1, any stage): fp32 shards of weights, gradients and moments, (4 + 4 + 8) / N, between
  steps at stages 1 and 2 too (ZeRO's formula keeps full gradients at stage 1 and full weights below stage 3: what
  FSDP2 holds only during the step, counted under activations as the gathered weights).
- mp splits q/k/v/gate/up by rows, o/down by columns, the embedding and LM head by vocabulary; norms and the router
  are whole on every mp rank. Experts are split over ep (each rank its block), and over moe_sharding when it is > 1
  (FSDP2 again); pp keeps each stage's layers (the embedding with the first, the final norm and head with the last).

Activations: elements saved per token per decoder layer, counted with saved-tensor hooks on Hugging Face's Llama
(SDPA, fp32) and matched by this formula within a few percent: 6h (norm inputs, normalised values and outputs, the
residual stream's copies) + 2·a·d + 2·g·d (q and k, rotated and not, by head) + a (attention's log-sum-exp) + 4·i
(gate, up, their activation and product) + 2 (two RMSNorm scales), h the hidden size, a and g the query and key/value
heads, d the head dimension, i the MLP width (per expert: top-k copies of 4·i_e, the router's E). mp divides the
head and MLP terms; sequence parallelism the rest too (the column layers keep their all-gathered input unless
recompute_allgather); sep and cp divide the tokens (cp all-gathers keys and values: its g·d terms over the whole
sequence). Recompute keeps a layer's input (h) and recomputes one layer at a time. The last stage adds the final
norm (3h + 1, fp32) and the logits twice (2v, fp32: the upcast and the loss's log-softmax), the first the token ids. Under bf16/fp16 the linear outputs take 2 bytes and the norms'
fp32 internals 4. Pipelines hold several micro-batches: 1F1B stage s up to pp − s of them (at most the micro-batches
of a step), GPipe all of them. FSDP2 adds the weights it gathers (two blocks and the never-resharded root at stage
3, all of them below) and, under stage 1 with gradient merge or inside a pipeline, the whole fp32 gradients it keeps
between micro-steps.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): see resolution/layout.py.

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .shapes import ModelShape, model_shape

__all__ = ["MemoryEstimate", "estimate_memory"]

NORM_PARTS = ("norms", "qk_norm", "norm")  # fp32 under pure amp (cast_for_amp leaves normalisation layers)


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """Bytes on one rank. `total` = parameters + gradients + optimizer + activations; `stages`: one estimate per
    pipeline stage rank (pp rank order; one element without pp), this one being the largest's; `items`: the
    activations and transient weights by what holds them."""

    parameters: float
    gradients: float
    optimizer: float
    activations: float
    items: dict[str, float] = field(default_factory=dict)
    stages: tuple["MemoryEstimate", ...] = ()

    @property
    def model_states(self) -> float:
        return self.parameters + self.gradients + self.optimizer

    @property
    def total(self) -> float:
        return self.model_states + self.activations

    def as_dict(self) -> dict[str, Any]:
        return {"parameters": self.parameters, "gradients": self.gradients, "optimizer": self.optimizer,
                "activations": self.activations, "total": self.total, "items": dict(self.items)}


def estimate_memory(model: ModelShape | Mapping[str, Any] | str, resolved: Any, *, seq_len: int,
                    micro_batch_size: int) -> MemoryEstimate:
    """The per-rank memory of `model` (a `ModelShape`, a Hugging Face config dict, or a config.json path) trained under
    `resolved` (`strategy.resolve(...)`) on micro-batches of `micro_batch_size` sequences of `seq_len` tokens."""
    shape = model if isinstance(model, ModelShape) else model_shape(model)
    pp = resolved.pp_degree
    stages = tuple(_stage(shape, resolved, r, seq_len, micro_batch_size) for r in range(pp))
    largest = max(stages, key=lambda e: e.total)
    return MemoryEstimate(largest.parameters, largest.gradients, largest.optimizer, largest.activations,
                          dict(largest.items), stages)


def _layers_of(shape: ModelShape, resolved: Any, pp_rank: int) -> tuple[int, bool, bool]:
    """(layers, holds the embedding, holds the head) of pp rank `pp_rank`."""
    if resolved.pp_degree == 1:
        return shape.layers, True, True
    p = resolved.pipeline
    chunks = p.num_stages
    stages = p.stages_of(pp_rank)
    return shape.layers * len(stages) // chunks, 0 in stages, chunks - 1 in stages


def _stage(shape: ModelShape, r: Any, pp_rank: int, seq_len: int, mbs: int) -> MemoryEstimate:
    layers, first, last = _layers_of(shape, r, pp_rank)
    mp, sharding = r.mp_degree, r.sharding_degree
    ep, moe = r.experts.ep_degree, r.experts.moe_sharding_degree
    pure = r.amp.enabled and r.amp.pure
    low = 2
    fused = r.mp.fused_linear_param_grad_add
    sparse_share = shape.sparse_layers / shape.layers if shape.layers else 0.0

    # Local elements by how they are held: dense (16-bit under pure amp), norms (fp32 always), experts.
    dense = norms = experts = 0.0
    for part in shape.parts():
        n = part.numel / (mp if part.mp else 1)
        count: float
        if part.where == "embed":
            count = 1 if first else 0
        elif part.where == "head":
            count = 1 if last else 0
        elif part.name in ("router", "experts"):
            count = layers * sparse_share
        elif part.name in ("mlp_gate_up", "mlp_down"):
            count = layers * (1 - sparse_share)
        else:
            count = layers
        if part.expert:
            experts += n / ep * count
        elif part.name in NORM_PARTS:
            norms += n * count
        else:
            dense += n * count

    params = grads = optim = 0.0

    def held(n: float, split: int, cast: bool) -> None:
        nonlocal params, grads, optim
        if split > 1:  # FSDP2: fp32 shards (the masters themselves under pure amp)
            params, grads, optim = params + 4 * n / split, grads + 4 * n / split, optim + 8 * n / split
        elif cast:
            params, grads, optim = params + low * n, grads + (4 if fused else low) * n, optim + 12 * n
        else:
            params, grads, optim = params + 4 * n, grads + 4 * n, optim + 8 * n

    held(dense, sharding, pure)
    held(norms, sharding, False)
    held(experts, moe if moe > 1 else 1, pure)

    items = _activations(shape, r, layers, first, last, seq_len, mbs, pp_rank)
    compute = low if (pure or r.amp.enabled) else 4
    if sharding > 1:  # FSDP2's gathered weights during the step, in the compute dtype: at stage 3 two blocks (one
        # prefetched) and the root (embedding, final norm and head, never resharded), else all of them
        ends = sum(p.numel / (mp if p.mp else 1) for p in shape.parts()
                   if (p.where == "embed" and first) or (p.where == "head" and last))
        block = (dense + norms - ends) / max(1, layers)
        items["gathered weights (FSDP2)"] = compute * (2 * block + ends if r.sharding.stage == 3 else dense + norms)
        merge = getattr(getattr(r, "gradient_merge", None), "k_steps", 1)
        if (r.sharding.stage == 1 and merge > 1) or r.pp_degree > 1:
            # gradients kept whole in fp32 between micro-steps (stage 1's deferred reduction; a pipeline's micro-
            # batches but the last)
            items["unsharded gradients (FSDP2)"] = 4 * (dense + norms)
    if moe > 1:
        items["gathered experts (FSDP2)"] = compute * (2 * experts / max(1, layers) if r.sharding.stage == 3
                                                       else experts)
    return MemoryEstimate(params, grads, optim, sum(items.values()), items)


def _activations(shape: ModelShape, r: Any, layers: int, first: bool, last: bool, seq_len: int, mbs: int,
                 pp_rank: int) -> dict[str, float]:
    """Bytes saved for backward during one step on this rank (its in-flight micro-batches), by what saves them."""
    mp, sep, cp = r.mp_degree, r.sep_degree, r.cp_degree
    sp = r.mp.sequence_parallel and mp > 1
    tokens = mbs * seq_len / (sep * cp)  # this rank's tokens of a micro-batch
    h, a, g, d = shape.hidden, shape.heads / mp, shape.kv_heads / mp, shape.head_dim
    low = r.amp.enabled
    act, norm_bytes = (2 if low else 4), 4  # RMSNorm computes in fp32 either way
    # Per token of this rank, per layer: the residual side (norms and the stream) and the split side.
    # Under sequence parallelism the norms run on this rank's share of the tokens, but the column layers keep their
    # all-gathered input (unless recompute_allgather) beside the local one: measured, it saves no activations.
    residual = 2 * h * norm_bytes + 2 * h * act + 2 * norm_bytes  # fp32 inside the norms, the stream's dtype outside
    linear_in = 2 * h * act / (mp if (sp and r.mp.recompute_allgather) else 1) + (2 * h * act / mp if sp else 0)
    kv_over = cp  # cp all-gathers keys and values over its group
    attention = (2 * a * d + a) * act + 2 * g * d * act * kv_over
    if shape.sparse_layers:
        sparse_share = shape.sparse_layers / shape.layers
        # a sparse layer: each of a token's top-k copies through dispatch, its expert and back; the router's logits
        mlp = (1 - sparse_share) * 4 * shape.intermediate / mp * act + sparse_share * (
            shape.top_k * (4 * shape.expert_intermediate + 5 * h) * act + 3 * shape.experts * 4)
    else:
        mlp = 4 * shape.intermediate / mp * act
    per_layer = tokens * (residual + linear_in + attention + mlp)
    items: dict[str, float] = {}
    if r.recompute.enabled:
        items["layer inputs (recompute)"] = layers * tokens * h * act / (mp if sp else 1)
        items["one layer recomputed"] = per_layer if layers else 0.0
    else:
        items["layers"] = layers * per_layer
    if first:
        items["token ids"] = tokens * 8 * (2 if last else 1)
    if last:
        # (the logits whole on every mp rank: Hugging Face's plan gathers the LM head's output)
        items["norm, logits and loss"] = tokens * ((3 * h + 1) * norm_bytes + 2 * shape.vocab * 4)
    rope = 2 * d * seq_len / (sep * cp) * act
    items["rotary tables"] = rope if layers else 0.0
    if r.pp_degree > 1:  # the hidden state a stage sends (or received, needing its gradient), and the schedule's
        items["stage boundary"] = tokens * h * act * (3 * (not last) + (not first))  # copies of it (measured)
    in_flight = _in_flight(r, pp_rank)
    if in_flight > 1:
        for k in items:
            if k != "one layer recomputed":  # (one backward at a time recomputes)
                items[k] *= in_flight
    return items


def _in_flight(r: Any, pp_rank: int) -> int:
    """Micro-batches whose activations a pp rank holds at once under the schedule that runs."""
    if r.pp_degree == 1:
        return 1
    p = r.pipeline
    n = p.accumulate_steps
    if p.schedule in ("ScheduleGPipe", "ScheduleLoopedBFS"):
        return n
    if p.virtual_pp_degree > 1:  # interleaved: the warm-up of every local chunk
        return min(n, math.ceil((2 * (r.pp_degree - pp_rank - 1) + (p.virtual_pp_degree - 1)
                                                        * r.pp_degree + 1) / p.virtual_pp_degree))
    return min(n, r.pp_degree - pp_rank)
