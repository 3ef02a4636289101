"""Bytes on one rank for a decoder under a resolved strategy: parameters, gradients and optimizer state as this runtime
holds them after an optimizer step, and the activations saved for backward during a step.

Model states, by what the runtime keeps (measured on it, tests/strategy/planning/test_plan_memory.py):
- Without sharding, fp32: 4 + 4 + 8 bytes a parameter (weights, gradients, AdamW's two moments). Under pure
  bf16/fp16 (amp use_pure_*): 16-bit weights and gradients, fp32 masters and moments, 2 + 2 + 12 (the fp32 master's
  gradient is a temporary of the step); normalisation weights stay fp32 (Paddle's O2), 4 + 4 + 8.
- FSDP2 (sharding_degree N > 1, any stage): fp32 shards of weights, gradients and moments, (4 + 4 + 8) / N, between
  steps at stages 1 and 2 too (ZeRO's formula keeps full gradients at stage 1 and full weights below stage 3: what
  FSDP2 holds only during the step, counted under activations as the gathered weights).
- mp splits q/k/v/gate/up by rows, o/down by columns, the embedding and LM head by vocabulary; norms and the router
  are whole on every mp rank. Experts are split over ep (each rank its block), and over moe_sharding when it is > 1
  (at ep 1 they are weights like any other, sharded by sharding_degree)
  (FSDP2 again); pp keeps each stage's layers (the embedding with the first, the final norm and head with the last;
  a head tied to the embedding is a copy of its weight there, with its own gradient and optimizer state).

Activations: the bytes autograd saves for backward, per token of a rank and per decoder layer, counted with
saved-tensor hooks on Hugging Face's Llama, Qwen2 and Qwen3-MoE (SDPA) as this runtime runs them and matched by these
terms (tests/strategy/planning/test_plan_memory.py; bench/README.md §13 says how it is measured): each RMSNorm its fp32 input, its
scale and the normalised values (4h + 4 + h·stream); the column layers after a norm its output, once where they share
it, once each where each makes its own copy (autocast casts the fp32 output of a norm whose weight stays fp32;
sequence parallelism all-gathers it for every layer); q and k before and after the rotation and the attention's
output (2·a·d + 2·g·d), its log-sum-exp (4a, fp32); the MLP's gate, up, activation and product (4·i; per expert:
top-k copies of 4·i_e + 5h, the router's E). mp divides the head and MLP terms; sequence parallelism the norms too;
sep and cp divide the tokens (cp all-gathers keys and values: its g·d terms over the whole sequence; under either,
o_proj reads a tensor of its own). The rotary tables are kept per row. The last stage adds the final norm, the head's
input and the log-probabilities the loss keeps (4v, fp32, once: log-softmax keeps only its output), the first the
token ids. Linear outputs take 2 bytes under amp, the stream (normalised values, rotary tables) 2 under pure amp
only; without pure amp, autocast's copies of the weights are kept too. Recompute keeps each layer's input (h) and
recomputes one layer at a time after the head's tensors are freed: the peak is the larger of the forward's and one
recomputed layer's. A pipeline's stage boundary costs nothing here: what a stage receives is the input its first
layer keeps. Pipelines hold several micro-batches: 1F1B stage s up to pp − s of them (at most the micro-batches of a
step), GPipe all of them. FSDP2 adds the weights it gathers (two blocks and the never-resharded root at stage 3, all
of them below) and, under stage 1 with gradient merge or inside a pipeline, the whole fp32 gradients it keeps between
micro-steps.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): see resolution/layout.py.

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..resolution.topology import Topology
from .shapes import ModelShape, model_shape

__all__ = ["MemoryEstimate", "estimate_memory"]


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


def _layers_of(shape: ModelShape, resolved: Any, pp_rank: int) -> tuple[set[int], bool, bool]:
    """(the layers, holds the embedding, holds the head) of pp rank `pp_rank`: its stages' equal contiguous ranges
    (parallel.pipeline.split.chunk_blocks)."""
    if resolved.pp_degree == 1:
        return set(range(shape.layers)), True, True
    p = resolved.pipeline
    chunks = p.num_stages
    stages = p.stages_of(pp_rank)
    size = shape.layers // chunks
    return {i for s in stages for i in range(s * size, (s + 1) * size)}, 0 in stages, chunks - 1 in stages


def _stage(shape: ModelShape, r: Any, pp_rank: int, seq_len: int, mbs: int) -> MemoryEstimate:
    held, first, last = _layers_of(shape, r, pp_rank)
    layers = len(held)
    dense, norms, experts = _local_elements(shape, r, held, first, last)
    params, grads, optim = _model_states(r, dense, norms, experts)
    items = _activations(shape, r, layers, first, last, seq_len, mbs, pp_rank)
    items.update(_transient_weights(shape, r, layers, first, last, dense, norms, experts))
    return MemoryEstimate(params, grads, optim, sum(items.values()), items)


def _local_elements(shape: ModelShape, r: Any, held: set[int], first: bool, last: bool) -> tuple[float, float, float]:
    """This rank's elements by how they are held: dense (16-bit under pure amp), norms (fp32 always), experts."""
    mp, ep = r.mp_degree, r.experts.ep_degree
    dense = norms = experts = 0.0
    for part in shape.parts():
        n = part.numel / (mp if part.mp else 1)
        count: float
        if part.where == "embed":  # a tied head is the embedding's weight: the last stage holds a copy of its own
            count = 1 if first or (last and shape.tied) else 0
        elif part.where == "first":
            count = 1 if first else 0
        elif part.where == "head":
            count = 1 if last else 0
        elif part.layers:  # the layers that have it, of those this rank holds
            count = len(held.intersection(part.layers))
        else:  # this rank's share of the layers that have it (the sparse ones, the dense ones, all)
            count = len(held) * part.count / shape.layers
        if part.expert and ep > 1:  # (at ep 1 the experts are weights like any other: sharding shards them)
            experts += n / ep * count
        elif part.norm:  # fp32 under pure amp (cast_for_amp leaves normalisation layers)
            norms += n * count
        else:
            dense += n * count
    return dense, norms, experts


