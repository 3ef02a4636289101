"""Whether a Hugging Face causal LM's layers form a chain a pipeline can cut, found by watching its own forward once.

A stage passes one tensor on: the hidden states. That is enough only when each layer's input is the previous layer's
output and nothing else travels between them (no second stream, no state kept across layers, no layer called twice).
The forward on a few tokens, before anything changes, shows it; it also shows what a layer returns (a tensor or a
tuple), which the stand-ins for other stages' layers must return too.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from strategy import StrategyError

from .split import FIELD

__all__ = ["LayerChain", "layer_chain"]

PROBE_TOKENS = 4


@dataclasses.dataclass(frozen=True)
class LayerChain:
    """What the stand-ins of a cut Hugging Face model need to know of its layers."""

    blocks: str  # the ModuleList's qualified name
    hidden_size: int  # the last dimension of the hidden states between layers
    returns_tuple: int  # a layer returns a tuple of this length, (hidden_states, ...), rather than the tensor (0)
    attributes: tuple[dict[str, Any], ...]  # each layer's plain attributes (layer types, indices its model reads)


def layer_chain(model: nn.Module, blocks: str, before: tuple[str, ...] = (), after: tuple[str, ...] = ()) -> LayerChain:
    """Run `model` once on a few tokens (no gradients, eval mode, its random streams left as they were) and check its
    layers form a chain of hidden states, fed by nothing an end stage alone holds: of the modules with parameters
    registered before the blocks (`before`, the first stage's) only the input embedding runs, and those after them
    (`after`, the last stage's) run after the last layer. Raises StrategyError naming the architecture and what breaks
    the chain."""
    container: Any = model.get_submodule(blocks)
    layers: list[nn.Module] = list(container)
    calls: list[list[Any]] = []
    owner: Any = model
    embedding = owner.get_input_embeddings() if hasattr(owner, "get_input_embeddings") else None
    fed: list[str] = []
    ids = torch.zeros(1, PROBE_TOKENS, dtype=torch.long, device=next(model.parameters()).device)
    clock = _Clock()

    def used(name: str, first: bool):  # a hook noting an end's module the layers depend on
        return lambda *_: fed.append(name) if first or len(calls) < len(layers) or len(calls[-1]) < 4 else None

    handles = [model.get_submodule(n).register_forward_hook(used(n, True)) for n in before
               if model.get_submodule(n) is not embedding]
    handles += [model.get_submodule(n).register_forward_hook(used(n, False)) for n in after]
    for i, layer in enumerate(layers):
        def enter(module: nn.Module, args: tuple, kwargs: dict, i: int = i) -> None:
            calls.append([i, args[0] if args else kwargs.get("hidden_states"), [*args[1:], *kwargs.values()]])
            if i == 0:
                clock.started = clock.count
            if any(v is ids for v in (*args, *kwargs.values())):
                fed.append("the input ids (its layers read them: hash routing, ...)")

        def leave(module: nn.Module, args: tuple, kwargs: dict, out: Any) -> None:
            calls[-1].append(out)

        handles += [layer.register_forward_pre_hook(enter, with_kwargs=True),
                    layer.register_forward_hook(leave, with_kwargs=True)]
    with clock:
        _run_once(model, ids, handles)
    problem = _break_in(calls, len(layers), clock.made, clock.started) or (
        f"its forward feeds them from {fed[0]} too, which only one end stage holds" if fed else "")
    if problem:
        raise StrategyError(
            f"{FIELD} > 1 cuts {type(model).__name__}'s layers ({blocks}) into stages that hand each other only the "
            f"hidden states, but {problem}; set pp_degree: 1 for this architecture", field=FIELD)
    out = calls[0][3]
    first = out[0] if isinstance(out, tuple) else out
    return LayerChain(blocks, int(first.shape[-1]), len(out) if isinstance(out, tuple) else 0,
                      tuple(_plain(m) for m in layers))


class _Clock(TorchFunctionMode):
    """When each tensor of the probe's forward was made, as a count of torch calls (the tensors kept until it ends, so
    no id is reused)."""

    def __init__(self) -> None:
        super().__init__()
        self.count, self.started = 0, -1
        self.made: dict[int, int] = {}
        self.kept: list[torch.Tensor] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.count += 1
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.made.setdefault(id(t), self.count)
                self.kept.append(t)
        return out


def _run_once(model: nn.Module, ids: torch.Tensor, handles: list) -> None:
    modes = {m: m.training for m in model.modules()}
    devices = [ids.device] if ids.device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            model.eval()
            model(input_ids=ids, use_cache=False)
    except Exception as e:  # a forward that cannot run here cannot run in stages either
        raise StrategyError(f"{FIELD} > 1: {type(model).__name__}'s forward on {PROBE_TOKENS} tokens, run to see how its "
                            f"layers chain before anything changes, failed ({type(e).__name__}: {e}); set pp_degree: 1 "
                            "for this architecture", field=FIELD) from e
    finally:
        for m, mode in modes.items():
            m.training = mode
        for handle in handles:
            handle.remove()


def _break_in(calls: list[list[Any]], count: int, made: dict[int, int], first: int) -> str:
    """What breaks the chain, in words; "" when nothing does. `made`: when (a count of torch calls) each tensor of the
    forward was made; `first`: the count when layer 0 began."""
    order = [c[0] for c in calls]
    if order != list(range(count)):
        return f"its forward calls them in the order {order[:12]}, not each once in turn"
    previous = None
    for i, hidden, others, out in calls:
        tensor = out[0] if isinstance(out, tuple) and out else out
        if not isinstance(tensor, torch.Tensor):
            return f"layer {i} returns {type(out).__name__}, not the hidden states"
        if previous is not None and hidden is not previous:
            return f"layer {i}'s input is not layer {i - 1}'s output (the model changes it between layers)"
        if i and any(isinstance(o, torch.Tensor) and made.get(id(o), -1) > first for o in others):
            return (f"layer {i} takes a tensor besides the hidden states that was made after layer 0 began (a second "
                    "stream between layers)")
        previous = tensor
    return ""


def _plain(layer: nn.Module) -> dict[str, Any]:
    """The layer's attributes that are neither modules, parameters, buffers nor torch's own bookkeeping (its class's
    properties' values too: a model may read `layer.attention_type` from one)."""
    found: dict[str, Any] = {}
    for k, v in vars(type(layer)).items():
        if isinstance(v, property):
            try:
                found[k] = getattr(layer, k)
            except Exception:  # noqa: BLE001 - a property this layer cannot answer is not one its model reads
                pass
    found.update(vars(layer))
    return {k: v for k, v in found.items() if not k.startswith("_") and k != "training"
            and not isinstance(v, (nn.Module, torch.Tensor))}
