"""strategy.estimate_memory against the runtime: the bytes each rank holds after parallelize and one optimizer step
(parameters, gradients, optimizer state; from the tensors) and the activations it saves for backward (saved-tensor
hooks, the peak of the live ones), for small Hugging Face models on every axis."""

from __future__ import annotations

import pytest

import strategy
import plan_memory_cases as cases

PP = "hybrid_configs { pp_degree: 2 } pipeline_configs { micro_batch_size: 2 accumulate_steps: 4 }"
BF16 = 'amp: true amp_configs { use_pure_bf16: true dtype: "bfloat16" } '
RUNS = [
    (1, "llama", "hybrid_configs { dp_degree: 1 }"),
    (2, "llama", "hybrid_configs { dp_degree: 2 }"),
    (2, "llama", "hybrid_configs { mp_degree: 2 }"),
    (2, "llama", "hybrid_configs { mp_degree: 2 mp_configs { sequence_parallel: true } }"),
    (2, "llama", "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 1 } }"),
    (2, "llama", "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 2 } }"),
    (2, "llama", "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } }"),
    (2, "llama", PP),
    (2, "llama", "recompute: true " + PP),
    (1, "llama", "recompute: true"),
    (2, "llama", "recompute: true hybrid_configs { mp_degree: 2 mp_configs { sequence_parallel: true } }"),
    (2, "llama", "hybrid_configs { sep_degree: 2 }"),
    (2, "llama", "hybrid_configs { cp_degree: 2 }"),
    # recompute where the sequence is split, and on a pipeline's last stage under pure bf16 (1F1B, 4 micro-batches)
    (2, "llama", "recompute: true hybrid_configs { sep_degree: 2 }"),
    (2, "llama", "recompute: true hybrid_configs { cp_degree: 2 }"),
    (2, "qwen2", BF16 + "recompute: true " + PP),
    (1, "llama", BF16),
    (2, "llama", BF16 + "hybrid_configs { mp_degree: 2 }"),
    (2, "llama", BF16 + "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } }"),
    (1, "llama", 'amp: true amp_configs { dtype: "bfloat16" }'),
    (2, "qwen2", BF16 + "hybrid_configs { mp_degree: 2 mp_configs { sequence_parallel: true } }"),
    (2, "qwen2", BF16 + "recompute: true hybrid_configs { mp_degree: 2 mp_configs { sequence_parallel: true } }"),
    (2, "qwen2", "hybrid_configs { mp_degree: 2 }"),
    (2, "qwen2_tied", "hybrid_configs { mp_degree: 2 }"),  # the embedding's block, the head's too: counted once
    (2, "qwen2_tied", PP),  # the last stage holds a copy of the tied weight, its gradient and its Adam state
    (2, "qwen2", BF16 + "hybrid_configs { dp_degree: 2 }"),
    (2, "qwen3_moe", "hybrid_configs { ep_degree: 2 }"),
    (2, "qwen3_moe", BF16 + "recompute: true hybrid_configs { ep_degree: 2 }"),
    (4, "qwen3_moe", "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } ep_degree: 2 "
                     "moe_sharding_degree: 2 }"),
    (2, "qwen3_moe", "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } }"),  # ep 1: experts sharded
]


@pytest.mark.parametrize(("world", "kind", "text"), RUNS,
                         ids=[f"{k}-{t.replace(' ', '')[:70]}" for _, k, t in RUNS])
def test_the_estimate_is_what_each_rank_holds(pools, world, kind, text):
    for rank, result in enumerate(pools(world).run(cases.measure, kind, text, timeout=120)):
        measured, estimated = result["measured"], result["estimated"]
        for what in ("parameters", "gradients", "optimizer"):
            if what == "gradients" and "pp_degree" in text:
                continue  # the pipeline's train_batch steps and clears them itself; counted with the others above
            assert measured[what] == pytest.approx(estimated[what], rel=0.01), (rank, what)
        assert measured["activations"] == pytest.approx(estimated["activations"], rel=0.10), rank