def _model_states(r: Any, dense: float, norms: float, experts: float) -> tuple[float, float, float]:
    """(parameters, gradients, optimizer state) in bytes between steps, for these elements."""
    pure = r.amp.enabled and r.amp.pure
    low = 2
    fused = r.mp.fused_linear_param_grad_add
    moe = r.experts.moe_sharding_degree
    params = grads = optim = 0.0
    for n, split, cast in ((dense, r.sharding_degree, pure), (norms, r.sharding_degree, False),
                           (experts, moe if moe > 1 else 1, pure)):
        if split > 1:  # FSDP2: fp32 shards (the masters themselves under pure amp)
            params, grads, optim = params + 4 * n / split, grads + 4 * n / split, optim + 8 * n / split
        elif cast:
            params, grads, optim = params + low * n, grads + (4 if fused else low) * n, optim + 12 * n
        else:
            params, grads, optim = params + 4 * n, grads + 4 * n, optim + 8 * n
    return params, grads, optim


def _transient_weights(shape: ModelShape, r: Any, layers: int, first: bool, last: bool, dense: float, norms: float,
                       experts: float) -> dict[str, float]:
    """Weights held only during the step, by what holds them: autocast's low-precision copies, FSDP2's gathered
    weights and the whole gradients it keeps between micro-steps."""
    mp, sharding, moe = r.mp_degree, r.sharding_degree, r.experts.moe_sharding_degree
    pure = r.amp.enabled and r.amp.pure
    low = 2
    items: dict[str, float] = {}
    if r.amp.enabled and not pure:  # autocast's low-precision copies of the fp32 weights its matmuls read (the
        # embedding's lookup is not cast), kept for the backward: one per step, cached across its micro-batches
        embedding = sum(p.numel / (mp if p.mp else 1) for p in shape.parts() if p.where == "embed") if first else 0
        items["autocast's weight copies"] = low * (dense - embedding + experts)
    compute = low if pure else 4  # FSDP2 gathers in the low dtype under pure amp only
    if sharding > 1:  # FSDP2's gathered weights during the step, in the compute dtype: at stage 3 two blocks (one
        # prefetched) and the root (embedding, final norm and head, never resharded), else all of them
        ends = sum(p.numel / (mp if p.mp else 1) for p in shape.parts()
                   if (p.where == "embed" and (first or (last and shape.tied))) or (p.where == "first" and first)
                   or (p.where == "head" and last))
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
    return items


def _activations(shape: ModelShape, r: Any, layers: int, first: bool, last: bool, seq_len: int, mbs: int,
                 pp_rank: int) -> dict[str, float]:
    """Bytes saved for backward during one step on this rank (its in-flight micro-batches), by what saves them."""
    mp, sep, cp = r.mp_degree, r.sep_degree, r.cp_degree
    sp = r.mp.sequence_parallel and mp > 1
    tokens = mbs * seq_len / (sep * cp)  # this rank's tokens of a micro-batch
    h, d = shape.hidden, shape.head_dim
    act = 2 if r.amp.enabled else 4  # what the linear layers put out (autocast's dtype under amp)
    stream = 2 if r.amp.enabled and r.amp.pure else 4  # the residual stream's dtype: the weights' under amp
    layer, head_token = _per_token(shape, r, sp, act, stream, seq_len)
    per_layer = tokens * layer
    # The last stage: the final norm, the head's input, and the fp32 log-probabilities the loss keeps (once; the
    # logits whole on every mp rank: Hugging Face's plan gathers the LM head's output).
    head = tokens * head_token if last else 0.0
    items: dict[str, float] = {}
    if first or last:  # the token ids, and the labels the loss keeps
        items["token ids"] = tokens * 8 * (first + last)
    # cos and sin for every row of the micro-batch (the position ids the batch carries)
    items["rotary tables"] = tokens * 2 * d * stream if layers else 0.0
    if r.recompute.enabled:
        # Checkpoint keeps each layer's input; the backward recomputes one layer at a time, after the head's saved
        # tensors are freed: the peak is the larger of the forward's (with the head) and one recomputed layer's.
        items["layer inputs (recompute)"] = layers * tokens * h * act / (mp if sp else 1)
        if head > per_layer:
            items["norm, logits and loss"] = head
        elif layers:
            items["one layer recomputed"] = per_layer
    else:
        items["layers"] = layers * per_layer
        if last:
            items["norm, logits and loss"] = head
    in_flight = _in_flight(r, pp_rank)
    if in_flight > 1:
        for k in items:
            if k != "one layer recomputed":  # (one backward at a time recomputes)
                items[k] *= in_flight
    return items


