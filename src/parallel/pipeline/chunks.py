"""What one pipeline chunk runs: the model's own modules between two cuts, fed by the previous chunk's output.

Hugging Face decoders (LlamaForCausalLM's layout: model.embed_tokens, model.layers, model.norm, model.rotary_emb,
lm_head) run their own modules in their own order, with the causal mask and rotary embeddings each chunk makes
from its input's shape. Any other model follows torchtitan's convention: its forward(x) runs the modules it still
holds (the embedding when present, else x is the hidden state; the blocks that are not None; the head when present).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch
from torch import nn

from strategy import StrategyError

__all__ = ["HuggingFaceChunk", "ModelChunk", "causal_mask", "chunk_for", "is_hugging_face_decoder"]


def is_hugging_face_decoder(model: nn.Module) -> bool:
    inner = getattr(model, "model", None)
    return (getattr(model, "config", None) is not None and hasattr(model, "lm_head") and inner is not None
            and all(hasattr(inner, name) for name in ("embed_tokens", "layers", "norm", "rotary_emb")))


def causal_mask(config: Any, h: torch.Tensor, positions: torch.Tensor) -> Any:
    """transformers' causal mask for hidden states `h` with no cache and no padding, as the model itself makes it.

    The cache argument was `past_key_values` through 5.23 and is `cache` from 5.24 (5.24's signature shows only the
    new name): the name is read from the signature of the version installed.
    """
    from transformers.masking_utils import create_causal_mask

    return create_causal_mask(config=config, inputs_embeds=h, attention_mask=None, position_ids=positions,
                              **{_cache_argument(create_causal_mask): None})


@functools.cache
def _cache_argument(create_causal_mask: Any) -> str:
    return "cache" if "cache" in inspect.signature(create_causal_mask).parameters else "past_key_values"


class HuggingFaceChunk(nn.Module):
    """Runs a pruned Hugging Face decoder's remaining modules: input ids (first chunk) or hidden states in, hidden
    states or logits (last chunk) out. Registered under the decoder's own names, so parameters keep theirs."""

    def __init__(self, pruned: nn.Module) -> None:
        super().__init__()
        self.model = pruned.model
        self.lm_head = pruned.lm_head
        self.config = pruned.config

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner: Any = self.model
        h = inner.embed_tokens(x) if inner.embed_tokens is not None else x
        positions = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
        # The mask and the rotary embeddings depend only on the shape: every chunk makes its own, nothing travels.
        mask = causal_mask(self.config, h, positions)
        rotary = inner.rotary_emb(h, position_ids=positions)
        for layer in inner.layers:
            if layer is not None:
                h = layer(h, attention_mask=mask, position_embeddings=rotary, position_ids=positions)
        if inner.norm is not None:
            h = inner.norm(h)
        head: Any = self.lm_head
        return head(h) if head is not None else h


class ModelChunk(nn.Module):
    """A pruned model of one's own, run by its forward (torchtitan's convention; see the module docstring)."""

    def __init__(self, pruned: nn.Module) -> None:
        super().__init__()
        # Its children, not the model itself, so the names are the whole model's.
        for name, child in pruned.named_children():
            self.add_module(name, child)
        object.__setattr__(self, "_pruned", pruned)

    def forward(self, x: Any) -> Any:
        # Its forward, not its hooks: the whole model's hooks (need_broadcast_data's input broadcast) belong to a
        # whole-model call; the pipeline broadcasts each stage's inputs itself.
        pruned: Any = self._pruned
        return pruned.forward(x)


def chunk_for(pruned: nn.Module) -> nn.Module:
    if is_hugging_face_decoder(pruned):
        return HuggingFaceChunk(pruned)
    if getattr(pruned, "config", None) is not None and hasattr(pruned, "_no_split_modules"):
        raise StrategyError(
            f"pipelining a {type(pruned).__name__} is not supported: Hugging Face decoders with LlamaForCausalLM's "
            "layout are (model.embed_tokens, model.layers, model.norm, model.rotary_emb, lm_head)",
            field="hybrid_configs.pp_degree")
    return ModelChunk(pruned)
