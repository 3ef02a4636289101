"""`strategy.plan`: every strategy a model's shapes and a cluster allow, pruned by the memory model, ranked by a cost
model; each a strategy file `strategy validate` accepts.

The search: every dp × mp × pp × sharding × sep × cp (× ep for MoE models) that fills the GPUs, mp within a node and
dividing the query and key/value heads, sep dividing the heads left on an mp rank, pp the layers, ep the experts, cp
and sep the sequence (sep and cp not together; pp without sep, cp and ep: what the runtime composes); sharding stage
1–3 (stage 1 and 2 hold the same between steps here, so only 1 and 3 are kept), recompute on or off, every
micro-batch size that divides a data rank's share of the global batch (the rest accumulated: pipeline micro-batches,
or gradient merge), 1F1B when there are at least pp micro-batches (else GPipe). Pure bf16 with fp32 masters. Of the
layouts cut, those a user can make fit and that would beat the fastest kept are listed: over memory by at most a
quarter (`NEAR_MEMORY`), or a global batch the data ranks do not divide (estimated at the nearest one they do).

The cost model (every constant a parameter; the defaults an H100 SXM node's):
- compute: 6 × active parameters × tokens (× 4/3 with recompute: one more forward), over GPUs × `peak_flops`
  (989 TFLOP/s dense bf16, NVIDIA's H100 SXM datasheet) × `utilisation` (0.4, a well-tuned large run's MFU);
- communication, not overlapped (an upper bound), each collective by ring cost ((n − 1)/n of the bytes per rank, twice
  for an all-reduce) over `intra_node_bandwidth` (450 GB/s: NVLink 4's 900 GB/s both ways) when the group stays in a
  node, else `inter_node_bandwidth` (50 GB/s: one 400 Gb/s NDR InfiniBand port per GPU): mp an all-reduce of the
  activations per row-parallel linear forward and per column-parallel linear backward, as the Hugging Face plans
  split a layer (seven a dense layer, four a sparse one; the recomputed forward's again), and the embedding's and the
  head's; dp an all-reduce of the bf16 gradients; sharding a reduce-scatter of the gradients and an all-gather of the
  weights (twice at stage 3: forward and backward; under pp once a step, the pipeline defers them); pp a send and a
  receive of the hidden state per micro-batch and stage boundary each way; sep four all-to-alls a layer each way; cp an
  all-gather of keys and values a layer forward and a reduce-scatter backward; ep two all-to-alls of the routed
  tokens a sparse layer each way;
- the calls themselves: `layer_seconds` (100 µs) for each decoder layer's forward and backward in each micro-batch,
  whatever its size (launches and dispatch: smaller micro-batches cost more calls for the same work);
- the optimizer's update: the model states a rank holds, read and written, over `memory_bandwidth` (2 TB/s);
- the collectives' own cost: `collective_seconds` (20 µs, NCCL's latency for a small message) for each collective a
  step issues, whatever its size (the bytes are the communication's): mp's, sep's, cp's and ep's are issued per layer
  and micro-batch, sharding's per layer and micro-batch, pp's per micro-batch, dp's per gradient bucket once a step,
  so smaller micro-batches cost more of them for the same bytes (what the Qwen3-MoE trials on CPU showed: the more
  collectives a layout issues per micro-batch, the more its step grows as micro-batches shrink);
- the pipeline bubble: (pp − 1) / micro-batches more time, as 1F1B and GPipe have;
- a step's fixed cost `step_seconds` (1 ms).

Each term is kept apart (`Candidate.terms`): `strategy tune` measures trials on the machine and fits a coefficient per
term (`planning.calibration`), and `plan(calibration=...)` ranks with them.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): see resolution/layout.py.

import itertools
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Protocol

from ..resolution.settings import DpBucketSettings, PipelineSettings
from .estimate import MemoryEstimate, estimate_memory
from .shapes import ModelShape, model_shape

__all__ = ["Candidate", "CostModel", "Plan", "TERMS", "plan", "step_terms"]

GIB = 1024 ** 3
NEAR_MEMORY = 1.25  # a layout cut for memory is worth showing when it needs at most this times the usable memory
CUT_SHOWN = 5  # the most cut layouts a plan lists


@dataclass(frozen=True, slots=True)
class CostModel:
    """The cost model's constants; the defaults are an H100 SXM node's (see the module docstring for sources)."""

    peak_flops: float = 989e12
    utilisation: float = 0.4
    intra_node_bandwidth: float = 450e9
    inter_node_bandwidth: float = 50e9
    memory_bandwidth: float = 2.0e12  # what an optimizer update streams: 60% of the H100's 3.35 TB/s HBM3
    layer_seconds: float = 1e-4  # a decoder layer's forward and backward call, whatever its size (kernel launches)
    step_seconds: float = 1e-3  # a step's fixed cost (data, the optimizer's per-tensor calls)
    collective_seconds: float = 2e-5  # a collective's fixed cost, whatever its size (latency: NCCL's small messages)


class Calibrated(Protocol):
    """What `plan` reads of a calibration (`planning.calibration.Calibration`): its cost constants, and the step time
    it predicts from a layout's terms."""

    @property
    def cost(self) -> "CostModel": ...

    def predict(self, terms: Mapping[str, float]) -> float: ...


