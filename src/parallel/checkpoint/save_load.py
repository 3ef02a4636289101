"""Checkpoints with torch.distributed.checkpoint (DCP): save, resume, reshard across mp and dp degrees.

Parameters go to DCP as DTensors over the hybrid mesh — Shard(dim) over "mp" for split ones, Replicate
elsewhere — so DCP records global shapes and reshards on load. A save is written into a hidden directory
beside the target and renamed over it once every rank has finished: a killed save leaves the previous
checkpoint whole, and a directory without our marker file is never taken for a checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn

import strategy
from strategy.atomic import replace_directory, restore_interrupted

from ..tensor.shards import SHARD_DIM
from .optimizer_view import Optimizer, OptimizerView
from .placements import as_global
from ..topology.groups import AXES, HybridGroup, current
from ..topology.guard import guard
from ..topology.tied_mark import tied_copy

__all__ = ["MARKER", "Checkpoint", "PendingSave", "begin_save", "full_state_dict", "load", "save"]

MARKER = "checkpoint.json"  # written last, by rank 0: a directory holding it is a finished checkpoint
FORMAT = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """What `load` found besides the tensors.

    Attributes:
        step, extra: what `save` was given.
        strategy: the saved run's resolved strategy, in text format.
        layout: the saved run's degree on each axis and its world size, {"dp": 2, "pp": 1, ..., "mp": 2, "world_size": 4}.
        resharded: "mp 2 -> 4" and the like when the layout changed, else None.
    """

    step: int | None
    extra: Any
    strategy: str
    layout: dict[str, int]
    resharded: str | None = None


# -- state dicts as DTensors ----------------------------------------------------------------------------
def _model_state(model: nn.Module, hcg: HybridGroup) -> dict[str, Any]:
    """The model's tensors as DTensors; a tied weight once, under its first name (the embedding's), as its optimizer
    state is: its other names (`_aliases`) hold the same tensor."""
    params = dict(model.named_parameters(remove_duplicate=False))
    aliases = _aliases(model)
    out: dict[str, Any] = {}
    for name, t in model.state_dict().items():  # (the last stage's copy of a weight tied across stages: its first name)
        out.setdefault(aliases.get(name, name), as_global(t.detach(), params.get(name), hcg))
    return out


def _aliases(model: nn.Module) -> dict[str, str]:
    """Each other name of a tied weight (`lm_head.weight`), with the name it is saved under (`model.embed_tokens.weight`,
    the one `named_parameters()` gives, or under a pipeline the first stage's name of it: pipeline/tied.py)."""
    first = {id(p): _first_name(n, p) for n, p in model.named_parameters()}
    return {n: first[id(p)] for n, p in model.named_parameters(remove_duplicate=False) if first[id(p)] != n}


def _first_name(name: str, p: torch.Tensor) -> str:
    copy = tied_copy(p)
    return copy.key if copy is not None else name


def _optimizer_state(optimizer: OptimizerView, model: nn.Module, hcg: HybridGroup) -> dict[str, Any]:
    """The optimizer's tensors by parameter name: moments laid out like their parameter, fp32 masters too."""
    out: dict[str, Any] = {}
    for name, p in model.named_parameters():
        name = _first_name(name, p)  # (the last stage's copy of a weight tied across stages: Adam's state once)
        owner = optimizer.stepped(p)
        for key, value in optimizer.inner.state.get(owner, {}).items():
            if not torch.is_tensor(value):
                continue
            shaped = value.shape == owner.shape and value.dim() > 0
            if not shaped and value.dim() > 0 and getattr(p, SHARD_DIM, None) is not None and hcg.mp_size > 1:
                # Per-shard state of another shape (Adafactor's row/column factors) differs across mp ranks:
                # saved as if replicated it would come back as one rank's values.
                raise ValueError(f"optimizer state {name}.{key} of shape {list(value.shape)} is not shaped like its "
                                 f"sharded parameter {list(owner.shape)}: it cannot be checkpointed across mp ranks")
            out[f"state.{name}.{key}"] = as_global(value, p, hcg) if shaped else value
        master = optimizer.master(p)
        if master is not None:
            out[f"master.{name}"] = as_global(master.detach(), p, hcg)
    return out


def _param_groups(optimizer: OptimizerView, model: nn.Module) -> list[dict[str, Any]]:
    """Hyperparameters of each group, parameters named (JSON: the same on every rank)."""
    names = {id(optimizer.stepped(p)): n for n, p in model.named_parameters()}
    groups = []
    for g in optimizer.inner.param_groups:
        hyper = {k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items() if k != "params"}
        groups.append({**json.loads(json.dumps(hyper, default=str)), "params": [names.get(id(p), "?") for p in g["params"]]})
    return groups


# -- save -------------------------------------------------------------------------------------------------
def save(path: str | os.PathLike[str], model: nn.Module, optimizer: Optimizer | None = None, *, step: int | None = None,
         extra: Any = None, hcg: HybridGroup | None = None) -> Path:
    """Every rank writes its shards of `model` (and `optimizer`'s state) into the directory `path`, collectively.

    Atomic: written into a hidden `.NAME.partial-*` directory beside `path`, renamed over it when every rank
    has finished. `step` and `extra` (JSON-serialisable) and the resolved strategy are saved with it.

    Example::

        parallel.save("ckpt/step_1000", model, opt, step=1000)
    """
    hcg = hcg or current()
    pending = begin_save(path, model, optimizer, step=step, extra=extra, hcg=hcg)
    dcp.save(pending.state, checkpoint_id=str(pending.partial))
    dist.barrier()  # every rank's shards are on disk
    pending.commit()
    dist.barrier()
    return pending.target


@dataclass(slots=True)
class PendingSave:
    """A save whose directory is made and whose record is taken, its tensors not yet written: `state` goes to DCP
    (at once, or in the background), then rank 0 `commit`s once every rank's shards are on disk."""

    target: Path
    partial: Path
    state: dict[str, Any]
    meta: dict[str, Any] | None  # rank 0's: the marker's contents

    def commit(self) -> None:
        """Rank 0: write the marker, then rename the directory into place (the previous one goes only after)."""
        if self.meta is not None:
            _write_marker(self.partial / MARKER, self.meta)
            replace_directory(self.partial, self.target)


def begin_save(path: str | os.PathLike[str], model: nn.Module, optimizer: Optimizer | None = None, *,
               step: int | None = None,
               extra: Any = None, hcg: HybridGroup, rank_state: dict[str, Any] | None = None) -> PendingSave:
    """Collectively: the partial directory made, this rank's `rank_state` written into it (rank_state.py), the state
    dict of DTensors (sharing the live tensors' storage) and rank 0's record of the rest taken now."""
    target = Path(path).absolute()
    json.dumps(extra)  # fail before writing anything, on every rank alike
    box = [target.parent / f".{target.name}.partial-{uuid.uuid4().hex[:12]}"]
    dist.broadcast_object_list(box, src=0)  # rank 0's name, on every rank
    partial = box[0]
    if hcg.rank == 0:
        restore_interrupted(target, whole=_finished)
        _remove_stale_partials(target)
        partial.mkdir(parents=True)
    dist.barrier()
    if rank_state is not None:
        from . import rank_state as per_rank

        per_rank.write(partial, hcg.rank, rank_state)
    state: dict[str, Any] = {"model": _model_state(model, hcg)}
    view = OptimizerView(optimizer) if optimizer is not None else None
    if view is not None:
        state["optimizer"] = _optimizer_state(view, model, hcg)
    meta = None
    if hcg.rank == 0:
        meta = {
            "format": FORMAT, "step": step, "extra": extra,
            "strategy": _strategy_text(hcg), "layout": _layout(hcg),
            "param_groups": _param_groups(view, model) if view is not None else None,
            "optimizer_extra": view.extra_state() if view is not None else None,
            "rank_state": rank_state is not None,
        }
    return PendingSave(target, partial, state, meta)


def _remove_stale_partials(target: Path) -> None:
    """Debris of saves that were killed: never a checkpoint (no marker), removed before the next one."""
    for stale in target.parent.glob(f".{target.name}.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)


def _write_marker(path: Path, meta: dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump(meta, f, indent=2)
        f.flush()
        os.fsync(f.fileno())


def _finished(directory: Path) -> bool:
    """A checkpoint directory whose marker is in place (written last)."""
    return (directory / MARKER).is_file()


def _strategy_text(hcg: HybridGroup) -> str:
    s = strategy.DistributedStrategy()
    r = hcg.resolved
    for axis, degree in r.topology.degrees.items():
        setattr(s.hybrid_configs, f"{axis}_degree", degree)
    if r.order != AXES:
        s.hybrid_configs.order.extend(r.order)
    mp = s.hybrid_configs.mp_configs
    for field in strategy.MpConfig.DESCRIPTOR.fields:
        setting = field.name.removeprefix("mp_")
        if field.message_type is None and hasattr(r.mp, setting):
            setattr(mp, field.name, getattr(r.mp, setting))
    for pattern, style in r.tp_plan:
        rule = mp.tp_plan.add()
        rule.pattern, rule.style = pattern, style.upper()
    return str(strategy.dumps(s))


def describe_layout(layout: dict[str, int]) -> str:
    """"dp 1 x mp 2 (2 ranks)": dp, mp and every axis above 1 (a format-1 layout has only dp and mp)."""
    axes = " x ".join(f"{axis} {size}" for axis, size in layout.items()
                      if axis != "world_size" and (size > 1 or axis in ("dp", "mp")))
    return f"{axes} ({layout['world_size']} ranks)"


def _layout(hcg: HybridGroup) -> dict[str, int]:
    experts = {"ep": hcg.ep_size} if hcg.ep_size > 1 else {}  # only where experts are split: older layouts lack it
    return {**{axis: getattr(hcg, f"{axis}_size") for axis in AXES}, **experts, "world_size": hcg.world_size}


# -- load -------------------------------------------------------------------------------------------------
def load(path: str | os.PathLike[str], model: nn.Module, optimizer: Optimizer | None = None, *,
         hcg: HybridGroup | None = None) -> Checkpoint:
    """Load a checkpoint written by `save` into `model` (and `optimizer`), whatever the mp and dp degrees were
    at save time: DCP reshards. Says once when the layout changed.

    Raises:
        ValueError: not a checkpoint (or an unfinished one), or tensors that do not fit the model (a missing
            or unexpected key, a different global shape), each named; nothing is loaded then.
    """
    hcg = hcg or current()
    source = Path(path).absolute()
    if hcg.rank == 0:
        restore_interrupted(source, whole=_finished)
    dist.barrier()
    meta = read_marker(source)
    reader = dcp.FileSystemReader(str(source))
    saved = reader.read_metadata().state_dict_metadata
    state: dict[str, Any] = {"model": _model_state(model, hcg)}
    fresh: list[Any] = []
    view = OptimizerView(optimizer) if optimizer is not None else None
    if view is not None:
        if meta.get("param_groups") is None:
            raise ValueError(f"{source}: the checkpoint holds no optimizer state; load it without an optimizer")
        _check_groups(source, view, meta["param_groups"])
        fresh = _materialise_state(view)
        # A parameter that had no state when saved (never stepped, frozen, no gradient yet) gets none now either.
        state["optimizer"] = {k: v for k, v in _optimizer_state(view, model, hcg).items()
                              if not k.startswith("state.") or f"optimizer.{k}" in saved}
    try:
        _check_fits(source, state, saved, with_optimizer=view is not None, aliases=_aliases(model))
    except ValueError:
        if view is not None:
            _forget(view, fresh)
        raise
    dcp.load(state, checkpoint_id=str(source))  # fills the DTensors' local tensors: ours (they share storage)
    if view is not None:
        view.restored()  # masters feed their parameters
        _forget(view, [p for p in fresh if not _has_loaded_state(p, view, model, state["optimizer"])])
        _restore_hyperparameters(view, meta["param_groups"])
        if meta.get("optimizer_extra"):
            view.load_extra_state(meta["optimizer_extra"])  # the loss scaler, the gradient-merge position
    now = _layout(hcg)
    then = meta["layout"]
    changed = [f"{k} {then.get(k, 1)} -> {now.get(k, 1)}" for k in (*AXES, "ep")  # format 1 had dp and mp only
               if then.get(k, 1) != now.get(k, 1)]
    resharded = ", ".join(changed) or None
    if resharded and hcg.rank == 0:
        warnings.warn(f"{source}: saved with {describe_layout(then)}, loaded into {describe_layout(now)} ({resharded}): "
                      "resharded by DCP", stacklevel=2)
    return Checkpoint(step=meta["step"], extra=meta["extra"], strategy=meta["strategy"], layout=then, resharded=resharded)


def read_marker(source: Path) -> dict[str, Any]:
    """The checkpoint's own record; a clear error when `source` is not a finished checkpoint."""
    if not source.is_dir():
        raise ValueError(f"{source}: no such checkpoint directory")
    marker = source / MARKER
    if not marker.is_file() or not (source / ".metadata").is_file():
        raise ValueError(f"{source}: not a finished checkpoint (no {MARKER} or DCP .metadata): a save that did not "
                         "complete, or another directory")
    meta = json.loads(marker.read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{source}: checkpoint format {meta.get('format')!r}, this version reads {FORMAT}")
    return meta


def _flat(state: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in state.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def _check_fits(source: Path, state: dict[str, Any], saved: dict[str, Any], *, with_optimizer: bool,
                aliases: dict[str, str]) -> None:
    """Every key the model needs is saved with the same global shape, and nothing else is there: else no load.

    Every rank checks its own keys (pipeline stages hold different ones) and all raise the same error together. A tied
    weight's other name (`aliases`), which checkpoints before it was saved once held too, is no key of another model."""
    wanted = _flat(state)
    problems = []
    for key, value in wanted.items():
        shape = tuple(value.shape) if torch.is_tensor(value) else None
        if key not in saved:
            problems.append(f"{key}: missing from the checkpoint (the model has it, shape {list(shape or ())})")
            continue
        held = getattr(saved[key], "size", None)
        if shape is not None and held is not None and tuple(held) != shape:
            problems.append(f"{key}: the checkpoint holds global shape {list(held)}, the model needs {list(shape)}")
    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, (sorted(wanted) + [f"model.{a}" for a in aliases], problems))
    held = {key for keys, _ in everyone for key in keys}
    problems = list(dict.fromkeys(p for _, theirs in everyone for p in theirs))
    kinds = ("model.", "optimizer.") if with_optimizer else ("model.",)
    for key in saved:
        if key.startswith(kinds) and key not in held:
            problems.append(f"{key}: in the checkpoint but not in the model")
    if problems:
        raise ValueError(f"{source}: the checkpoint does not fit the model; nothing was loaded:\n  " + "\n  ".join(problems))


def _materialise_state(optimizer: OptimizerView) -> list[Any]:
    """Optimizers create their state on the first step: make it now for the parameters that have none (lr 0,
    zero gradients; the others get no gradient, so the step leaves them and their state alone), so DCP has
    tensors to load into. Nothing moves. Returns the parameters given new state."""
    inner = optimizer.inner
    params = [p for g in inner.param_groups for p in g["params"]]
    missing = [p for p in params if p.requires_grad and not inner.state.get(p)]
    if not missing:
        return []
    saved_lr = [g["lr"] for g in inner.param_groups]
    saved_grads = [p.grad for p in params]
    try:
        for g in inner.param_groups:
            g["lr"] = 0.0
        for p in params:
            p.grad = torch.zeros_like(p) if any(p is m for m in missing) else None
        inner.step()
    finally:
        for g, lr in zip(inner.param_groups, saved_lr):
            g["lr"] = lr
        for p, grad in zip(params, saved_grads):
            p.grad = grad
    return missing


def _forget(optimizer: OptimizerView, params: list[Any]) -> None:
    """Drop state `_materialise_state` made that the checkpoint did not fill (the optimizer is as it was)."""
    for p in params:
        optimizer.inner.state.pop(p, None)


def _has_loaded_state(owner: Any, optimizer: OptimizerView, model: nn.Module, loaded: dict[str, Any]) -> bool:
    """Whether the checkpoint held state for the optimizer's parameter `owner` (a model parameter or its master)."""
    names = [_first_name(n, p) for n, p in model.named_parameters() if optimizer.stepped(p) is owner]
    return any(k.startswith(f"state.{n}.") for n in names for k in loaded)


def _check_groups(source: Path, optimizer: OptimizerView, groups: list[dict[str, Any]]) -> None:
    if len(groups) != len(optimizer.inner.param_groups):
        raise ValueError(f"{source}: the checkpoint has {len(groups)} optimizer parameter groups, the optimizer "
                         f"{len(optimizer.inner.param_groups)}; nothing was loaded")


def _restore_hyperparameters(optimizer: OptimizerView, groups: list[dict[str, Any]]) -> None:
    for mine, saved in zip(optimizer.inner.param_groups, groups):
        for k, v in saved.items():
            if k != "params" and k in mine:
                mine[k] = tuple(v) if isinstance(mine[k], tuple) else v


# -- export -----------------------------------------------------------------------------------------------
def full_state_dict(model: nn.Module, *, rank0_only: bool = False, hcg: HybridGroup | None = None) -> dict[str, torch.Tensor]:
    """The unparallelised model's state dict — the keys and shapes of the model before `parallelize` (or of the
    single-process model) — gathered on every rank, or only on rank 0 (`rank0_only`, others get {}).
    Every rank must call it. Ready for torch.save, safetensors or save_pretrained. A tied weight is under each of its
    names (`model.embed_tokens.weight` and `lm_head.weight`), equal; `load_state_dict` of it keeps the model tied."""
    hcg = hcg or current()
    out = {name: t.full_tensor().detach().clone()  # all-gathers the shards over "mp" and "sharding"
           for name, t in _model_state(model, hcg).items()}
    for alias, name in _aliases(model).items():  # a tied weight under each of its names, as model.state_dict() has it
        if name in out:  # (its own tensor: safetensors refuses tensors that share memory)
            out[alias] = out[name].clone()
    if hcg.pp_size > 1:  # each pipeline stage holds its own parameters: gather every stage's
        device = next(iter(out.values())).device if out else torch.device("cpu")
        stages: list[Any] = [None] * hcg.pp_size
        with guard("full_state_dict over the pp group", hcg.pp_group):
            dist.all_gather_object(stages, {k: v.cpu() for k, v in out.items()}, group=hcg.pp_group)
        out = {k: v.to(device) for stage in stages for k, v in stage.items()}
    if rank0_only and hcg.rank != 0:
        return {}
    return out
