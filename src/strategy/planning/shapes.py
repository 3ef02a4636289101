"""A decoder's shapes from its Hugging Face config (a dict, or a config.json read with the standard library), and
its parameters counted exactly, module by module, as the runtime splits them.

Llama, Mistral, Qwen2 (biased q/k/v), Qwen3 (per-head q/k norms) and their Mixture-of-Experts kin (Mixtral, Qwen3-MoE:
a router and `num_experts` gated MLPs in each sparse layer) share one layout: embedding, per layer two RMSNorms,
attention (q, k, v, o) and an MLP (gate, up, down) or experts, a final norm and the LM head (tied or not).
"""

# Annotations stay evaluated (no `from __future__ import annotations`): see resolution/layout.py.

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["ModelShape", "Part", "model_shape"]

KNOWN = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe")


@dataclass(frozen=True, slots=True)
class Part:
    """One weight (or bias) of the model: its elements, and how the runtime splits it.

    `mp`: "column" (output rows split over mp), "row" (input columns split), "vocab" (embedding rows) or "" (replicated
    over mp); `expert`: a block of experts (split over ep, whole over mp); `where`: "embed" (the input embedding), "first"
    (another weight before the layers, on the first stage), "layer" (one per layer, `count` of them) or "head" (the
    final norm and LM head, and what else follows the layers); `norm`: a normalisation's weight (fp32 under pure amp)."""

    name: str
    numel: int
    mp: str = ""
    expert: bool = False
    where: str = "layer"
    count: int = 1
    norm: bool = False
    layers: tuple[int, ...] = ()  # which layers have it, where known (counted from the model); else `count` of them


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What the memory model needs of a decoder."""

    model_type: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    tied: bool
    qkv_bias: bool
    qk_norm: bool
    experts: int = 0  # per sparse layer; 0: a dense model
    top_k: int = 0
    expert_intermediate: int = 0
    sparse_layers: int = 0  # layers with experts (the others have the dense MLP)
    # Eager attention (a model whose config asks for it): the s×s score tensors a layer saves for backward, per head,
    # in fp32 units (1: the softmax's output; Gemma 2's softcap 2, gpt-oss's sink column 1 + 1/s); 0 under a fused
    # kernel (SDPA, flash), which keeps a log-sum-exp instead.
    attention_scores: float = 0.0
    # The router's load-balancing loss is part of the model's loss (config.output_router_logits with a coefficient):
    # the pipeline refuses it (its stages do not pass the router logits on; parallel.pipeline.losses).
    router_loss: bool = False
    # Every weight as counted from the model itself (parallel.compose.model_shape, for any other model_type); empty:
    # the Llama family's layout below, from the widths above.
    counted: tuple[Part, ...] = ()

    @property
    def dense_layers(self) -> int:
        return self.layers - self.sparse_layers

    def parts(self) -> list[Part]:
        """Every weight, as `Part`s (a layer's weights with `count` = the layers that have them)."""
        if self.counted:
            return list(self.counted)
        h, a, g, d = self.hidden, self.heads, self.kv_heads, self.head_dim
        parts = [Part("embed_tokens", self.vocab * h, "vocab", where="embed")]
        n = self.layers
        parts += [Part("q_proj", h * a * d, "column", count=n), Part("k_proj", h * g * d, "column", count=n),
                  Part("v_proj", h * g * d, "column", count=n), Part("o_proj", a * d * h, "row", count=n),
                  Part("norms", 2 * h, count=n, norm=True)]
        if self.qkv_bias:
            parts.append(Part("qkv_bias", (a + 2 * g) * d, "column", count=n))
        if self.qk_norm:
            parts.append(Part("qk_norm", 2 * d, count=n, norm=True))
        if self.dense_layers:
            parts += [Part("mlp_gate_up", 2 * h * self.intermediate, "column", count=self.dense_layers),
                      Part("mlp_down", self.intermediate * h, "row", count=self.dense_layers)]
        if self.sparse_layers:
            parts += [Part("router", h * self.experts, count=self.sparse_layers),
                      Part("experts", 3 * h * self.expert_intermediate * self.experts, expert=True,
                           count=self.sparse_layers)]
        parts.append(Part("norm", h, where="head", norm=True))
        if not self.tied:
            parts.append(Part("lm_head", self.vocab * h, "column", where="head"))
        return parts

    @property
    def parameters(self) -> int:
        return sum(p.numel * p.count for p in self.parts())

    @property
    def expert_parameters(self) -> int:
        return sum(p.numel * p.count for p in self.parts() if p.expert)

    @property
    def active_parameters(self) -> int:
        """Parameters a token passes through: every weight but the experts it was not routed to."""
        if not self.experts:
            return self.parameters
        return self.parameters - self.expert_parameters * (self.experts - self.top_k) // self.experts


def model_shape(config: Mapping[str, Any] | str | os.PathLike[str]) -> ModelShape:
    """The shape of a Hugging Face decoder config (its dict, or the path of its config.json).

    Raises:
        ValueError: not a decoder this model knows (naming the model_type and the known ones), or a key missing.
    """
    if isinstance(config, Mapping):
        c = dict(config)
    else:
        with open(config, encoding="utf-8") as f:
            try:
                loaded = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{config}:{e.lineno}:{e.colno}: not a JSON config: {e.msg}") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"{config}: a Hugging Face config.json holds one object, not {type(loaded).__name__}")
        c = loaded
    kind = str(c.get("model_type", "llama"))
    # (a config.json without the coefficient gets its class's default, above 0: Qwen3-MoE's and Mixtral's 0.001)
    router_loss = bool(c.get("output_router_logits")) and c.get("router_aux_loss_coef", 0.001) != 0
    if kind not in KNOWN:
        return replace(_counted_by_the_runtime(c, kind), router_loss=router_loss)

    def need(key: str, *aliases: str) -> int:
        for k in (key, *aliases):
            if k in c:
                return int(c[k])
        raise ValueError(f"the {kind} config has no {key!r}")

    hidden, heads = need("hidden_size"), need("num_attention_heads")
    layers = need("num_hidden_layers")
    experts, top_k, expert_inner, sparse = 0, 0, 0, 0
    if kind == "mixtral":
        experts, top_k = need("num_local_experts", "num_experts"), need("num_experts_per_tok")
        expert_inner, sparse = need("intermediate_size"), layers
    elif kind == "qwen3_moe":
        experts, top_k = need("num_experts", "num_local_experts"), need("num_experts_per_tok")
        expert_inner = need("moe_intermediate_size")
        step, dense_only = int(c.get("decoder_sparse_step", 1)), set(c.get("mlp_only_layers") or [])
        sparse = sum(1 for i in range(layers) if i not in dense_only and step > 0 and (i + 1) % step == 0)
    return ModelShape(
        model_type=kind, vocab=need("vocab_size"), hidden=hidden, layers=layers, heads=heads,
        kv_heads=int(c.get("num_key_value_heads") or heads), head_dim=int(c.get("head_dim") or hidden // heads),
        intermediate=need("intermediate_size") if sparse < layers else int(c.get("intermediate_size", 0)),
        tied=bool(c.get("tie_word_embeddings", False)),
        qkv_bias=kind == "qwen2" or bool(c.get("attention_bias", False)), qk_norm=kind in ("qwen3", "qwen3_moe"),
        experts=experts, top_k=top_k, expert_intermediate=expert_inner, sparse_layers=sparse, router_loss=router_loss)


def _counted_by_the_runtime(config: dict[str, Any], kind: str) -> ModelShape:
    """Another model_type's shape, counted from the model itself by the runtime (parallel.compose.model_shape, found
    through the `strategy.model_shapes` entry point so that this package never imports torch)."""
    from importlib.metadata import entry_points

    problem = "the runtime is not installed"
    for entry in entry_points(group="strategy.model_shapes"):
        try:
            count = entry.load()
        except ImportError as e:  # (torch or transformers missing)
            problem = f"the runtime's {entry.name} counter cannot load: {e}"
            continue
        return count(config)  # type: ignore[no-any-return]
    raise ValueError(f"model_type {kind!r}: the memory model reads {', '.join(KNOWN)} from their config and counts any "
                     f"other causal LM from the model itself, but {problem}; install it with transformers "
                     "(pip install 'distributed-strategy[hf]')")