@dataclass(frozen=True, slots=True)
class Candidate:
    """One strategy the search kept: its settings, the memory a rank holds, the predicted step time, and the file."""

    degrees: dict[str, int]
    stage: int
    recompute: bool
    micro_batch_size: int
    accumulate_steps: int
    schedule: str
    memory: MemoryEstimate
    step_seconds: float
    tokens_per_second_per_gpu: float
    text: str
    terms: dict[str, float] = field(default_factory=dict)  # step_seconds by term, before calibration (`step_terms`)

    def as_dict(self) -> dict[str, Any]:
        return {"degrees": self.degrees, "sharding_stage": self.stage, "recompute": self.recompute,
                "micro_batch_size": self.micro_batch_size, "accumulate_steps": self.accumulate_steps,
                "schedule": self.schedule, "memory": self.memory.as_dict(), "step_seconds": self.step_seconds,
                "tokens_per_second_per_gpu": self.tokens_per_second_per_gpu, "terms": self.terms, "strategy": self.text}


@dataclass(frozen=True, slots=True)
class Plan:
    """The best `candidates` (fastest first); `cut`: the layouts faster than those (at most `CUT_SHOWN`, fastest first)
    that a user can make fit (over memory by at most `NEAR_MEMORY` times the usable memory, or fitting at the nearest
    global batch the data ranks divide), then every reason the model's shapes or the runtime left layouts out, with
    their count; and a `message` on the whole."""

    candidates: list[Candidate]
    cut: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""
    searched: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"candidates": [c.as_dict() for c in self.candidates], "cut": self.cut, "message": self.message,
                "searched": self.searched}


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _nearest_multiple(n: int, k: int) -> int:
    """The multiple of `k` nearest `n` (the larger on a tie; never 0)."""
    below = n // k * k
    return below if below and n - below < below + k - n else below + k


def _faster(near: dict[tuple[int, ...], dict[str, Any]], degrees: dict[str, int], tokens: float) -> bool:
    """Whether `tokens` a second per GPU beats the cut layout kept for `degrees` (one line a layout), or none is."""
    kept = near.get(tuple(degrees.values()))
    return kept is None or tokens > kept["tokens_per_second_per_gpu"]


