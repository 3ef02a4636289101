"""Rank-side cases of the memory model: what a rank holds after parallelize and one optimizer step (parameters,
gradients, optimizer state, counted from the tensors) and the activations it saves for backward (the peak of the
live saved tensors, through saved-tensor hooks), next to `strategy.estimate_memory` for the same run."""

from __future__ import annotations

import torch

import parallel
import strategy
from parallel.metrics.saved import saved_activations, state_bytes
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


def measure(kind: str, text: str, *, norm_cast: bool = True) -> dict:
    """One step of a small `kind` model under `text`; the measured and estimated bytes of this rank. `norm_cast` False
    leaves out cast_for_amp's cast of a norm's output to its input's dtype (bench/plan.py's comparison)."""
    import parallel.training.amp as amp

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
    with saved_activations(whole) as saved:
        if hcg.pp_size > 1:
            model.train_batch((ids, ids), opt)
        else:
            with parallel.autocast(hcg=hcg):
                loss = model(**parallel.split_sequence({"input_ids": ids, "labels": ids}, hcg=hcg)).loss
            loss.backward()
            opt.step()
    measured = {**state_bytes(whole, opt), "activations": saved.peak}
    estimate = strategy.estimate_memory(config(kind), hcg.resolved, seq_len=SEQ,
                                        micro_batch_size=hcg.resolved.pipeline.micro_batch_size if hcg.pp_size > 1
                                        else ROWS)
    mine = estimate.stages[hcg.pp_rank]
    items = {k: v for k, v in mine.items.items() if not k.startswith("gathered")}  # FSDP2's transient weights
    return {"measured": measured,
            "estimated": {"parameters": mine.parameters, "gradients": mine.gradients, "optimizer": mine.optimizer,
                          "activations": sum(items.values())},
            "items": items, "forward": saved.forward, "recompute": saved.recompute, "layer": saved.layer}
