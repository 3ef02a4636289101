"""The memory model's shape of any causal LM that transformers builds: its weights counted from the model itself (built
on the meta device from its config, so nothing is allocated) and split as parallelize splits them.

`strategy plan` and `strategy.estimate_memory` read the Llama family's shapes from a config alone (the strategy
package never imports torch); for every other `model_type` they find this function through the
`strategy.model_shapes` entry point. The weights, their count per layer and how mp and ep split them are exact (the
model's own parameters under its own Hugging Face plan: column, row and vocabulary splits; experts over ep; norms kept
in fp32 under pure amp); the activations keep the terms measured on Llama, Qwen2 and Qwen3-MoE, fed this model's
widths.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

from strategy.planning.shapes import ModelShape, Part

from ..blocks import block_names
from .plan import COLUMN, ROW, hugging_face_plan

__all__ = ["shape_from_config", "shape_of"]

_LAYER = re.compile(r"^(?P<prefix>.*?)\.(?P<index>\d+)\.(?P<rest>.+)$")


def shape_from_config(config: Mapping[str, Any]) -> ModelShape:
    """The shape of the causal LM a Hugging Face config's dict describes (strategy.planning.shapes.model_shape reads
    a config.json and hands any model_type it does not read itself here).

    Raises:
        ValueError: transformers has no causal LM of this `model_type` (naming it and the fix).
    """
    import transformers

    c = dict(config)
    kind = str(c.get("model_type", ""))
    try:
        hf_config = transformers.AutoConfig.for_model(**c)
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(hf_config)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0].split(". Should contain")[0][:200]
        raise ValueError(f"model_type {kind!r}: transformers {transformers.__version__} builds no causal LM of this "
                         f"config ({first}); plan a model whose config.json AutoModelForCausalLM.from_config "
                         "takes") from None
    return shape_of(model)


def shape_of(model: Any) -> ModelShape:
    """The shape of `model` (a Hugging Face causal LM; any device, meta included): every weight as a `Part`."""
    config: Any = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    blocks = block_names(model)
    if not blocks:
        raise ValueError(f"{type(model).__name__} has no decoder layers parallelize can find (no _no_split_modules, "
                         "no ModuleList); the memory model counts a model by its layers")
    rules = list(hugging_face_plan(model).items())
    styles = {name: next((s for p, s in rules if fnmatch.fnmatchcase(name, p)), "")
              for name, _ in model.named_modules()}
    embedding = model.get_input_embeddings()
    embedding_params = {id(p) for p in embedding.parameters()} if embedding is not None else set()
    head = model.get_output_embeddings()
    tied = head is not None and embedding is not None and head.weight is embedding.weight
    block_of = {name: i for i, name in enumerate(blocks)}
    per_layer: dict[tuple[str, int, str, bool, bool], set[int]] = {}
    parts: list[Part] = []
    sparse: set[int] = set()
    experts, expert_inner = 0, 0
    before_layers = True
    counted: set[int] = set()  # a weight two modules share (a tied head) is one parameter, counted where first met
    for module_name, module in model.named_modules():
        block = next((block_of[b] for b in _owners(module_name) if b in block_of), None)
        if block is not None:
            before_layers = False
        for pname, p in module.named_parameters(recurse=False):
            if id(p) in counted:
                continue
            counted.add(id(p))
            name = f"{module_name}.{pname}" if module_name else pname
            style = styles.get(module_name, "")
            mp = ("vocab" if style == "embedding_rowwise" else "column" if style in COLUMN
                  else "row" if style in ROW and pname == "weight" else "")
            is_expert = p.dim() == 3 or ".experts." in f".{name}"
            norm = "norm" in type(module).__name__.lower()
            if is_expert and p.dim() == 3:
                experts, expert_inner = p.shape[0], expert_inner or min(p.shape[1:])
            if block is not None:
                if is_expert:
                    sparse.add(block)
                m = _LAYER.match(name)
                key = (f"{m['prefix']}.*.{m['rest']}" if m else name, p.numel(), mp, is_expert, norm)
                per_layer.setdefault(key, set()).add(block)
            else:
                where = "embed" if id(p) in embedding_params else "first" if before_layers else "head"
                parts.append(Part(name, p.numel(), mp, is_expert, where, norm=norm))
    parts += [Part(name, numel, mp, expert, "layer", len(layers), norm, tuple(sorted(layers)))
              for (name, numel, mp, expert, norm), layers in per_layer.items()]
    hidden = int(config.hidden_size)
    heads = _width(config, "num_attention_heads", 1)
    return ModelShape(
        model_type=str(config.model_type), vocab=int(config.vocab_size), hidden=hidden, layers=len(blocks),
        heads=heads, kv_heads=_width(config, "num_key_value_heads", heads),
        head_dim=_width(config, "head_dim", hidden // heads), intermediate=_width(config, "intermediate_size", 4 * hidden),
        tied=tied, qkv_bias=bool(_width(config, "attention_bias", 0)),
        qk_norm=any(n.endswith(("q_norm", "q_layernorm")) for n, _ in model.named_modules()),
        experts=experts if sparse else 0, top_k=_top_k(config) if sparse else 0,
        expert_intermediate=_width(config, "moe_intermediate_size", expert_inner) if sparse else 0,
        sparse_layers=len(sparse), attention_scores=_eager_scores(model, heads, hidden // heads),
        counted=tuple(parts))


def _eager_scores(model: nn.Module, heads: int, head_dim: int, s: int = 64) -> float:
    """The s×s tensors per head (fp32 units) the model's own eager attention saves for backward, found by running it
    once on meta tensors; 0 when the model runs a fused kernel (or has no eager function of its own to run)."""
    if getattr(model.config, "_attn_implementation", "eager") != "eager":
        return 0.0
    attention = next((m for n, m in model.named_modules() if n.endswith("self_attn")), None)
    eager = getattr(sys.modules.get(type(attention).__module__), "eager_attention_forward", None)
    if attention is None or eager is None:
        return 1.0  # a softmax over the scores, at least
    d = int(getattr(attention, "head_dim", None) or head_dim)
    kv = heads // int(getattr(attention, "num_key_value_groups", 1) or 1)
    q, k, v = (torch.zeros(1, n, s, d, device="meta", requires_grad=True) for n in (heads, kv, kv))
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.numel() >= heads * s * s:
            saved[t.untyped_storage()._cdata] = t.untyped_storage().nbytes()
        return t

    try:
        with saved_tensors_hooks(pack, lambda t: t):
            eager(attention, q, k, v, torch.zeros(1, 1, s, s, device="meta"), scaling=d**-0.5, dropout=0.0)
    except Exception:  # noqa: BLE001 - an eager function of another signature: a softmax over the scores, at least
        return 1.0
    return sum(saved.values()) / (heads * s * s * 4)


def _width(config: Any, key: str, default: int) -> int:
    """config.`key` as an int, or `default` where the config has none (or one per layer: Gemma 4's head_dim)."""
    try:
        value = getattr(config, key, None)
    except Exception:  # noqa: BLE001 - transformers' per-layer configs raise their own error for a global read
        return default
    return int(value) if isinstance(value, (int, float)) and value else default


def _owners(module_name: str) -> list[str]:
    """`module_name` and every module above it ("a.b.c": "a.b.c", "a.b", "a")."""
    pieces = module_name.split(".")
    return [".".join(pieces[:k]) for k in range(len(pieces), 0, -1)]


def _top_k(config: Any) -> int:
    for key in ("num_experts_per_tok", "moe_topk", "top_k", "experts_per_token", "num_experts_per_token"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return 1