def plan(model: ModelShape | Mapping[str, Any] | str, *, gpus: int, gpu_memory: float, seq_len: int,
         global_batch: int, gpus_per_node: int = 8, top: int = 5, headroom: float = 0.1,
         cost: CostModel = CostModel(), progress: Callable[[int], None] | None = None,
         calibration: "Calibrated | None" = None) -> Plan:
    """The strategies for `model` (a Hugging Face config dict or config.json path) on `gpus` GPUs of `gpu_memory`
    bytes (less `headroom`), `global_batch` sequences of `seq_len` tokens a step; the `top` fastest, and the faster
    layouts that were cut for something a user can change (see `Plan`). With a `calibration` (`strategy tune`'s fit
    on this machine), its cost constants replace `cost` and its coefficients weigh each term of the step time.

    Raises:
        ValueError: numbers that cannot describe a cluster or a batch.
    """
    shape = model if isinstance(model, ModelShape) else model_shape(model)
    if calibration is not None:
        cost = calibration.cost
    _check_arguments(gpus=gpus, gpu_memory=gpu_memory, seq_len=seq_len, global_batch=global_batch,
                     gpus_per_node=gpus_per_node, top=top, headroom=headroom, cost=cost)
    search = _Search(top=top, budget=gpu_memory * (1 - headroom), global_batch=global_batch, progress=progress)
    for degrees, why in _layouts(shape, gpus, gpus_per_node, seq_len):
        data = degrees["dp"] * degrees["sharding"]
        batch = global_batch
        if not why and global_batch % data:
            why = f"the global batch {global_batch} does not divide over the data ranks"
            batch = _nearest_multiple(global_batch, data)  # estimated there: a cut the user can act on
        if why:
            search.reasons[why] = search.reasons.get(why, 0) + 1
            if batch == global_batch:
                continue
        rows = batch // data
        stages = (1, 3) if degrees["sharding"] > 1 else (1,)
        for stage, recompute, mbs in itertools.product(stages, (False, True), _divisors(rows)):
            if mbs > 64:
                continue
            steps = rows // mbs
            layout = _layout(degrees, stage, recompute, mbs, steps)
            memory = estimate_memory(shape, layout, seq_len=seq_len, micro_batch_size=mbs)
            terms = step_terms(shape, degrees, layout, memory, seq_len, batch, gpus, gpus_per_node, cost, steps)
            seconds = calibration.predict(terms) if calibration is not None else sum(terms.values())
            search.weigh(degrees, stage, recompute, mbs, steps, layout.pipeline.schedule, batch, memory, seconds,
                         tokens=batch * seq_len / seconds / gpus, terms=terms)
    kept = [_with_text(c, seq_len, gpus) for c in sorted(search.kept, key=lambda c: c.step_seconds)[:top]]
    fastest = kept[0].tokens_per_second_per_gpu if kept else 0.0
    best_cut = sorted((c for c in search.near.values() if c["tokens_per_second_per_gpu"] > fastest),
                      key=lambda c: -c["tokens_per_second_per_gpu"])[:CUT_SHOWN]
    shaped = [{"why": why, "layouts": n} for why, n in sorted(search.reasons.items(), key=lambda x: -x[1])]
    message = _message(shape, kept, search.least, search.budget, gpus, shaped, search.searched)
    return Plan(kept, best_cut + shaped, message, search.searched)