def _per_token(shape: ModelShape, r: Any, sp: bool, act: int, stream: int, seq_len: int) -> tuple[float, float]:
    """Bytes a token saves for backward in one decoder layer, and in the last stage's norm, head and loss."""
    mp, sep, cp = r.mp_degree, r.sep_degree, r.cp_degree
    h, a, g, d = shape.hidden, shape.heads / mp, shape.kv_heads / mp, shape.head_dim
    # An RMSNorm keeps its input in fp32 (4h), its scale (4) and the normalised values (h, in the stream's dtype); under
    # sequence parallelism it runs on this rank's 1/mp of the tokens.
    norm = (4 * h + 4 + h * stream) / (mp if sp else 1)
    # What the column layers after a norm keep of its output: one copy they share, or one each where each makes its
    # own: autocast casts the fp32 output of a norm for every layer that reads it without pure amp (under pure amp
    # cast_for_amp returns a norm's output in its input's dtype), and sequence parallelism all-gathers it for every
    # layer.
    casts = r.amp.enabled and not r.amp.pure
    each = sp or casts
    gathered = 1 / mp if (sp and r.mp.recompute_allgather) else 1  # re-gathered in the backward, not kept

    def inputs(readers: float) -> float:
        return (readers if each else 1) * h * act * gathered

    # q and k before and after the rotation, by head; attention's output and its log-sum-exp (fp32); cp all-gathers
    # keys and values over its group (its g·d terms over the whole sequence); under sep or cp the output o_proj reads
    # is a tensor of its own (the all-to-all's, the ring's), kept beside attention's. Qwen3's per-head norms keep
    # what a norm keeps, by head.
    attention = 2 * a * d * act + 4 * a + 2 * g * d * act * cp + (a * d * act if sep * cp > 1 else 0)
    if shape.qk_norm:
        attention += (a + g) * (d * (4 + stream) + 4)
    # Eager attention's scores: each of this rank's query tokens against every key (sep: whole sequences of 1/sep of
    # the heads; cp: 1/cp of the queries against the gathered keys), the softmax's fp32 output and, under amp, its
    # cast that the product with v keeps.
    attention += shape.attention_scores * a * seq_len * (4 + (act if act != 4 else 0))
    sparse_share = shape.sparse_layers / shape.layers if shape.layers else 0.0
    # a dense MLP: gate, up, their activation and product; a sparse one: each of a token's top-k copies (dispatched,
    # through its expert's gate, up, activation and product, out, its routing weight; four int64 indices), the
    # router's fp32 probabilities, and one copy of the norm's output (the router's; the experts gather theirs from it)
    dense_mlp = 4 * shape.intermediate / mp * act + inputs(2)
    # (Ranks of the ep group inside this rank's mp group hold the same tokens: each dispatches its share only.)
    copies = shape.top_k / _ep_mp_size(r)
    sparse_mlp = copies * ((2 * h + 4 * shape.expert_intermediate + 1) * act + 32) + 4 * shape.experts + inputs(1)
    if r.experts.ep_degree > 1:  # each copy crosses the ep group twice: the exchange keeps one more, and its indices
        sparse_mlp += copies * (h * act + 32)
    layer = 2 * norm + inputs(3) + attention + (1 - sparse_share) * dense_mlp + sparse_share * sparse_mlp
    return layer, norm + inputs(1) + 4 * shape.vocab


def _ep_mp_size(r: Any) -> int:
    """The fewest ranks an ep group shares with an mp group (the runtime's ep_mp groups, parallel.topology.groups):
    ranks of both hold the same tokens and split them before the dispatch."""
    ep, mp = r.experts.ep_degree, r.mp_degree
    if ep <= 1 or mp <= 1:
        return 1
    if not getattr(r.experts, "order", ()):  # the plan's layouts: the default orders, ep and mp both innermost
        return math.gcd(ep, mp)  # (adjacent blocks of ranks: the smallest overlap of two such groups)
    mp_of = {rank: set(g) for g in r.topology.groups("mp") for rank in g}
    return min(len(set(g) & mp_of[rank]) for g in Topology(r.experts.order, r.experts.dims).groups("ep") for rank in g)


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
