"""How a PaddleFormers checkpoint's weights become the Hugging Face model's, per architecture: which Paddle name
becomes which Hugging Face name(s), the layout change, and how Paddle's tensor parallelism split it (to merge its
`.tpNN` shards). The rules are data, so that the docs' table is generated from them.

Observed on checkpoints PaddlePaddle 3.3.1 / PaddleFormers 1.2.0 wrote (../shared/fixtures/paddle-ckpt/README.md):
Linear weights are stored [in, out] (Hugging Face: [out, in]); embeddings and the LM head [vocab, hidden], as Hugging
Face; a fused `qkv_proj` is grouped by key/value head (per group: its query heads, then its key, then its value); a
fused `up_gate_proj` is [gate | up] despite its name; a tied LM head is a copy of the embedding.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import numpy as np

__all__ = ["ARCHITECTURES", "UNSHARDED", "Rule", "apply", "rule_for"]


class Rule(NamedTuple):
    """`paddle`: a regular expression over Paddle's structured names; `hf`: the Hugging Face name(s) it becomes
    (`\\1` the layer index); `change`: "as is", "transposed", "qkv" (the grouped fused projection split into q, k, v,
    each transposed), "gate_up" ([gate | up] split, each transposed), "expert" (one expert's weight, transposed into
    its slice `#e` of Hugging Face's stacked tensor), "tied" (the LM head's copy of the embedding, dropped) or "mtp" (a
    multi-token-prediction weight, which Hugging Face's model does not have: dropped); `tp`: how Paddle's tensor
    parallelism splits it: "column" (last axis), "row" (first axis), "pairs" (each rank's [gate_r | up_r]) or ""
    (whole on every rank)."""

    paddle: str
    hf: tuple[str, ...]
    change: str
    tp: str


_L = r"model\.layers\.(\d+)\."
_DENSE = (
    Rule(r"model\.embed_tokens\.weight", ("model.embed_tokens.weight",), "as is", "row"),
    Rule(_L + r"input_layernorm\.weight", (r"model.layers.\1.input_layernorm.weight",), "as is", ""),
    Rule(_L + r"post_attention_layernorm\.weight", (r"model.layers.\1.post_attention_layernorm.weight",), "as is", ""),
    Rule(_L + r"self_attn\.o_proj\.weight", (r"model.layers.\1.self_attn.o_proj.weight",), "transposed", "row"),
    Rule(_L + r"mlp\.down_proj\.weight", (r"model.layers.\1.mlp.down_proj.weight",), "transposed", "row"),
    Rule(r"model\.norm\.weight", ("model.norm.weight",), "as is", ""),
)
_SEPARATE = tuple(
    Rule(_L + rf"{part}\.{name}\.weight", (rf"model.layers.\1.{part}.{name}.weight",), "transposed", "column")
    for part, name in (("self_attn", "q_proj"), ("self_attn", "k_proj"), ("self_attn", "v_proj"), ("mlp", "gate_proj"),
                       ("mlp", "up_proj")))
_QKV = tuple(
    Rule(_L + rf"self_attn\.qkv_proj\.{kind}", tuple(rf"model.layers.\1.self_attn.{p}_proj.{kind}" for p in "qkv"),
         "qkv", "column") for kind in ("weight", "bias"))
_GATE_UP = (Rule(_L + r"mlp\.up_gate_proj\.weight", (r"model.layers.\1.mlp.gate_proj.weight",
                                                     r"model.layers.\1.mlp.up_proj.weight"), "gate_up", "pairs"),)
_E = _L + r"mlp\.experts\.(\d+)\."
# Each expert's [gate | up] and down stacked into Hugging Face's fused expert tensors (`#e`: expert e of the stack,
# [2·moe_inter, hidden] and [hidden, moe_inter] each), and the router [in, out].
_EXPERTS = (
    Rule(_E + r"up_gate_proj\.weight", (r"model.layers.\1.mlp.experts.gate_up_proj#\2",), "expert", "pairs"),
    Rule(_E + r"down_proj\.weight", (r"model.layers.\1.mlp.experts.down_proj#\2",), "expert", "row"),
    Rule(_L + r"mlp\.gate\.weight", (r"model.layers.\1.mlp.gate.weight",), "transposed", ""),
)


def _shared(paddle: str, hf: str) -> tuple[Rule, ...]:
    """A shared expert's fused [gate | up] and its down projection: Paddle's `paddle` module, Hugging Face's `hf`."""
    s = f"model.layers.\\1.mlp.{hf}."
    return (Rule(_L + rf"mlp\.{paddle}\.up_gate_proj\.weight", (s + "gate_proj.weight", s + "up_proj.weight"), "gate_up",
                 "pairs"),
            Rule(_L + rf"mlp\.{paddle}\.down_proj\.weight", (s + "down_proj.weight",), "transposed", "row"))


# Qwen2-MoE: the shared expert and its gate [in, out].
_MOE = _EXPERTS + _shared("shared_expert", "shared_expert") + (
    Rule(_L + r"mlp\.shared_expert_gate\.weight", (r"model.layers.\1.mlp.shared_expert_gate.weight",), "transposed",
         ""),
)
# ERNIE-4.5-MoE: the shared experts (one MLP of moe_intermediate · moe_num_shared_experts), the router's correction
# bias (Hugging Face keeps it in the router), and the multi-token-prediction block Hugging Face's model does not have.
_ERNIE_MOE = _EXPERTS + _shared("shared_experts", "shared_experts") + (
    Rule(_L + r"mlp\.moe_statics\.e_score_correction_bias",
         (r"model.layers.\1.mlp.gate.moe_statics.e_score_correction_bias",), "as is", ""),
    *(Rule(rf"model\.mtp_block\.(\d+)\.{part}", (), "mtp", "") for part in (
        r"self_attn\.qkv_proj\.weight", r"self_attn\.qkv_proj\.bias", r"self_attn\.o_proj\.weight",
        r"mlp\.up_gate_proj\.weight", r"mlp\.down_proj\.weight", r"input_layernorm\.weight",
        r"post_attention_layernorm\.weight")),
    *(Rule(rf"model\.mtp_{part}\.(\d+)\.weight", (), "mtp", "") for part in ("emb_norm", "hidden_norm", "linear_proj")),
)
_HEAD = Rule(r"lm_head\.weight", ("lm_head.weight",), "as is", "row")
_TIED_HEAD = Rule(r"lm_head\.weight", (), "tied", "row")

# By config.json's model_type: Llama (q/k/v and gate/up apart, an LM head of its own); Qwen2 (PaddleFormers'
# Qwen2ForCausalLMDeprecated: qkv and up_gate fused, q/k/v biased, the head tied or not); ERNIE-4.5 (fused, no
# biases); Qwen2-MoE (Qwen2MoeForCausalLMDeprecated: Qwen2's attention, experts, a shared expert and its gate);
# ERNIE-4.5-MoE (ERNIE-4.5's dense layers before moe_layer_start_index, then experts and shared experts).
ARCHITECTURES: dict[str, tuple[Rule, ...]] = {
    "llama": _DENSE + _SEPARATE + (_HEAD,),
    "qwen2": _DENSE + _QKV + _SEPARATE + _GATE_UP + (_HEAD,),
    "ernie4_5": _DENSE + _QKV + _GATE_UP + (_HEAD,),
    "qwen2_moe": _DENSE + _QKV + _MOE + (_HEAD,),
    "ernie4_5_moe": _DENSE + _QKV + _GATE_UP + _ERNIE_MOE + (_HEAD,),
}
# Architectures whose tensor-parallel shards are not split as `Rule.tp` says, by why (merged with PaddleFormers first).
UNSHARDED = {
    "ernie4_5_moe": "PaddleFormers places ERNIE-4.5-MoE's experts on the ranks of its moe_group (mp by default) instead "
                    "of splitting each expert, and that placement is not merged here",
}


def rule_for(model_type: str, name: str, tied: bool) -> Rule | None:
    """The rule that maps Paddle's `name` for `model_type` (a tied model's LM head: the dropped copy)."""
    if tied and name == "lm_head.weight":
        return _TIED_HEAD
    return next((r for r in ARCHITECTURES[model_type] if re.fullmatch(r.paddle, name)), None)


def apply(rule: Rule, name: str, value: np.ndarray, config: Any) -> dict[str, np.ndarray]:
    """`value` (Paddle's `name`, Paddle's layout) as the Hugging Face name(s) and layout `rule` says."""
    names = [re.sub(rule.paddle, hf, name) if hf else hf for hf in rule.hf]
    if rule.change == "as is":
        return {names[0]: value}
    if rule.change in ("transposed", "expert"):  # (an expert: its slice of the stack, named name#e)
        return {names[0]: value.T}
    if rule.change == "qkv":
        return dict(zip(names, _split_qkv(value, config)))
    if rule.change == "gate_up":
        gate, up = np.split(value, 2, axis=-1)
        return {names[0]: gate.T, names[1]: up.T}
    return {}  # "tied": the embedding is the head; "mtp": no such weight in Hugging Face's model


def _split_qkv(value: np.ndarray, config: Any) -> tuple[np.ndarray, ...]:
    """A fused projection ([hidden, (heads + 2·kv_heads)·head_dim], or its bias), grouped by key/value head: per
    group its heads/kv_heads query heads, its key head, its value head; as q, k, v in Hugging Face's [out, in]."""
    heads, kv = config["num_attention_heads"], config.get("num_key_value_heads") or config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    per = heads // kv
    grouped = value.reshape(*value.shape[:-1], kv, per + 2, head_dim)
    q = grouped[..., :per, :].reshape(*value.shape[:-1], heads * head_dim)
    k = grouped[..., per, :].reshape(*value.shape[:-1], kv * head_dim)
    v = grouped[..., per + 1, :].reshape(*value.shape[:-1], kv * head_dim)
    return tuple(x.T if x.ndim == 2 else x for x in (q, k, v))


def markdown() -> str:
    """The rules as docs/paddle-checkpoints.md's table: per architecture, Paddle's key pattern, the Hugging Face
    name(s) it becomes, the layout change and how Paddle's tensor parallelism splits it."""
    rows = ["| model_type | Paddle key | Hugging Face name(s) | change | Paddle's tensor-parallel split |",
            "|---|---|---|---|---|"]
    split = {"column": "columns (last axis)", "row": "rows (first axis)", "pairs": "[gate_r \\| up_r] per rank",
             "": "whole on every rank"}
    for kind, rules in ARCHITECTURES.items():
        for r in (*rules, _TIED_HEAD):
            paddle = r.paddle.replace("(\\d+)", "N", 1).replace("(\\d+)", "E").replace("\\.", ".")
            hf = ", ".join(h.replace("\\1", "N").replace("#\\2", "[E]") for h in r.hf) or "(dropped)"
            change = {"tied": "dropped under tie_word_embeddings (the embedding's copy)",
                      "mtp": "dropped (multi-token prediction: Hugging Face's model has none)"}.get(r.change, r.change)
            rows.append(f"| {kind} | `{paddle}` | {hf} | {change} | {split[r.tp]} |")
    return "\n".join(rows) + "\n"