def _check_arguments(*, gpus: int, gpu_memory: float, seq_len: int, global_batch: int, gpus_per_node: int, top: int,
                     headroom: float, cost: CostModel) -> None:
    """A ValueError for numbers that cannot describe a cluster or a batch."""
    for name, value in (("gpus", gpus), ("seq_len", seq_len), ("global_batch", global_batch),
                        ("gpus_per_node", gpus_per_node), ("top", top)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive whole number, got {value!r}")
    if not gpu_memory > 0 or not 0 <= headroom < 1:
        raise ValueError("gpu_memory must be positive and headroom in [0, 1)")
    for name in ("peak_flops", "utilisation", "intra_node_bandwidth", "inter_node_bandwidth", "memory_bandwidth"):
        if not getattr(cost, name) > 0:
            raise ValueError(f"the cost model's {name} must be positive, got {getattr(cost, name)!r}")
    for name in ("layer_seconds", "step_seconds"):
        if not getattr(cost, name) >= 0:
            raise ValueError(f"the cost model's {name} must be >= 0, got {getattr(cost, name)!r}")


class _Search:
    """What the search keeps as it weighs each layout: the fastest that fit, the fastest cut a user can act on (by
    degrees), why layouts were left out (with their count), the least memory seen, and how many were weighed."""

    def __init__(self, *, top: int, budget: float, global_batch: int, progress: Callable[[int], None] | None) -> None:
        self.top, self.budget, self.global_batch, self.progress = top, budget, global_batch, progress
        self.kept: list[Candidate] = []
        self.near: dict[tuple[int, ...], dict[str, Any]] = {}  # by degrees: the fastest cut a user can act on
        self.reasons: dict[str, int] = {}
        self.least: tuple[float, MemoryEstimate | None] = (math.inf, None)
        self.searched = 0

    def weigh(self, degrees: dict[str, int], stage: int, recompute: bool, mbs: int, steps: int, schedule: str,
              batch: int, memory: MemoryEstimate, seconds: float, *, tokens: float, terms: dict[str, float]) -> None:
        """One layout at one stage, recompute and micro-batch size: kept when it fits at the global batch asked
        for; else remembered as a cut when a user can make it fit (and it beats the one kept for its degrees)."""
        budget, global_batch = self.budget, self.global_batch
        if batch != global_batch:  # at a global batch its data ranks divide: listed when it fits
            reason = "" if memory.total > budget else (f"the global batch {global_batch} does not divide over "
                                                       f"its {degrees['dp'] * degrees['sharding']} data ranks; "
                                                       f"predicted at {batch}")
        else:
            self.searched += 1
            if self.progress is not None and self.searched % 20000 == 0:
                self.progress(self.searched)
            if memory.total < self.least[0]:
                self.least = (memory.total, memory)
            if memory.total <= budget:
                self.kept.append(Candidate(degrees, stage, recompute, mbs, steps, schedule, memory, seconds, tokens, "",
                                           terms))
                if len(self.kept) > 4 * self.top:
                    self.kept = sorted(self.kept, key=lambda c: c.step_seconds)[:self.top]
                return
            reason = "" if memory.total > NEAR_MEMORY * budget else (
                f"over memory by {(memory.total - budget) / GIB:.1f} GiB ({memory.total / GIB:.1f} GiB a rank, "
                f"{budget / GIB:.1f} GiB usable)")
        if reason and _faster(self.near, degrees, tokens):
            self.near[tuple(degrees.values())] = {
                "degrees": degrees, "sharding_stage": stage, "recompute": recompute, "micro_batch_size": mbs,
                "global_batch": batch, "memory": memory.as_dict(), "step_seconds": seconds,
                "tokens_per_second_per_gpu": tokens, "why": reason}


def _layouts(shape: ModelShape, gpus: int, per_node: int, seq_len: int):
    """Every assignment of the axes' degrees filling `gpus`, with why it is left out ("" when it is not)."""
    experts = shape.experts
    for mp in _divisors(gpus):
        heads_ok = shape.heads % mp == 0 and shape.kv_heads % mp == 0
        for pp in _divisors(gpus // mp):
            for sep_cp in _divisors(gpus // mp // pp):
                for kind in ("sep", "cp") if sep_cp > 1 else ("",):
                    rest = gpus // mp // pp // sep_cp
                    for sharding in _divisors(rest):
                        dp = rest // sharding
                        eps = [e for e in _divisors(dp * sharding * mp) if experts and experts % e == 0] or [1]
                        for ep in eps:
                            degrees = {"dp": dp, "mp": mp, "pp": pp, "sharding": sharding,
                                       "sep": sep_cp if kind == "sep" else 1, "cp": sep_cp if kind == "cp" else 1,
                                       "ep": ep}
                            yield degrees, _why_not(shape, degrees, per_node, seq_len, heads_ok)


def _why_not(shape: ModelShape, d: dict[str, int], per_node: int, seq_len: int, heads_ok: bool) -> str:
    if d["mp"] > 1 and not heads_ok:
        return (f"mp does not divide the heads ({shape.heads} query, {shape.kv_heads} key/value): each rank needs "
                "whole heads")
    if d["mp"] > 1 and (shape.vocab % d["mp"] or (shape.dense_layers and shape.intermediate % d["mp"])):
        return f"mp does not divide the vocabulary ({shape.vocab}) or the MLP width ({shape.intermediate})"
    if d["mp"] > per_node or per_node % d["mp"]:
        return f"mp across nodes (mp > {per_node} GPUs a node)"
    if shape.layers % d["pp"]:
        return f"pp does not divide the {shape.layers} layers"
    if d["sep"] > 1 and (shape.heads // d["mp"]) % d["sep"]:
        return "sep does not divide the heads left on an mp rank"
    if d["sep"] > 1 and seq_len % d["sep"] or d["cp"] > 1 and seq_len % (2 * d["cp"]):
        return "sep (cp) does not divide the sequence (cp: into 2 × cp chunks)"
    if d["pp"] > 1 and (d["sep"] > 1 or d["cp"] > 1 or d["ep"] > 1):
        return "pp with sep, cp or ep (the runtime does not compose them)"
    if d["ep"] > 1 and (d["sep"] > 1 or d["cp"] > 1):
        return "ep with sep or cp (refused by the strategy)"
    if d["pp"] > 1 and shape.router_loss:
        return ("pp with the router's load-balancing loss (config.output_router_logits): the stages do not pass the "
                "router logits on (refused by the runtime)")
    return ""


def _layout(d: dict[str, int], stage: int, recompute: bool, mbs: int, steps: int) -> Any:
    """What estimate_memory reads of a resolved strategy, made directly (resolving every candidate would not fit the
    time budget; the kept ones are resolved for real when written)."""
    pp = d["pp"]
    schedule = "Schedule1F1B" if steps >= pp else "ScheduleGPipe"
    return SimpleNamespace(
        pp_degree=pp, mp_degree=d["mp"], sharding_degree=d["sharding"], sep_degree=d["sep"], cp_degree=d["cp"],
        experts=SimpleNamespace(ep_degree=d["ep"], moe_sharding_degree=1),
        amp=SimpleNamespace(enabled=True, pure=True), sharding=SimpleNamespace(stage=stage),
        mp=SimpleNamespace(fused_linear_param_grad_add=False, sequence_parallel=False, recompute_allgather=False),
        recompute=SimpleNamespace(enabled=recompute),
        gradient_merge=SimpleNamespace(k_steps=1 if pp > 1 else steps),
        pipeline=PipelineSettings(pp_degree=pp, micro_batch_size=mbs, accumulate_steps=steps, schedule=schedule))


def _spans_nodes(d: dict[str, int], axis: str, per_node: int) -> bool:
    """Whether `axis`'s group leaves a node, in the default order (dp, pp, sharding, sep, cp, mp; mp innermost)."""
    order = ("dp", "pp", "sharding", "sep", "cp", "mp")
    inner = math.prod(d[a] for a in order[order.index(axis) + 1:])
    return inner * d[axis] > per_node


TERMS = ("compute", "mp", "dp", "sharding", "pp", "sep", "cp", "ep", "layers", "collectives", "optimizer", "bubble",
         "step")


def step_terms(shape: ModelShape, d: dict[str, int], layout: Any, memory: MemoryEstimate, seq_len: int,
               global_batch: int, gpus: int, per_node: int, cost: CostModel, steps: int) -> dict[str, float]:
    """A step's seconds on one rank, by term (`TERMS`; their sum is the prediction before calibration): the compute,
    each axis's communication (not overlapped: a calibration's coefficient below 1 is the share hidden), the calls'
    own cost (`layer_seconds` a decoder layer and micro-batch: why larger micro-batches are faster on one GPU too),
    the collectives' own cost (`collective_seconds` each, whatever its size: `_collectives`),
    the optimizer's update (the model states streamed twice over `memory_bandwidth`), the pipeline bubble, and a
    step's fixed cost."""
    tokens = global_batch * seq_len
    recompute = 4 / 3 if layout.recompute.enabled else 1  # one more forward
    flops = 6 * shape.active_parameters * tokens * recompute
    compute = flops / (gpus * cost.peak_flops * cost.utilisation)

    def bw(axis: str) -> float:
        return cost.inter_node_bandwidth if _spans_nodes(d, axis, per_node) else cost.intra_node_bandwidth

    h, low = shape.hidden, 2
    mbs = layout.pipeline.micro_batch_size
    local_tokens = mbs * seq_len / (d["sep"] * d["cp"])  # a micro-batch's tokens on one rank
    layers = shape.layers / d["pp"]
    micro = steps  # micro-batches a step
    comm = dict.fromkeys(("mp", "dp", "sharding", "pp", "sep", "cp", "ep"), 0.0)
    if d["mp"] > 1:
        per = 2 * (d["mp"] - 1) / d["mp"] * local_tokens * h * low
        comm["mp"] = _mp_all_reduces(shape, d["pp"], layout.recompute.enabled) * micro * per / bw("mp")
    # a rank's weights: the dense ones split by mp and pp, its block of experts (reduced over the ranks holding it)
    params = (shape.parameters - shape.expert_parameters) / (d["mp"] * d["pp"]) + shape.expert_parameters / (
        d["ep"] * d["pp"])
    if d["dp"] > 1:
        comm["dp"] = 2 * (d["dp"] - 1) / d["dp"] * params / d["sharding"] * low / bw("dp")
    if d["sharding"] > 1:  # every micro-step gathers the weights (twice at stage 3); gradients reduce in fp32, at
        n = d["sharding"]  # stages 2-3 every micro-step, at stage 1 once a step (`_sharding_rounds`)
        gathers, reduces = _sharding_rounds(layout.sharding.stage, micro, d["pp"])
        comm["sharding"] = (gathers * low + reduces * 4) * (n - 1) / n * params / bw("sharding")
    if d["pp"] > 1:
        comm["pp"] = 2 * 2 * micro * local_tokens * h * low / bw("pp")
    if d["sep"] > 1:
        comm["sep"] = 8 * layers * micro * (d["sep"] - 1) / d["sep"] * local_tokens * h * low / bw("sep")
    if d["cp"] > 1:
        kv = 2 * shape.kv_heads / d["mp"] * shape.head_dim * mbs * seq_len * low
        comm["cp"] = 2 * layers * micro * (d["cp"] - 1) / d["cp"] * kv / bw("cp")
    if d["ep"] > 1 and shape.sparse_layers:
        routed = shape.top_k * local_tokens * h * low
        comm["ep"] = 4 * shape.sparse_layers / d["pp"] * micro * (d["ep"] - 1) / d["ep"] * routed / (
            cost.inter_node_bandwidth if d["ep"] > per_node else cost.intra_node_bandwidth)  # ep: the innermost
    calls = micro * (layers + 1) * recompute * cost.layer_seconds  # (+1: the embedding, head and loss)
    collectives = _collectives(shape, d, layout, micro, params * low / d["sharding"]) * cost.collective_seconds
    update = 2 * memory.model_states / cost.memory_bandwidth
    bubble = (d["pp"] - 1) / micro * (compute + sum(comm.values()) + calls + collectives) if d["pp"] > 1 else 0.0
    return {"compute": compute, **comm, "layers": calls, "collectives": collectives, "optimizer": update,
            "bubble": bubble, "step": cost.step_seconds}


def _sharding_rounds(stage: int, micro: int, pp: int) -> tuple[int, int]:
    """How many times a step gathers a sharded decoder layer's weights and reduces its gradients (FSDP2): a gather
    every micro-step (two at stage 3: forward and backward), a reduce every micro-step from stage 2 (once a step at
    stage 1, the merge deferred); under pp the pipeline defers both to the step's last backward, but for the
    backward's gathers of stage 3."""
    if pp > 1:
        return 1 + (micro if stage == 3 else 0), 1
    return micro * (2 if stage == 3 else 1), micro if stage >= 2 else 1


def _mp_all_reduces(shape: ModelShape, pp: int, recomputed: bool) -> float:
    """The activation all-reduces of mp a micro-batch on one pipeline stage, as the Hugging Face plans split a layer:
    forward one per row-parallel linear (the attention's output; a dense MLP's down), backward one per
    column-parallel linear (q, k and v; a dense MLP's gate and up; experts are split over ep, never by mp), the
    recomputed forward's again with recompute; and the vocabulary-split embedding's and the head's (3)."""
    forward = (2 * shape.dense_layers + shape.sparse_layers) / pp
    backward = (5 * shape.dense_layers + 3 * shape.sparse_layers) / pp
    return forward * (2 if recomputed else 1) + backward + 3


def _collectives(shape: ModelShape, d: dict[str, int], layout: Any, micro: int, gradient_bytes: float) -> float:
    """How many collectives a rank issues a step, as the runtime issues them. Per micro-batch: mp's all-reduces
    (`_mp_all_reduces`); sep four all-to-alls a layer each way; cp an all-gather of keys and values a layer and its
    reduce-scatter back; ep four all-to-alls a sparse layer forward (counts, expert ids, tokens, the combine) and two
    back; pp a send and a receive each way. A recomputed forward issues its forward ones again. Sharding (FSDP2, a unit
    per decoder layer and one for the rest) gathers each unit every micro-step, the layers twice at stage 3 (forward
    and backward), and reduces per micro-step from stage 2 (once a step at stage 1); under pp the pipeline defers both
    to the step's last backward. dp all-reduces once a step: per gradient bucket (fuse_grad_size_in_MB's, the first
    smaller), in one coalesced call under pp, per FSDP unit and reduction beside sharding."""
    pp, recomputed = d["pp"], layout.recompute.enabled
    layers, sparse = shape.layers / pp, shape.sparse_layers / pp
    again = 2 if recomputed else 1  # (the forward's collectives, run twice with recompute)
    n = 0.0
    if d["mp"] > 1:
        n += _mp_all_reduces(shape, pp, recomputed) * micro
    if d["sep"] > 1:
        n += (4 * again + 4) * layers * micro
    if d["cp"] > 1:
        n += (again + 1) * layers * micro
    if d["ep"] > 1 and sparse:
        n += (4 * again + 2) * sparse * micro
    if pp > 1:
        n += 4 * micro
    reduces = 0.0
    if d["sharding"] > 1:  # (the rest's unit is gathered as at stage 1: never resharded after its forward)
        gathers, per_unit = _sharding_rounds(layout.sharding.stage, micro, pp)
        reduces = (layers + 1) * per_unit
        n += layers * gathers + _sharding_rounds(1, micro, pp)[0] + reduces
    if d["dp"] > 1:
        if d["sharding"] > 1:
            n += reduces
        elif pp > 1:
            n += 1
        else:
            bucket, first = DpBucketSettings()
            n += 1 + math.ceil(max(0.0, gradient_bytes - first) / bucket)
    return n


def _with_text(c: Candidate, seq_len: int, gpus: int) -> Candidate:
    return Candidate(c.degrees, c.stage, c.recompute, c.micro_batch_size, c.accumulate_steps, c.schedule, c.memory,
                     c.step_seconds, c.tokens_per_second_per_gpu, strategy_text(c, seq_len, gpus), c.terms)


def strategy_text(c: Candidate, seq_len: int, gpus: int) -> str:
    """The candidate as a strategy file, its predictions in comments at the top."""
    d = c.degrees
    m = c.memory
    head = [f"# strategy plan: {gpus} GPUs, {seq_len} tokens a sequence; predicted {c.step_seconds:.3f} s a step, "
            f"{c.tokens_per_second_per_gpu:,.0f} tokens/s per GPU",
            f"# memory a rank (the largest pipeline stage): {m.total / GIB:.2f} GiB = parameters "
            f"{m.parameters / GIB:.2f} + gradients {m.gradients / GIB:.2f} + optimizer {m.optimizer / GIB:.2f} + "
            f"activations {m.activations / GIB:.2f} GiB",
            f"# micro-batches of {c.micro_batch_size} sequence{'s' if c.micro_batch_size != 1 else ''}, "
            f"{c.accumulate_steps} a step on each data rank"]
    hybrid = [f"  dp_degree: {d['dp']}", f"  mp_degree: {d['mp']}", f"  pp_degree: {d['pp']}",
              f"  sharding_degree: {d['sharding']}", f"  sep_degree: {d['sep']}", f"  cp_degree: {d['cp']}"]
    if d["ep"] > 1:
        hybrid.append(f"  ep_degree: {d['ep']}")
    if d["sharding"] > 1:
        hybrid.append(f"  sharding_configs {{\n    stage: {c.stage}\n  }}")
    lines = head + ["hybrid_configs {", *hybrid, "}", "amp: true", "amp_configs {", "  use_pure_bf16: true",
                    '  dtype: "bfloat16"', "}"]
    if c.recompute:
        lines.append("recompute: true")
    if d["pp"] > 1:
        mode = "1F1B" if c.schedule == "Schedule1F1B" else "FThenB"
        lines += ["pipeline_configs {", f"  micro_batch_size: {c.micro_batch_size}",
                  f"  accumulate_steps: {c.accumulate_steps}", f'  schedule_mode: "{mode}"', "}"]
    elif c.accumulate_steps > 1:
        lines += ["gradient_merge: true", "gradient_merge_configs {", f"  k_steps: {c.accumulate_steps}", "}"]
    return "\n".join(lines) + "\n"


def _message(shape: ModelShape, kept: list[Candidate], least: tuple[float, Any], budget: float, gpus: int,
             shaped: list[dict[str, Any]], searched: int) -> str:
    if kept:
        counted = (f" ({shape.model_type}'s weights counted from the model itself, its activations by the Llama "
                   "family's terms at its widths)" if shape.counted else "")
        return f"{len(kept)} of {searched} strategies shown, fastest first{counted}"
    if not searched:
        why = "; ".join(f"{r['why']} ({r['layouts']} layout{'s' if r['layouts'] != 1 else ''})" for r in shaped[:3])
        why = why or "none"
        return (f"no set of degrees fills {gpus} GPUs for this model: {why}; try another number of GPUs or global "
                "batch")
    states = 16 * shape.parameters / gpus
    return (f"no strategy fits in {budget / GIB:.1f} GiB a rank: the least any needs is {least[0] / GIB:.1f} GiB "
            f"(the model states alone, 16 bytes a parameter over {gpus} ranks, are {states / GIB:.1f} GiB = "
            f"{states / 1e9:.0f} GB); use more GPUs or GPUs with more memory")


def print_progress(n: int) -> None:
    print(f"\rstrategy plan: {n:,} strategies estimated", end="", file=sys.stderr, flush=True)
