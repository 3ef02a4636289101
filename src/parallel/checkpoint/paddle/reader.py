"""A PaddleFormers checkpoint (weights, AdamW state, tensor-parallel shards) as the Hugging Face model's tensors and
torch AdamW's state, with one report line per Paddle key and an error, naming the key, the file and the fix, for
anything that does not fit: an unknown key, a shape the architecture does not have, shards that do not merge, an
optimizer entry without its parameter.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from strategy import StrategyError

from .layout import ARCHITECTURES, UNSHARDED, Rule, apply, rule_for
from .pickles import load_pickle

__all__ = ["PaddleCheckpoint", "read_paddle"]

NAMES = "StructuredToParameterName@@"  # Paddle's map from structured names to its tensor names, in both files
_SHARD = re.compile(r"\.tp(\d+)\.")
_MOMENTS = {"_moment1_0": "exp_avg", "_moment2_0": "exp_avg_sq"}
_POWS = ("_beta1_pow_acc_0", "_beta2_pow_acc_0")


@dataclass
class PaddleCheckpoint:
    """What a Paddle run saved, in torch's terms: `weights` by Hugging Face name ([out, in] layout), `optimizer` by
    the same names (torch AdamW's per-parameter state: step, exp_avg, exp_avg_sq; empty without optimizer files),
    the `config` (its config.json), the `step` the optimizer's beta powers give (None without optimizer files) and
    `lines`, one per Paddle key, saying what it became."""

    model_type: str
    config: dict[str, Any]
    weights: dict[str, torch.Tensor]
    optimizer: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    step: int | None = None
    lines: list[str] = field(default_factory=list)


def read_paddle(src: str | os.PathLike[str], *, config: str | os.PathLike[str] | None = None,
                optimizer: str | os.PathLike[str] | None = None,
                betas: tuple[float, float] = (0.9, 0.999)) -> PaddleCheckpoint:
    """The checkpoint in `src` (a directory holding `model_state.pdparams`, or its tensor-parallel shards
    `model_state.tp00.pdparams`, ...), the architecture from `config` (its config.json; default `src`/config.json),
    the AdamW state from `optimizer` (a `.pdopt` file or the directory of its shards; default: those in `src`, if
    any). `betas` are the run's AdamW betas: Paddle keeps beta^(step+1), from which the step count is taken.

    Raises:
        StrategyError: what does not fit, naming the Paddle key, the file and the fix.
    """
    folder = Path(src)
    cfg_path = Path(config) if config is not None else folder / "config.json"
    if not cfg_path.is_file():
        raise StrategyError(f"{cfg_path}: no config.json: the architecture comes from its model_type; pass the "
                            "config of the model the checkpoint is from", source=str(cfg_path))
    cfg = json.loads(cfg_path.read_text())
    kind = str(cfg.get("model_type", ""))
    if kind not in ARCHITECTURES:
        raise StrategyError(f"{cfg_path}: model_type {kind!r}: no Paddle layout rules for it (known: "
                            f"{', '.join(ARCHITECTURES)})", source=str(cfg_path))
    tied = bool(cfg.get("tie_word_embeddings", False))
    files = _files(folder, "model_state", ".pdparams")
    if len(files) > 1 and kind in UNSHARDED:
        raise StrategyError(f"{folder}: {len(files)} tensor-parallel shards of a {kind} checkpoint: {UNSHARDED[kind]}; "
                            "save it with PaddleFormers at tensor_model_parallel_size 1 (one model_state.pdparams) and "
                            "import that", source=str(folder))
    shards = [load_pickle(f) for f in files]
    names = dict(shards[0].get(NAMES) or {})
    out = PaddleCheckpoint(kind, cfg, {})
    rules: dict[str, Rule] = {}
    arrays: dict[str, np.ndarray] = {}
    for key in [k for k in shards[0] if k != NAMES]:
        rule = rule_for(kind, key, tied)
        if rule is None:
            raise StrategyError(f"{files[0]}: {key}: not a weight of a {kind} checkpoint this importer knows (its "
                                f"rules: docs/paddle-checkpoints.md); check the config's model_type", source=str(files[0]))
        rules[key] = rule
        value = _merged(key, [s.get(key) for s in shards], rule, files)
        converted = apply(rule, key, value, cfg)
        arrays.update(converted)
        out.lines.append(_line(key, names.get(key), rule, converted, len(files)))
    out.weights = _tensors(arrays, files[0])
    _check_shapes(out, cfg, files[0])
    opt_files = _optimizer_files(folder, optimizer, len(files))
    if opt_files:
        out.optimizer, out.step = _optimizer(opt_files, names, rules, kind, cfg, betas, out.lines)
    return out


def _tensors(arrays: dict[str, np.ndarray], where: Path) -> dict[str, torch.Tensor]:
    """torch tensors by Hugging Face name, each expert's slice (`name#e`) stacked into its tensor, experts 0..E-1."""
    out: dict[str, torch.Tensor] = {}
    stacks: dict[str, dict[int, np.ndarray]] = {}
    for name, value in arrays.items():
        base, _, index = name.partition("#")
        if index:
            stacks.setdefault(base, {})[int(index)] = value
        else:
            out[name] = torch.from_numpy(np.ascontiguousarray(value))
    for base, parts in stacks.items():
        if sorted(parts) != list(range(len(parts))):
            raise StrategyError(f"{where}: {base} has experts {sorted(parts)}; every expert 0..{len(parts) - 1} is "
                                "needed to stack them", source=str(where))
        out[base] = torch.from_numpy(np.ascontiguousarray(np.stack([parts[e] for e in range(len(parts))])))
    return out


def _files(folder: Path, stem: str, suffix: str) -> list[Path]:
    """`stem``suffix` in `folder`, or its shards `stem`.tpNN`suffix` in rank order."""
    whole = folder / f"{stem}{suffix}"
    if whole.is_file():
        return [whole]
    shards = sorted(folder.glob(f"{stem}.tp*{suffix}"), key=lambda p: int(_SHARD.search(p.name).group(1)))  # type: ignore[union-attr]
    if not shards:
        raise StrategyError(f"{folder}: neither {stem}{suffix} nor its tensor-parallel shards {stem}.tp00{suffix}, ...",
                            source=str(folder))
    ranks = [int(_SHARD.search(p.name).group(1)) for p in shards]  # type: ignore[union-attr]
    if ranks != list(range(len(shards))):
        raise StrategyError(f"{folder}: the shards of {stem} are ranks {ranks}; every rank 0..{len(shards) - 1} is "
                            "needed to merge them", source=str(folder))
    return shards


def _optimizer_files(folder: Path, given: str | os.PathLike[str] | None, ranks: int) -> list[Path]:
    if given is not None:
        path = Path(given)
        return [path] if path.is_file() else _files(path, "optimizer", ".pdopt")
    try:
        found = _files(folder, "optimizer", ".pdopt")
    except StrategyError:
        return []
    if len(found) != ranks:
        raise StrategyError(f"{folder}: {len(found)} optimizer file(s) beside {ranks} weight shard(s); each rank's "
                            "optimizer shard goes with its weights", source=str(folder))
    return found


def _merged(key: str, parts: list[Any], rule: Rule, files: list[Path]) -> np.ndarray:
    """One tensor from each rank's shard of it, as Paddle's split made them (`rule.tp`)."""
    for part, f in zip(parts, files):
        if part is None or not isinstance(part, np.ndarray):
            raise StrategyError(f"{f}: {key} is missing from this shard (or not a tensor): shards of one checkpoint "
                                "hold the same keys", source=str(f))
    if len(parts) == 1:
        return parts[0]
    if not rule.tp:
        if any(not np.array_equal(p, parts[0]) for p in parts[1:]):
            raise StrategyError(f"{files[1]}: {key} differs between shards, but Paddle keeps it whole on every rank: "
                                "the shards are not of one checkpoint", source=str(files[1]))
        return parts[0]
    if rule.tp == "pairs":  # each rank [gate_r | up_r]: the gates, then the ups
        halves = [np.split(p, 2, axis=-1) for p in parts]
        return np.concatenate([h[0] for h in halves] + [h[1] for h in halves], axis=-1)
    try:
        return np.concatenate(parts, axis=-1 if rule.tp == "column" else 0)
    except ValueError as e:
        raise StrategyError(f"{files[0]}: {key}'s shards do not merge ({e})", source=str(files[0])) from None


_CHANGES = {"as is": "as is", "transposed": "transposed [in, out] -> [out, in]",
            "qkv": "split from the fused qkv (grouped by key/value head), each transposed",
            "gate_up": "split from the fused [gate | up], each transposed",
            "expert": "transposed into its expert's slice of the stacked tensor",
            "tied": "dropped: the tied LM head's copy of the embedding",
            "mtp": "dropped: multi-token prediction, which Hugging Face's model does not have (a run continued here "
                   "trains without its loss; its AdamW state is dropped with it)"}


def _line(key: str, tensor: str | None, rule: Rule, converted: dict[str, np.ndarray], shards: int) -> str:
    became = ", ".join(converted) or "nothing"
    change = _CHANGES[rule.change]
    if any(v.ndim == 1 for v in converted.values()):
        change = change.replace(", each transposed", "")  # (a bias)
    merged = f"; merged from {shards} shards ({rule.tp or 'whole on each'})" if shards > 1 else ""
    name = f" ({tensor})" if tensor else ""
    return f"{key}{name} -> {became}: {change}{merged}"


def _check_shapes(out: PaddleCheckpoint, cfg: dict[str, Any], where: Path) -> None:
    """Every tensor the Hugging Face model has, at its shape, and nothing else (built on the meta device)."""
    import transformers

    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**cfg))
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if cfg.get("tie_word_embeddings"):
        expected.pop("lm_head.weight", None)
    for name, tensor in out.weights.items():
        if name not in expected:
            raise StrategyError(f"{where}: {name} is not a tensor of {type(model).__name__}", source=str(where))
        if tuple(tensor.shape) != expected[name]:
            raise StrategyError(f"{where}: {name} comes out {list(tensor.shape)}, but {type(model).__name__} of this "
                                f"config has {list(expected[name])}: the config is not the checkpoint's",
                                source=str(where))
    missing = sorted(set(expected) - set(out.weights))
    if missing:
        raise StrategyError(f"{where}: the checkpoint has no {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}"
                            f" of {type(model).__name__}", source=str(where))


