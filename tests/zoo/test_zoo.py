"""The contract of `parallelize` for the causal LMs of the installed transformers: at every axis a model trains as one
process does (losses and parameters, 3 AdamW steps), or is refused before anything changes, in one line naming it. A
fixed slice runs here (the families whose features a runtime loses most easily, one of each feature); `make test-zoo`
runs every architecture (tests/zoo/run_zoo.py)."""

from __future__ import annotations

import pytest

import zoo_cases

pytest.importorskip("transformers")

# One of each feature: per-layer sliding windows and softcaps (Gemma 2), a scaled embedding and per-layer-type rotary
# embeddings (Gemma 3), a window without layer types (Mistral), sinks, windows and biased experts (gpt-oss), a logit
# scale and parallel attention/MLP blocks (Cohere, Cohere 2 with windows), multipliers on embeddings, residuals,
# attention and logits (Granite), a final norm without parameters (OLMo), NoPE full layers beside windows (EXAONE 4),
# chunked attention (Llama 4), final-logit softcapping (nanochat), a gated delta-net (Qwen3-Next: refused under sep
# and cp), keys and values shared across layers and per-layer inputs (Gemma 4: refused at pp; at mp, sep and cp its
# float32 parameters miss by rounding and float64 decides), and the plain Llama.
SLICE = ["llama", "gemma2", "gemma3_text", "mistral", "gpt_oss", "cohere", "cohere2", "granite", "olmo", "exaone4",
         "llama4_text", "nanochat", "qwen3_next", "gemma4_text"]
# The acceptance: these train at every axis their heads and layers allow (experts are another matter).
MUST_TRAIN = {"gemma2", "gemma3_text", "mistral", "gpt_oss", "cohere", "cohere2", "granite", "olmo", "exaone4"}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("arch", SLICE)
def test_each_architecture_trains_as_one_process_at_every_axis_or_is_refused_by_name(pools, arch):
    outcomes = {layout: pools(2).run(zoo_cases.outcome, arch, layout, timeout=180) for layout in zoo_cases.LAYOUTS}
    for layout, ranks in outcomes.items():
        assert ranks[0] == ranks[1], (layout, ranks)  # both ranks saw the same outcome
        result = ranks[0]
        assert result["outcome"] in ("trains", "refused", "n/a"), (layout, result)
        if result["outcome"] == "refused":
            assert "\n" not in result["detail"] and "ForCausalLM" in result["detail"], (layout, result)
        if arch in MUST_TRAIN and layout != "ep2":
            assert result["outcome"] == "trains", (layout, result)


# Axes together on 4 ranks: the kept scaled embedding under FSDP2 (which swaps the module's parameters) and under a
# pipeline; Gemma 2's windows and softcaps with mp and sep splitting heads together.
COMBINED = [
    ("gemma3_text", "hybrid_configs { mp_degree: 2 sharding_degree: 2 sharding_configs { stage: 3 } }"),
    ("gemma3_text", "hybrid_configs { mp_degree: 2 pp_degree: 2 } pipeline_configs { micro_batch_size: 4 "
                    "accumulate_steps: 2 }"),
    ("gemma2", "hybrid_configs { mp_degree: 2 sep_degree: 2 }"),
]


@pytest.mark.timeout(300)
def test_features_are_kept_when_axes_combine_on_4_ranks(pools):
    for arch, text in COMBINED:
        ranks = pools(4).run(zoo_cases.outcome, arch, text, timeout=180)
        assert {r["outcome"] for r in ranks} == {"trains"}, (arch, text, ranks[0])


def test_a_second_model_parallelised_in_the_process_leaves_the_first_ones_attention_alone(pools):
    result = pools(2).run(zoo_cases.two_models_keep_their_own_attention, timeout=180)[0]
    assert result["implementations"] == ["parallel_sep", "parallel_sep"]
    assert result["losses"] == pytest.approx(result["ref_losses"], rel=1e-5)
    assert result["refused"].startswith("LlamaAttention calls the 'parallel_sep' attention, which parallelize() sets up")
