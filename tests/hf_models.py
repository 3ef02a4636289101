"""The small Hugging Face models the tests build from a config (random weights, never downloaded): a Llama, Qwen2 or
Qwen3 (`hf_model`), and a Qwen3-MoE or Mixtral with uneven routing (`moe`) with the AdamW eps its parity needs."""

from __future__ import annotations

import torch

# The combine sums a token's experts in another order than one process does: an embedding entry whose gradient
# cancels to ~1e-7 then differs by float32 rounding (Δg ~4e-9, four times rank_helpers.ADAMW_EPS's argument), which
# AdamW's default eps (1e-8) turns into steps ~lr apart. eps 1e-4 keeps such entries' steps ~4e-8 (lr·Δg/eps) while
# gradients of 1e-3 still step ~0.9 lr.
MOE_EPS = 1e-4


def hf_model(arch: str, heads: int = 4, kv_heads: int = 2):
    """A two-layer Llama, Qwen2 or Qwen3 of width 64 over a vocabulary of 128, untied."""
    import transformers

    config_cls, model_cls = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
                             "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
                             "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM)}[arch]
    extra = {"head_dim": 64 // heads} if arch == "qwen3" else {}  # (Qwen3's default is 128, not hidden / heads)
    config = config_cls(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=64,
                        tie_word_embeddings=False, **extra)
    torch.manual_seed(0)
    return model_cls(config)


def moe(kind: str = "qwen3_moe", experts: int = 8):
    """A two-layer Qwen3-MoE or Mixtral over a vocabulary of 64 and 16 positions, its router favouring some experts."""
    import transformers

    common = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=64,
                  num_experts_per_tok=2, max_position_embeddings=16, output_router_logits=True,
                  router_aux_loss_coef=0.01, tie_word_embeddings=False)
    if kind == "qwen3_moe":
        config = transformers.Qwen3MoeConfig(num_experts=experts, moe_intermediate_size=16, intermediate_size=64,
                                             norm_topk_prob=True, **common)
        cls = transformers.Qwen3MoeForCausalLM
    else:
        config = transformers.MixtralConfig(num_local_experts=experts, intermediate_size=16, router_jitter_noise=0.0,
                                            **common)
        cls = transformers.MixtralForCausalLM
    torch.manual_seed(0)
    model = cls(config)
    with torch.no_grad():  # uneven routing: some experts favoured
        for name, p in model.named_parameters():
            if name.endswith("mlp.gate.weight"):
                p.add_(torch.linspace(-0.5, 0.5, p.shape[0]).unsqueeze(1))
    return model
