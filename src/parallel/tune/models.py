"""The small models a trial (and the examples) build from a config: random init, nothing downloaded. Sizes shared,
each family's own fields. Small released models tie the LM head to the embedding (Qwen2.5-0.5B to 3B, Qwen3-0.6B to
4B, Llama-3.2-1B and 3B): qwen2 and qwen3 do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SMALL = dict(vocab_size=256, hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4)
MOE = dict(num_experts_per_tok=2, output_router_logits=True, router_aux_loss_coef=0.01)
MODEL_TYPES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", dict(intermediate_size=688, tie_word_embeddings=False)),
    "qwen2": ("Qwen2Config", dict(intermediate_size=688, tie_word_embeddings=True)),
    "qwen3": ("Qwen3Config", dict(intermediate_size=688, head_dim=32, tie_word_embeddings=True)),
    "qwen3_moe": ("Qwen3MoeConfig", dict(num_experts=8, moe_intermediate_size=128, tie_word_embeddings=False, **MOE)),
    "mixtral": ("MixtralConfig", dict(num_local_experts=8, intermediate_size=128, tie_word_embeddings=False, **MOE)),
}


def small_config(model_type: str, seq_len: int) -> Any:
    """The transformers config of the small `model_type` (MODEL_TYPES), for sequences of `seq_len` tokens."""
    import transformers

    name, fields = MODEL_TYPES[model_type]
    return getattr(transformers, name)(max_position_embeddings=seq_len, **SMALL, **fields)


def config_of(model: str, seq_len: int) -> Any:
    """A transformers config: of a small model (`model` one of MODEL_TYPES), of a directory holding config.json, or
    of a config.json itself."""
    import transformers

    if model in MODEL_TYPES:
        return small_config(model, seq_len)
    path = Path(model)
    if path.is_dir():
        return transformers.AutoConfig.from_pretrained(path)
    fields = json.loads(path.read_text())
    return transformers.AutoConfig.for_model(**fields)


def build(model: str, seq_len: int) -> Any:
    """The causal LM of `config_of(model, seq_len)` with random weights (seeded: every rank builds the same)."""
    import torch
    import transformers

    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config_of(model, seq_len), dtype=torch.float32)
