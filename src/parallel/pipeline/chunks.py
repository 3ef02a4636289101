"""What one pipeline chunk runs: the model's own modules between two cuts, fed by the previous chunk's output.

A Hugging Face causal LM runs its own forward on every stage, so whatever it does around its layers stays its own:
the embedding's scale, per-layer-type masks and rotary embeddings, the final norm, logit scales and softcapping.
Other stages' layers are hollow (they pass the hidden states on); the stage's input enters at its first layer, and a
stage that is not the last stops after its last layer. Any other model follows torchtitan's convention: its forward(x)
runs the modules it still holds (the embedding when present, else x is the hidden state; the blocks that are not
None; the head when present).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..blocks import STAND_IN
from .layer_chain import LayerChain

__all__ = ["HuggingFaceChunk", "ModelChunk", "chunk_for", "is_hugging_face_causal_lm"]


def is_hugging_face_causal_lm(model: nn.Module) -> bool:
    """A transformers causal LM, by its class's name (`...ForCausalLM`): transformers' convention for the classes whose
    forward takes input ids or embeddings and returns an output with `.logits`."""
    return getattr(model, "config", None) is not None and type(model).__name__.endswith("ForCausalLM")


class _StageDone(Exception):
    """Raised by the stand-in after a stage's last layer: the hidden states the next stage receives."""

    def __init__(self, hidden: Any) -> None:
        super().__init__("pipeline stage output")
        self.hidden = hidden


class _StandIn(nn.Module):
    """Another stage's layer, as the model's forward sees it: no parameters, the layer's plain attributes (layer types,
    indices some forwards read), and one job: pass the hidden states on, hand in the stage's input, or end the stage."""

    def __init__(self, attributes: dict[str, Any], chunk: HuggingFaceChunk, role: str, returns_tuple: int) -> None:
        super().__init__()
        for name, value in attributes.items():
            setattr(self, name, value)
        object.__setattr__(self, "_chunk", chunk)
        self.role, self.returns_tuple = role, returns_tuple
        setattr(self, STAND_IN, True)  # not a block of this stage (blocks.block_names)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        hidden = args[0] if args else kwargs["hidden_states"]
        if self.role == "input":
            chunk: Any = self._chunk
            hidden = chunk.stage_input
        elif self.role == "stop":
            raise _StageDone(hidden)
        # A tuple as long as the layer's own (the model unpacks it): the hidden states, then nothing (attention weights).
        return (hidden,) + (None,) * (self.returns_tuple - 1) if self.returns_tuple else hidden


class HuggingFaceChunk(nn.Module):
    """A stage of a Hugging Face causal LM: input ids (first stage) or hidden states in, hidden states or logits (last
    stage) out, by the model's own forward (see the module docstring). Registered under the model's own names."""

    def __init__(self, pruned: nn.Module, chain: LayerChain, keep: range, first: bool, last: bool,
                 sequence_split: int = 1) -> None:
        super().__init__()
        blocks: Any = pruned.get_submodule(chain.blocks)
        for i in range(len(blocks)):
            if i in keep:
                continue
            role = "input" if i == keep.start - 1 and not first else "stop" if i == keep.stop and not last else "pass"
            blocks._modules[str(i)] = _StandIn(chain.attributes[i], self, role, chain.returns_tuple)
        for name, child in pruned.named_children():
            self.add_module(name, child)
        object.__setattr__(self, "_pruned", pruned)
        self.first, self.sequence_split = first, sequence_split
        self.hidden_size = chain.hidden_size
        self.stage_input: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pruned: Any = self._pruned
        if self.first:
            kwargs: dict[str, Any] = {"input_ids": x}
        else:
            # The layers before this stage's are stand-ins: what they are fed is never used; only its shape (the
            # masks and positions the model makes from it) matters. Under sequence parallelism x is this mp rank's
            # part of the sequence.
            self.stage_input = x
            shape = (x.shape[0], x.shape[1] * self.sequence_split, self.hidden_size)
            kwargs = {"inputs_embeds": torch.zeros(shape, dtype=x.dtype, device=x.device)}
        try:
            # Its forward, not its hooks: the whole model's hooks (need_broadcast_data's input broadcast) belong to a
            # whole-model call; the pipeline broadcasts each stage's inputs itself.
            out = pruned.forward(**kwargs, use_cache=False)
        except _StageDone as done:
            return done.hidden
        finally:
            self.stage_input = None
        return out.logits


class ModelChunk(nn.Module):
    """A pruned model of one's own, run by its forward (torchtitan's convention; see the module docstring)."""

    def __init__(self, pruned: nn.Module) -> None:
        super().__init__()
        # Its children, not the model itself, so the names are the whole model's.
        for name, child in pruned.named_children():
            self.add_module(name, child)
        object.__setattr__(self, "_pruned", pruned)

    def forward(self, x: Any) -> Any:
        pruned: Any = self._pruned
        return pruned.forward(x)


def chunk_for(pruned: nn.Module, chain: LayerChain | None, keep: range, first: bool, last: bool,
              sequence_split: int = 1) -> nn.Module:
    """The module a PipelineStage runs for one chunk: the model's own forward (Hugging Face), or ModelChunk."""
    if chain is None:
        return ModelChunk(pruned)
    return HuggingFaceChunk(pruned, chain, keep, first, last, sequence_split)
