"""Rank-side cases of the memory model: what a rank holds after parallelize and one optimizer step (parameters,
gradients, optimizer state, counted from the tensors) and the activations it saves for backward (the peak of the
live saved tensors, through saved-tensor hooks), next to `strategy.estimate_memory` for the same run."""

from __future__ import annotations

import weakref

import torch
from torch.autograd.graph import saved_tensors_hooks

import parallel
import strategy
from parallel.topology.dtensors import local
from rank_helpers import init

SEQ, ROWS = 32, 2


def config(kind: str) -> dict:
    """A small config of `kind`: llama, qwen2, qwen2_tied (its LM head tied to the embedding) or qwen3_moe, or any
    other model_type at the zoo's tiny config (tests/zoo/tiny_models.py; counted by the runtime)."""
    import transformers

    if kind not in ("llama", "qwen2", "qwen2_tied", "qwen3_moe"):
        from tiny_models import tiny_config

        return tiny_config(kind).to_dict()

    tied = kind.endswith("_tied")
    kind = kind.removesuffix("_tied")
    common = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=SEQ, tie_word_embeddings=tied)
    if kind == "qwen3_moe":
        return transformers.Qwen3MoeConfig(num_experts=4, moe_intermediate_size=32, intermediate_size=96,
                                           num_experts_per_tok=2, head_dim=16, **common).to_dict()
    cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config}[kind]
    return cls(intermediate_size=96, **common).to_dict()


def _model(kind: str):
    import transformers

    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**config(kind)))


class _Meter:
    """The bytes of the tensors autograd holds for backward, live at once: each storage counted once while any saved
    tensor of it is alive, parameters left out. What it packs it holds detached: keeping the tensor itself (with its
    grad_fn) would make a reference cycle through the graph, keeping graphs alive that autograd had freed (torch's
    saved-tensor hooks docs warn of it: a pipeline's shape-inference step stayed alive for the whole run)."""

    def __init__(self, model) -> None:
        self.model = model
        self.count: dict[int, int] = {}
        self.live = self.peak = 0

    def pack(self, t: torch.Tensor):
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
    def unpack(x):
        return x.t if isinstance(x, _Holder) else x


class _Holder:
    __slots__ = ("t", "__weakref__")

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t


def _bytes(tensors) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        if t is not None:
            s = local(t).untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


class _Recomputed:
    """Recompute's peak as a rank holds it. A checkpointed block's inputs reach the outer meter (checkpoint saves them
    with save_for_backward); its own saved tensors live inside torch.utils.checkpoint, out of the outer hooks' reach.
    When the backward recomputes a block, the rank holds what the outer meter holds then (every block input not yet
    consumed, the embeddings'; the logits and loss are freed by then) plus that block's saved tensors, counted here by
    running one block's forward once more under a meter of its own."""

    def __init__(self, meter: _Meter) -> None:
        self.meter, self.layer, self.peak = meter, 0, 0

    def __call__(self, fn, *args, **kwargs):
        from torch.utils.checkpoint import checkpoint

        if not self.layer:
            one = _Meter(self.meter.model)
            with saved_tensors_hooks(one.pack, one.unpack):
                held = fn(*args, **kwargs)
            self.layer = one.peak
            del held
        calls = 0

        def counted(*a, **k):
            nonlocal calls
            calls += 1
            if calls > 1:  # the recomputation, in the backward
                self.peak = max(self.peak, self.meter.live + self.layer)
            return fn(*a, **k)

        return checkpoint(counted, *args, **kwargs)


def measure(kind: str, text: str, *, norm_cast: bool = True) -> dict:
    """One step of a small `kind` model under `text`; the measured and estimated bytes of this rank. `norm_cast` False
    leaves out cast_for_amp's cast of a norm's output to its input's dtype (bench/plan.py's comparison)."""
    import parallel.training.amp as amp
    import parallel.training.recompute as recompute

    if not norm_cast:
        amp._output_as_input, kept = (lambda module, args, output: output), amp._output_as_input

    hcg = init(strategy.loads(text))
    model = parallel.parallelize(_model(kind))
    whole = model.module if hcg.pp_size > 1 else model
    parallel.cast_for_amp(whole)
    if not norm_cast:
        amp._output_as_input = kept
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3))
    rows = hcg.resolved.pipeline.micro_batch_size * hcg.resolved.pipeline.accumulate_steps if hcg.pp_size > 1 else ROWS
    g = torch.Generator().manual_seed(hcg.data_rank)
    ids = torch.randint(0, 128, (rows, SEQ), generator=g)
    meter = _Meter(whole)
    blocks = _Recomputed(meter)
    recompute.checkpoint, plain = blocks, recompute.checkpoint  # type: ignore[assignment]
    with saved_tensors_hooks(meter.pack, meter.unpack):
        if hcg.pp_size > 1:
            model.train_batch((ids, ids), opt)
        else:
            with parallel.autocast(hcg=hcg):
                loss = model(**parallel.split_sequence({"input_ids": ids, "labels": ids}, hcg=hcg)).loss
            loss.backward()
            opt.step()
    recompute.checkpoint = plain
    params = list(whole.parameters())
    measured = {
        "parameters": _bytes(params),
        # the masters' too: under pure amp the fp32 copy of a gradient must not outlive the update
        "gradients": _bytes([getattr(p, "main_grad", None) for p in params] + [p.grad for p in params]
                            + [m.grad for m in getattr(opt, "_master", {}).values()]),
        "optimizer": _bytes([v for s in opt.optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
                            + list(getattr(opt, "_master", {}).values())),
        "activations": max(meter.peak, blocks.peak),
    }
    estimate = strategy.estimate_memory(config(kind), hcg.resolved, seq_len=SEQ,
                                        micro_batch_size=hcg.resolved.pipeline.micro_batch_size if hcg.pp_size > 1
                                        else ROWS)
    mine = estimate.stages[hcg.pp_rank]
    items = {k: v for k, v in mine.items.items() if not k.startswith("gathered")}  # FSDP2's transient weights
    return {"measured": measured,
            "estimated": {"parameters": mine.parameters, "gradients": mine.gradients, "optimizer": mine.optimizer,
                          "activations": sum(items.values())},
            "items": items, "forward": meter.peak, "recompute": blocks.peak, "layer": blocks.layer}
