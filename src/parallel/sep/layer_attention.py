"""A Hugging Face attention layer as its model defines it, for the sequence axes: which positions it sees (its layer
type's mask: causal, a sliding window, chunks) and the model's own attention function (which applies its scaling,
softcapping and sinks), so sep and cp can run that function over positions of their own.

Masks come from transformers' own mask functions (`masking_utils`), evaluated at the global positions a rank's queries
and keys hold; nothing is re-derived here but which function a layer type names.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

__all__ = ["ATTENTION_TYPES", "LayerAttention", "as_mask", "layer_attention", "own_function"]

# The layer types whose token mixing is attention with a mask this module builds.
ATTENTION_TYPES = ("full_attention", "sliding_attention", "chunked_attention")


@dataclasses.dataclass(frozen=True)
class LayerAttention:
    """One attention call's mask: causal, with a sliding window of `window` positions or chunks of `chunk`."""

    causal: bool = True
    window: int | None = None
    chunk: int | None = None

    @property
    def plain(self) -> bool:
        """Causal over every earlier position: what the sequence axes' fast kernels compute."""
        return self.causal and self.window is None and self.chunk is None

    def allowed(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """`[len(q_pos), len(k_pos)]` booleans: which keys each query attends to, by transformers' mask functions."""
        from transformers import masking_utils as mu

        if not self.causal:
            fn: Callable[..., Any] = mu.bidirectional_mask_function
        elif self.window is not None:
            fn = mu.sliding_window_causal_mask_function(self.window)
        elif self.chunk is not None:
            fn = mu.chunked_causal_mask_function(self.chunk, torch.zeros(1, dtype=torch.long, device=q_pos.device))
        else:
            fn = mu.causal_mask_function
        zero = torch.zeros((), dtype=torch.long, device=q_pos.device)
        out = fn(zero, zero, q_pos[:, None], k_pos[None, :])
        return torch.as_tensor(out, device=q_pos.device).expand(len(q_pos), len(k_pos))


def layer_attention(module: nn.Module, kwargs: dict[str, Any], is_causal: bool | None) -> LayerAttention:
    """The mask of one attention call of `module`: its layer type (config.layer_types at its layer_idx, or its own
    `layer_type`), the window it hands its attention function or, without layer types, its config's (Mistral's and
    PhiMoE's kind), the model's chunk size. An unknown layer type is refused before anything changes (`compose` checks config.layer_types)."""
    config: Any = getattr(module, "config", None)
    types = getattr(config, "layer_types", None)
    index = getattr(module, "layer_idx", None)
    kind = types[index] if types and isinstance(index, int) and index < len(types) else getattr(module, "layer_type", None)
    window = kwargs.get("sliding_window")
    if not types and window is None and getattr(config, "use_sliding_window", True):
        window = getattr(config, "sliding_window", None)  # (Mistral's kind: one window for every layer, from the config)
    if kind == "sliding_attention" and window is None:
        window = getattr(module, "sliding_window", None) or getattr(config, "sliding_window", None)
    if kind == "chunked_attention":
        return LayerAttention(chunk=int(config.attention_chunk_size))
    if kind == "full_attention" and not isinstance(getattr(module, "sliding_window", None), int):
        window = None  # (Mistral's kind passes its config's window to every layer; a full layer of a typed model has none)
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    return LayerAttention(causal=bool(causal), window=int(window) if window else None)


def own_function(module: nn.Module, implementation: str) -> Callable[..., tuple[torch.Tensor, Any]]:
    """The attention function `module` calls under `implementation`: transformers' registered one (sdpa), or the
    eager function of the module's own file (eager, and kernels this machine cannot run, whose math it shares)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if implementation == "sdpa":
        return ALL_ATTENTION_FUNCTIONS["sdpa"]
    eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if eager is None:
        raise RuntimeError(f"{type(module).__name__}'s file has no eager_attention_forward")
    return eager


def as_mask(allowed: torch.Tensor, function: Callable[..., Any], dtype: torch.dtype) -> torch.Tensor:
    """`[1, 1, q, k]` in the form `function` takes: booleans for SDPA, an additive float mask for eager functions."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if function is ALL_ATTENTION_FUNCTIONS["sdpa"]:
        return allowed[None, None]
    zero = torch.zeros((), dtype=dtype, device=allowed.device)
    return torch.where(allowed, zero, torch.finfo(dtype).min)[None, None]
