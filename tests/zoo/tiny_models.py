"""Tiny random-weight builds of every tensor-parallel-ready causal LM of the installed transformers.

The architecture list is read from transformers itself (never written by hand), so a new release brings its
new families into the tests.  Each tiny config keeps the family's own features switched on, shrunk so that
they still act on a 32-token sequence: windows and chunks of 8, every layer kind, multipliers away from 1,
soft-caps that bite, 8 experts top-2, small multi-head latent attention, no dropout.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

VOCAB = 128
WINDOW = 8  # shorter than the 32-token test sequence, so windows and chunks really cut

# Applied wherever the family's config has the attribute (directly, or as an alias in its attribute_map).
SIZES: dict[str, Any] = {
    "vocab_size": VOCAB, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "moe_intermediate_size": 32, "intermediate_size": 128, "num_hidden_layers": 4, "max_position_embeddings": 64,
    "tie_word_embeddings": False, "rotary_dim": 8, "n_inner": 128, "model_max_length": 64,
    "n_ctx": 64, "unpadded_vocab_size": VOCAB, "swa_num_attention_heads": 4, "swa_num_key_value_heads": 2,
    "swa_head_dim": 16, "v_head_dim": 16,
    # windows, chunks and sparse-attention budgets
    "sliding_window": WINDOW, "attention_chunk_size": WINDOW, "sliding_window_size": WINDOW,
    "keep_window_size": WINDOW, "mamba_chunk_size": WINDOW, "chunk_size": WINDOW, "block_size": WINDOW,
    "index_topk": WINDOW, "index_n_heads": 4, "index_head_dim": 32, "index_block_size": 4, "index_topk_blocks": 2,
    "rel_extent": WINDOW, "n_layers_per_attn_res_block": 2, "log_scaling_n_floor": WINDOW, "floor_scale": WINDOW,
    # experts: 8, top-2, one shared, groups consistent with 8
    "num_experts": 8, "num_local_experts": 8, "n_routed_experts": 8, "moe_num_experts": 8,
    "num_experts_per_tok": 2, "num_experts_per_token": 2, "moe_topk": 2, "moe_k": 2, "top_k_experts": 2,
    "n_shared_experts": 1, "num_shared_experts": 1, "moe_num_shared_experts": 1,
    "n_group": 4, "num_expert_group": 4, "topk_group": 2, "first_k_dense_replace": 1, "num_dense_layers": 1,
    "shared_expert_intermediate_size": 32, "shared_experts_intermediate_size": 32, "shared_intermediate_size": 32,
    "moe_shared_expert_intermediate_size": 32, "expert_ffn_hidden_size": 32, "ffn_hidden_size": 128,
    "dense_intermediate_size": 128, "intermediate_size_mlp": 128,
    # linear attention, gated delta-net, mamba
    "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "linear_num_heads": 4, "linear_head_dim": 16, "mamba_n_heads": 8, "mamba_num_heads": 8, "mamba_d_head": 16,
    "mamba_head_dim": 16, "mamba_d_state": 16, "ssm_state_size": 16, "mamba_dt_rank": 8, "mamba_d_ssm": 128,
    "n_groups": 2, "vocab_size_per_layer_input": VOCAB, "hidden_size_per_layer_input": 16, "laurel_rank": 8,
    # multipliers, scales and soft-caps away from their neutral value
    "embedding_multiplier": 2.0, "logits_scaling": 2.0, "residual_multiplier": 0.5, "attention_multiplier": 0.125,
    "logit_scale": 0.5, "lm_head_multiplier": 0.5, "key_multiplier": 0.5, "attention_in_multiplier": 2.0,
    "attention_out_multiplier": 0.5, "ssm_in_multiplier": 2.0, "ssm_out_multiplier": 0.5,
    "mlp_multipliers": [2.0, 0.5], "ssm_multipliers": [0.5, 2.0, 0.5, 2.0, 0.5], "query_pre_attn_scalar": 24,
    "final_logit_softcapping": 5.0, "attn_logit_softcapping": 2.0, "mlp_gate_softcap": 2.0, "mlp_up_softcap": 5.0,
    "moe_router_logit_softcapping": 5.0, "routed_scaling_factor": 2.5, "route_scale": 2.0,
    "full_attn_alpha_factor": 0.5, "linear_attn_alpha_factor": 0.5, "mlp_alpha_factor": 0.5,
    "full_attn_beta_factor": 2.0, "linear_attn_beta_factor": 2.0, "mlp_beta_factor": 2.0,
}
# Multi-head latent attention, where the family has kv_lora_rank; q_lora_rank stays None where it is None.
MLA: dict[str, Any] = {"kv_lora_rank": 32, "q_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16,
                       "v_head_dim": 16, "head_dim": 8, "num_key_value_heads": 4}
TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "eod_token_id": 3}
NOISE = ("dropout", "pdrop", "jitter")  # any numeric field naming one of these is set to 0

# Per-family adjustments: extra kwargs (some are init-only, popped by the config) and "layer_types" to cover.
_MAMBA_ATTN = ["linear_attention", "full_attention"] * 2
OVERRIDES: dict[str, dict[str, Any]] = {
    "bamba": {"attn_layer_indices": [1, 3]},
    "cohere_compass_text": {"layer_types": ["sliding_attention"] * 3 + ["full_attention"], "rope_parameters": {
        kind: {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [4, 2, 2]}
        for kind in ("sliding_attention", "full_attention")}},
    "deepseek_v4": {"num_key_value_heads": 1, "q_lora_rank": 32, "o_lora_rank": 16, "o_groups": 2, "index_topk": 4,
                    "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
                    "partial_rotary_factor": 0.5},  # shared-KV MQA by design
    "dots3_note_text": {"swa_num_attention_heads": 4, "swa_num_key_value_heads": 4, "swa_q_lora_rank": 32,
                        "swa_kv_lora_rank": 48, "swa_head_dim": 16, "swa_qk_nope_head_dim": 8, "swa_v_head_dim": 16},
    "dory": {"n_input_layers": 1, "n_output_layers": 1},
    "gemma3n_text": {"layer_types": ["sliding_attention", "full_attention"] * 2, "num_kv_shared_layers": 2,
                     "activation_sparsity_pattern": [0.95, 0.95, 0.0, 0.0]},
    "gemma4_text": {"global_head_dim": 32},
    "gemma4_unified_text": {"global_head_dim": 32},
    "granitemoehybrid": {"layer_types": _MAMBA_ATTN},
    "hrm_text": {"num_hidden_layers": 2, "embedding_scale": 8.0},  # 2 per stack: H and L stacks make 4 layers
    "inkling2_loop_text": {"loop_layer_index_start": 2, "loop_layer_index_end": 4, "loop_gate_rank": 8},
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2, "expert_layer_offset": 1},
    "lfm2": {"layer_types": ["conv", "full_attention"] * 2, "block_multiple_of": 32},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"] * 2},
    "longcat_flash": {"num_layers": 2, "zero_expert_num": 2},  # two attention sublayers per layer
    "minimax_m3_vl_text": {"layer_types": ["full_attention", "minimax_m3_sparse"] * 2,  # default is all full
                           "mlp_layer_types": ["dense"] + ["sparse"] * 3},
    "mimo_v2_flash": {"v_head_dim": 8},  # value heads narrower than query/key heads, as in the family
    "phi4_multimodal": {"audio_config": {"num_blocks": 2, "chunk_size": -1, "nemo_conv_channels": 32,
                                         "ext_pw_out_channel": 64, "depthwise_separable_out_channel": 64}},
    "qwen4_exp_text": {"indexer_n_heads": 4, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 8,
                       "indexer_compress_ratio": 4, "hc_lowrank": 8, "ple_layer_ids": [2],
                       "ngram_vocab_size_base": 256, "eos_token_id": 2},
}


def architectures() -> list[str]:
    """model_type of every causal LM whose config ships a tensor-parallel plan, sorted."""
    return sorted(
        mt for mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        if mt in CONFIG_MAPPING and getattr(CONFIG_MAPPING[mt], "base_model_tp_plan", None)
    )


def _model_class(model_type: str) -> type:
    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]
    return getattr(transformers, name if isinstance(name, str) else name[0])


def _config_class(model_type: str) -> type:
    """The class the causal LM is built from: the text sub-config for multimodal wrappers such as llama4."""
    cfg_cls, wanted = CONFIG_MAPPING[model_type], _model_class(model_type).config_class
    if not issubclass(cfg_cls, wanted) and wanted in getattr(cfg_cls, "sub_configs", {}).values():
        return wanted
    return cfg_cls


def _cover(default: list[str], n: int) -> list[str]:
    """n layer types with every kind of `default`, following its order (Gemma 3's 5:1 gives s, s, s, f)."""
    kinds = list(dict.fromkeys(default))
    out = (list(default) * n)[:n]
    for kind in kinds:
        if kind not in out:
            out[max(i for i in range(n) if out.count(out[i]) > 1)] = kind
    return out


def _quiet_default(cfg_cls: type) -> Any:
    """The family's default config, without its warnings about ids outside the (huge) default vocabulary."""
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        return cfg_cls()
    finally:
        transformers.logging.set_verbosity(verbosity)


def _short_rope(params: dict[str, Any]) -> dict[str, Any]:
    """Long-context RoPE (llama3, yarn) rescaled to the 64 positions, so its scaling acts on the test sequence."""
    if any(isinstance(v, dict) for v in params.values()):
        return {k: _short_rope(v) if isinstance(v, dict) else v for k, v in params.items()}
    params = dict(params, original_max_position_embeddings=16)
    if "max_position_embeddings" in params:
        params["max_position_embeddings"] = 64
    if params.get("rope_type") == "yarn":
        params["factor"] = 4.0
    return params


def _tiny_kwargs(cfg_cls: type, extra: dict[str, Any]) -> dict[str, Any]:
    default = _quiet_default(cfg_cls)
    fields = default.to_dict()
    aliases = getattr(cfg_cls, "attribute_map", {})
    kw: dict[str, Any] = {}
    for key, value in SIZES.items():
        target = key if key in fields else aliases.get(key)
        if target in fields and target not in kw and (key not in MLA or "kv_lora_rank" not in fields):
            kw[target] = value
    if "kv_lora_rank" in fields:
        kw.update({k: v for k, v in MLA.items() if k in fields and not (k == "q_lora_rank" and fields[k] is None)})
    for key, value in fields.items():
        if any(n in key for n in NOISE) and isinstance(value, (int, float)) and not isinstance(value, bool):
            kw[key] = 0.0
        elif key in TOKEN_IDS and value is not None and max(value if isinstance(value, list) else [value]) >= VOCAB:
            kw[key] = [TOKEN_IDS[key]] if isinstance(value, list) else TOKEN_IDS[key]
    rope = fields.get("rope_parameters")
    if isinstance(rope, dict) and "original_max_position_embeddings" in str(rope):
        kw["rope_parameters"] = _short_rope(rope)
    extra = dict(extra)
    for key, sub_cls in getattr(cfg_cls, "sub_configs", {}).items():
        if isinstance(fields.get(key), dict):
            kw[key] = _tiny_kwargs(sub_cls, extra.pop(key, {}))
    n = extra.get("num_hidden_layers", kw.get("num_hidden_layers", 4))
    layer_types = extra.pop("layer_types", None) or _layer_types_of(default)
    if layer_types and not isinstance(getattr(cfg_cls, aliases.get("layer_types", "layer_types"), None), property):
        kw["layer_types"] = _cover(layer_types, n)
    kw.update(extra)
    return kw


def _layer_types_of(config: Any) -> list[str] | None:
    try:
        types = getattr(config, "layer_types", None)
    except Exception:  # heterogeneous configs may refuse global reads
        return None
    return list(types) if types else None


def tiny_config(model_type: str):
    """The tiny config the causal LM of `model_type` is built from (see the module docstring for the rules)."""
    cfg_cls = _config_class(model_type)
    return cfg_cls(**_tiny_kwargs(cfg_cls, OVERRIDES.get(model_type, {})))


def tiny_model(model_type: str, *, seed: int = 0) -> torch.nn.Module:
    """A float32 tiny model with random weights (seeded right before construction); nothing is downloaded."""
    config = tiny_config(model_type)
    torch.manual_seed(seed)
    return _model_class(model_type)(config).float()


@functools.cache
def build_issues() -> dict[str, str]:
    """model_type -> exception text, for the architectures that cannot be built tiny at all."""
    issues = {}
    for model_type in architectures():
        try:
            tiny_config(model_type)
        except Exception as exc:  # noqa: BLE001 - the text is the report
            issues[model_type] = f"{type(exc).__name__}: {exc}"
    return issues