# Any other causal LM (the zoo's tiny configs): its weights counted from the model itself, exact at every axis; its
# activations by the Llama family's terms at its widths, within the band measured on these (0.6x to 2.1x: Gemma 2's
# four norms a layer and softcapped eager scores, gpt-oss's sinks and experts, GPT-NeoX's parallel blocks).
OTHERS = [
    (2, "gemma2", "hybrid_configs { mp_degree: 2 }"),
    (2, "gpt_neox", PP),
    (2, "deepseek_v3", PP),  # dense first layer, latent attention, shared experts: stages of unequal weights
    (2, "gpt_oss", "hybrid_configs { ep_degree: 2 sharding_degree: 2 sharding_configs { stage: 1 } }"),
]


@pytest.mark.parametrize(("world", "kind", "text"), OTHERS, ids=[f"{k}-{t[:40]}" for _, k, t in OTHERS])
def test_any_other_architectures_model_states_are_counted_exactly(pools, world, kind, text):
    for rank, result in enumerate(pools(world).run(cases.measure, kind, text, timeout=120)):
        measured, estimated = result["measured"], result["estimated"]
        for what in ("parameters", "optimizer") + (() if "pp_degree" in text else ("gradients",)):
            assert measured[what] == pytest.approx(estimated[what], rel=0.01), (rank, what)
        assert 0.5 < measured["activations"] / estimated["activations"] < 2.5, rank


def test_model_states_drop_the_fp32_gradient_after_the_step_under_pure_bf16():
    """ZeRO's 16 bytes a parameter under mixed precision (2 + 2 + 12), as the runtime now holds."""
    r = strategy.resolve(strategy.loads(BF16), world_size=1)
    e = strategy.estimate_memory(cases.config("llama"), r, seq_len=32, micro_batch_size=1)
    shape = strategy.planning.shapes.model_shape(cases.config("llama"))
    norm = sum(p.numel * p.count for p in shape.parts() if p.name in ("norms", "norm"))
    assert e.model_states == pytest.approx(16 * (shape.parameters - norm) + 16 * norm)
    assert e.parameters == pytest.approx(2 * (shape.parameters - norm) + 4 * norm)


def test_experts_inside_the_mp_group_count_their_share_of_the_tokens(pools):
    """ep over the ranks of an mp group: they hold the same tokens, and each dispatches half of them (ep_mp); the
    estimate counts the routed copies of that half only (counting them all, it was 26% over here)."""
    text = BF16 + "hybrid_configs { mp_degree: 2 ep_degree: 2 }"
    for rank, result in enumerate(pools(2).run(cases.measure, "qwen3_moe", text, timeout=120)):
        measured, estimated = result["measured"], result["estimated"]
        for what in ("parameters", "gradients", "optimizer"):
            assert measured[what] == pytest.approx(estimated[what], rel=0.01), (rank, what)
        assert measured["activations"] == pytest.approx(estimated["activations"], rel=0.05), rank


def test_the_token_share_follows_the_strategys_order_of_ranks():
    """With mp outermost, an ep group of adjacent ranks shares no mp group (the runtime makes no ep_mp group): each
    rank dispatches all its tokens, and the estimate counts all the routed copies again."""
    outer = '["mp", "dp", "pp", "sharding", "sep", "cp", "moe_sharding", "ep"]'
    estimates = {}
    for order in ("", f"order: {outer} "):
        r = strategy.resolve(strategy.loads(BF16 + f"hybrid_configs {{ dp_degree: 2 mp_degree: 2 ep_degree: 2 {order}}}"),
                             world_size=4)
        estimates[order] = strategy.estimate_memory(cases.config("qwen3_moe"), r, seq_len=32, micro_batch_size=2)
    shared, alone = estimates[""], estimates[f"order: {outer} "]
    assert alone.parameters == shared.parameters and alone.activations > shared.activations