def _optimizer(files: list[Path], names: dict[str, str], rules: dict[str, Rule], kind: str, cfg: dict[str, Any],
               betas: tuple[float, float], lines: list[str]) -> tuple[dict[str, dict[str, torch.Tensor]], int]:
    """torch AdamW's state by Hugging Face name: each moment converted as its weight; the step from beta1^(step+1)."""
    shards = [load_pickle(f) for f in files]
    structured = {tensor: key for key, tensor in names.items() if key in rules and rules[key].change != "tied"}
    moments: dict[str, dict[str, np.ndarray]] = {}
    steps: set[int] = set()
    for entry in [k for k in shards[0] if k != NAMES]:
        suffix = next((s for s in (*_MOMENTS, *_POWS) if entry.endswith(s)), None)
        tensor = entry[: -len(suffix)] if suffix else None
        key = structured.get(tensor) if tensor else None
        if suffix is None or key is None:
            raise StrategyError(f"{files[0]}: {entry} is no AdamW state of a parameter of the weights (their tensors: "
                                f"{', '.join(sorted(structured)[:3])}, ...): the optimizer file is not of this "
                                "checkpoint", source=str(files[0]))
        parts = [s.get(entry) for s in shards]
        if suffix in _POWS:
            power = float(_merged(entry, parts, rules[key]._replace(tp=""), files).reshape(-1)[0])
            beta = betas[_POWS.index(suffix)]
            step = math.log(power) / math.log(beta) - 1
            if abs(step - round(step)) > 1e-3:
                raise StrategyError(f"{files[0]}: {entry} = {power} is no power of beta {beta}: pass the run's AdamW "
                                    "betas", source=str(files[0]))
            steps.add(round(step))
            continue
        moment = _merged(entry, parts, rules[key], files)
        moments.setdefault(_MOMENTS[suffix], {}).update(apply(rules[key], key, moment, cfg))
    out: dict[str, dict[str, torch.Tensor]] = {}
    for which, arrays in moments.items():
        for hf_name, moment_tensor in _tensors(arrays, files[0]).items():
            out.setdefault(hf_name, {})[which] = moment_tensor
    if len(steps) > 1:
        raise StrategyError(f"{files[0]}: the beta powers give steps {sorted(steps)}: pass the run's AdamW betas",
                            source=str(files[0]))
    step = steps.pop() if steps else 0
    for state in out.values():
        state["step"] = torch.tensor(float(step))
    lines.append(f"optimizer: {len(out)} parameters' AdamW moments, converted as their weights; step {step} (from "
                 f"beta1^(step+1), betas {betas[0]}, {betas[1]})")
    return out, step
