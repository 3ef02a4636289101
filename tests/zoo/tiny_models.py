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
OVERRIDES: dict[str, dict[str, Any]] = {
    "bamba": {"attn_layer_indices": [1, 3]},  # the default is all mamba, which cannot even run a forward
    # the default rope_parameters is empty (nothing builds); 3 sliding : 1 full is the config's own legacy pattern
    "cohere_compass_text": {"layer_types": ["sliding_attention"] * 3 + ["full_attention"], "rope_parameters": {
        kind: {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [4, 2, 2]}
        for kind in ("sliding_attention", "full_attention")}},
    "deepseek_v4": {"num_key_value_heads": 1, "q_lora_rank": 32, "o_lora_rank": 16, "o_groups": 2,  # MQA by design
                    "index_topk": 4, "partial_rotary_factor": 0.5,  # top-4 of the 8 compressed entries
                    "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 16}},
    "dots3_note_text": {  # init-only swa_* kwargs make the per-layer config of the sliding layers
        "swa_num_attention_heads": 4, "swa_num_key_value_heads": 4, "swa_q_lora_rank": 32, "swa_kv_lora_rank": 48,
        "swa_head_dim": 16, "swa_qk_nope_head_dim": 8, "swa_v_head_dim": 16},
    "dory": {"n_input_layers": 1, "n_output_layers": 1},  # input + recurrent + output layers must add up to 4
    "gemma3n_text": {  # the 2 KV-sharing layers need both kinds among the 2 layers that fill the cache
        "layer_types": ["sliding_attention", "full_attention"] * 2, "num_kv_shared_layers": 2,
        "activation_sparsity_pattern": [0.95, 0.95, 0.0, 0.0]},
    "gemma4_text": {"global_head_dim": 32},  # init-only: head_dim of the full-attention layers (per-layer config)
    "gemma4_unified_text": {"global_head_dim": 32},
    "granitemoehybrid": {"layer_types": ["mamba", "attention"] * 2},  # legacy names: 5.9 and 5.24 both take them
    "hrm_text": {"num_hidden_layers": 2, "embedding_scale": 8.0},  # 2 per stack: the H and L stacks make 4 layers
    "inkling2_loop_text": {"loop_layer_index_start": 2, "loop_layer_index_end": 4, "loop_gate_rank": 8},
    # jamba's kinds come from periods: mamba, attention+experts, mamba, attention+experts
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2, "expert_layer_offset": 1},
    # the lfm2 defaults are all attention; the family's point is its short convolutions
    "lfm2": {"layer_types": ["conv", "full_attention"] * 2, "block_multiple_of": 32},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"] * 2},
    "longcat_flash": {"num_layers": 2, "zero_expert_num": 2},  # two attention sublayers per layer
    # the default is all full attention, leaving the index_* (block-sparse) fields and the dense MLP unused
    "minimax_m3_vl_text": {"layer_types": ["full_attention", "minimax_m3_sparse"] * 2,
                           "mlp_layer_types": ["dense"] + ["sparse"] * 3},
    "mimo_v2_flash": {"v_head_dim": 8},  # value heads narrower than query/key heads, as in the family
    "phi4_multimodal": {"audio_config": {  # its audio encoder is built too
        "num_blocks": 2, "chunk_size": -1, "nemo_conv_channels": 32, "ext_pw_out_channel": 64,
        "depthwise_separable_out_channel": 64}},
    "qwen4_exp_text": {  # the default has indexed layers but no indexer sizes; PLE (n-gram embeddings) needs eos
        "indexer_n_heads": 4, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 8,
        "indexer_compress_ratio": 4, "hc_lowrank": 8, "ple_layer_ids": [2], "ngram_vocab_size_base": 256,
        "eos_token_id": 2},
}


def architectures() -> list[str]:
    """model_type of every causal LM whose config ships a tensor-parallel plan, sorted."""
    return sorted(
        mt for mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        if mt in CONFIG_MAPPING and getattr(CONFIG_MAPPING[mt], "base_model_tp_plan", None)
    )


def _model_class(model_type: str) -> type[transformers.PreTrainedModel]:
    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]
    return getattr(transformers, name if isinstance(name, str) else name[0])


def _config_class(model_type: str) -> type[Any]:
    """The class the causal LM is built from: the text sub-config for multimodal wrappers such as llama4."""
    cfg_cls, wanted = CONFIG_MAPPING[model_type], _model_class(model_type).config_class
    if wanted is not None and not issubclass(cfg_cls, wanted) and wanted in getattr(cfg_cls, "sub_configs", {}).values():
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


def _quiet_default(cfg_cls: type[Any]) -> Any:
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


def _tiny_kwargs(cfg_cls: type[Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Only the fields the rules change are passed, so everything derived from them (mlp_layer_types, per-layer
    lists, head counts of helper modules) is re-derived by the config itself for the tiny sizes."""
    default = _quiet_default(cfg_cls)
    fields = default.to_dict()
    aliases = getattr(cfg_cls, "attribute_map", {})
    kinds = _layer_types_of(default) or []
    mla = "kv_lora_rank" in fields
    kw: dict[str, Any] = {}
    for key, value in SIZES.items():
        target = key if key in fields else aliases.get(key)
        if target is not None and target in fields and target not in kw and not (mla and key in MLA):
            kw[target] = value
    if kinds and fields.get("sliding_window") is None:  # a window only where the family has one or no layer kinds
        kw.pop("sliding_window", None)
    if mla:
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
    declared = [k for k, v in (rope or {}).items() if k.endswith("attention") and isinstance(v, dict)]
    layer_types = extra.pop("layer_types", None) or (kinds + declared if kinds else None)  # kinds with own RoPE too
    if layer_types and not isinstance(getattr(cfg_cls, aliases.get("layer_types", "layer_types"), None), property):
        if len(set(layer_types)) > n:  # more kinds than layers: grow to the next even count
            n = kw["num_hidden_layers"] = len(set(layer_types)) + len(set(layer_types)) % 2
        kw["layer_types"] = _cover(layer_types, n)
    kw.update(extra)
    return kw


def _layer_types_of(config: Any) -> list[str] | None:
    """The config's per-layer kinds, or None where it has none."""
    try:
        types = getattr(config, "layer_types", None)
    except Exception:  # heterogeneous configs may refuse global reads
        return None
    return list(types) if types else None


def tiny_config(model_type: str) -> transformers.PreTrainedConfig:
    """The tiny config the causal LM of `model_type` is built from (see the module docstring for the rules)."""
    cfg_cls = _config_class(model_type)
    return cfg_cls(**_tiny_kwargs(cfg_cls, OVERRIDES.get(model_type, {})))


def tiny_model(model_type: str, *, seed: int = 0) -> transformers.PreTrainedModel:
    """A float32 tiny model with random weights (seeded right before construction); nothing is downloaded."""
    config = tiny_config(model_type)
    torch.manual_seed(seed)
    return _model_class(model_type)(config).float()


@functools.cache
def build_issues() -> dict[str, str]:
    """model_type -> exception text, for the architectures whose tiny model cannot be built, so tests can skip them."""
    issues = {}
    for model_type in architectures():
        try:
            tiny_model(model_type)
        except Exception as exc:  # noqa: BLE001 - the text is the report
            issues[model_type] = f"{type(exc).__name__}: {exc}"
    return issues
