"""Tensor-parallel plans: where one comes from ("auto"), which module each rule names, and whether it fits.

A plan is an ordered list of (module-name glob, style) rules with Hugging Face's style names; the first
rule whose glob matches a name in `model.named_modules()` applies to that module. Everything is checked
before anything is changed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import NamedTuple

from torch import nn

from strategy import TP_STYLES, StrategyError

from ..tensor.in_place import forward_of_its_own, reaches_base_forward
from ..topology.groups import HybridGroup

__all__ = ["Match", "match_plan", "plan_for", "tied_owners"]

# Hugging Face's older name for colwise_gather_output; both are accepted and mean the same.
COLUMN = {"colwise": False, "colwise_gather_output": True, "colwise_rep": True}
ROW = {"rowwise": True, "rowwise_split_input": False}  # style -> input_is_parallel
STRATEGY_FIELD = "hybrid_configs.mp_configs.tp_plan"
HF_PLAN = "Hugging Face plan (config.base_model_tp_plan)"


class Match(NamedTuple):
    name: str  # the module's name in model.named_modules()
    module: nn.Module
    pattern: str
    style: str


def plan_for(model: nn.Module, plan: str | Mapping[str, str], hcg: HybridGroup) -> tuple[list[tuple[str, str]], str]:
    """The rules to apply and where they came from ("the plan given", the strategy's, the model's own)."""
    if isinstance(plan, Mapping):
        return list(plan.items()), "the plan given"
    if plan != "auto":
        raise TypeError(f'plan must be a dict {{module-name glob: style}} or "auto", got {plan!r}')
    if hcg.resolved.tp_plan:
        return list(hcg.resolved.tp_plan), f"the strategy's {STRATEGY_FIELD}"
    if hcg.mp_size == 1:  # nothing to split (a model's own plan may name styles only mp > 1 needs, its MoE ones): the
        return [], "no plan (mp_degree 1)"  # other techniques (sep, cp, ep, sharding, pp, recompute) still apply
    hf = hugging_face_plan(model)
    if hf:
        return list(hf.items()), f"{type(model).__name__}'s {HF_PLAN}"
    raise StrategyError(
        f"parallelize(plan=\"auto\"): the strategy has no {STRATEGY_FIELD} and {type(model).__name__} has no Hugging Face "
        "tensor-parallel plan; give one: parallelize(model, {\"layers.*.up\": \"colwise\", \"layers.*.down\": \"rowwise\"}), "
        f"or rules in the strategy ({STRATEGY_FIELD} {{ pattern: \"layers.*.up\" style: COLWISE }})",
        field=STRATEGY_FIELD,
    )


def hugging_face_plan(model: nn.Module) -> dict[str, str]:
    """The plan transformers uses for tp_plan="auto", the same whichever supported version builds the model: the
    config's base_model_tp_plan under the base model's prefix, the class's own entries (lm_head, ...), and the input
    embedding split by vocabulary unless named (transformers >= 5.21's rule). `model._tp_plan`, what post_init
    built, adds what a model's children contribute; it is not trusted alone, since before 5.14 it lost lm_head."""
    config = getattr(model, "config", None)
    base_plan = dict(getattr(config, "base_model_tp_plan", None) or {})
    prefix = getattr(model, "base_model_prefix", "")
    base = getattr(model, prefix, None) if prefix else None
    if isinstance(base, nn.Module):
        base_plan = {f"{prefix}.{k}": v for k, v in base_plan.items()}
    else:
        base, prefix = model, ""
    own = getattr(type(model), "_tp_plan", None)
    built = getattr(model, "_tp_plan", None)
    plan = {**(dict(built) if isinstance(built, Mapping) else {}), **base_plan, **(dict(own) if isinstance(own, Mapping) else {})}
    embedding = f"{prefix}.embed_tokens" if prefix else "embed_tokens"
    if plan and isinstance(getattr(base, "embed_tokens", None), nn.Embedding) and embedding not in plan:
        plan = {embedding: "embedding_rowwise", **plan}
    # Experts stay whole here (split over ep, never by mp): their rules (moe_tp_experts, packed_colwise, ...) go.
    return {k: v for k, v in plan.items() if ".experts" not in k}


def match_plan(model: nn.Module, rules: list[tuple[str, str]], source: str, mp_size: int) -> list[Match]:
    """Each module the rules name, with its rule; a StrategyError listing every problem found, if any."""
    problems: list[str] = []
    for pattern, style in rules:
        if style not in TP_STYLES and source.endswith(HF_PLAN):  # (multi-head latent attention's mla_kv_a_proj, ...)
            problems.append(f"rule {pattern!r}: style {style!r}, which transformers' plan names and parallelize does not "
                            f"implement (styles: {', '.join(TP_STYLES)}); set mp_degree: 1 for this model, or give "
                            "parallelize a plan of those styles")
        elif style not in TP_STYLES:
            problems.append(f"rule {pattern!r}: unknown style {style!r}; styles: {', '.join(TP_STYLES)}")
    matches: list[Match] = []
    used: set[str] = set()
    for name, module in model.named_modules():
        if not name:
            continue
        rule = next(((p, s) for p, s in rules if fnmatch.fnmatchcase(name, p)), None)
        if rule is None:
            continue
        used.add(rule[0])
        matches.append(Match(name, module, *rule))
        problems += _fits(matches[-1], mp_size)
    for pattern, _ in rules:
        # A model's own plan names every layer its family may have (a MoE model's dense MLP rules match nothing
        # where every layer is sparse): transformers skips those, so does this; a plan given must match.
        if pattern not in used and not source.endswith(HF_PLAN):
            problems.append(f"rule {pattern!r} matches no module of {type(model).__name__} (names look like "
                            f"{_examples(model)})")
    problems += _heads(model, matches, mp_size)
    problems += _tied(model, matches)
    problems += _unplanned(model, matches)
    problems += _split_statistics(model, matches)
    if problems:
        listed = problems[0] if len(problems) == 1 else "\n  " + "\n  ".join(problems)  # one problem: one line
        raise StrategyError(f"cannot apply {source} at mp_degree={mp_size}: {listed}", field=STRATEGY_FIELD)
    return matches


def _fits(m: Match, mp: int) -> list[str]:
    """The style suits the module's type, and the split dimension divides by the degree."""
    where = f"{m.name} ({type(m.module).__name__}) under rule {m.pattern!r} -> {m.style}"
    if m.style in COLUMN or m.style in ROW:
        if not isinstance(m.module, nn.Linear):
            return [f"{where}: {m.style} needs an nn.Linear"]
        size, what = (m.module.out_features, "out_features") if m.style in COLUMN else (m.module.in_features, "in_features")
        shape = tuple(m.module.weight.shape)
    elif m.style == "embedding_rowwise":
        if not isinstance(m.module, nn.Embedding):
            return [f"{where}: embedding_rowwise needs an nn.Embedding"]
        if m.module.max_norm is not None or m.module.sparse:
            return [f"{where}: embedding_rowwise does not support max_norm or sparse gradients"]
        size, what, shape = m.module.num_embeddings, "num_embeddings", tuple(m.module.weight.shape)
    else:
        return []
    if forward_of_its_own(m.module) and not reaches_base_forward(m.module):
        return [f"{where}: {type(m.module).__name__}.forward computes with its weight itself (it does not call "
                "super().forward), so a parallel layer cannot run under it with the weight's shard; leave it whole "
                "(replicate) or give its module a plan without it"]
    if size % mp:
        return [f"{where}: {what}={size} (weight {list(shape)}) is not divisible by mp_degree={mp}"]
    return []


def _heads(model: nn.Module, matches: list[Match], mp: int) -> list[str]:
    """Splitting attention projections by rows splits heads: each rank must get whole heads (and kv heads)."""
    config = getattr(model, "config", None)
    if config is None or not any(m.style in COLUMN for m in matches):
        return []
    out = []
    for attr in ("num_attention_heads", "num_key_value_heads"):
        heads = getattr(config, attr, None)
        if isinstance(heads, int) and heads % mp:
            out.append(f"config.{attr}={heads} is not divisible by mp_degree={mp}: each rank needs whole heads")
    return out


def _unplanned(model: nn.Module, matches: list[Match]) -> list[str]:
    """A module that both splits its activations (a colwise child) and joins them (a rowwise child) runs what lies between
    on this rank's part only: a parameter there that no rule names (an activation's learned slopes, a norm per head)
    would get this rank's share of its gradient, or see a part of what it normalises. The plan must say (as
    replicated_with_grad_allreduce, or a gathering colwise style before it); the first such block is named."""
    split = {m.name.rpartition(".")[0] for m in matches if m.style in COLUMN and not COLUMN[m.style]}
    joined = {m.name.rpartition(".")[0] for m in matches if m.style in ROW and ROW[m.style]}
    named = [m.name for m in matches]
    modules = dict(model.named_modules())
    # (A model whose root holds the split projections itself is its own block, embedding and head included: left to
    # its author.)
    for block in sorted((split & joined) - {""}, key=lambda n: list(modules).index(n)):
        loose = [f"{block}.{n}" for n, _ in modules[block].named_parameters()
                 if not any(f"{block}.{n}".startswith(k + ".") for k in named)]
        if loose:
            return [f"{', '.join(loose[:4])}{' ...' if len(loose) > 4 else ''}: parameters inside {block}, whose "
                    "projections the plan splits (colwise) and joins (rowwise), that no rule names: they would see "
                    "this rank's part of the split activations; name each in the plan (replicated_with_grad_allreduce "
                    "where it acts on the split part, e.g. a norm per head or an activation's learned slopes), or set "
                    "mp_degree: 1"]
    return []


def _split_statistics(model: nn.Module, matches: list[Match]) -> list[str]:
    """Gemma 3n's activation sparsity keeps each token's largest MLP activations by their mean and spread over the
    intermediate dimension: where a colwise style splits that dimension, each rank would take them over its part."""
    pattern = getattr(getattr(model, "config", None), "activation_sparsity_pattern", None)
    values = pattern if isinstance(pattern, (list, tuple)) else [pattern or 0.0]
    if not any(float(v) > 0 for v in values) or not any(m.style in COLUMN and not COLUMN[m.style] for m in matches):
        return []
    return [f"{type(model).__name__}'s activation sparsity (config.activation_sparsity_pattern) keeps each token's "
            "largest MLP activations by their mean and spread over the intermediate dimension, which the plan splits "
            "over mp; set the pattern to 0.0 for every layer (a dense MLP, on one process too), or mp_degree: 1"]


def _tied(model: nn.Module, matches: list[Match]) -> list[str]:
    """A weight shared by several modules (tied embeddings) is split only where every use cuts the same rows: the
    vocabulary-split embedding (embedding_rowwise) and a bias-free head split by output rows (a column style) both hold
    rows [r * V / mp, (r + 1) * V / mp) of it, so parallelize gives them one Parameter (`tied_owners`)."""
    style = {id(m.module): m for m in matches}
    out = []
    for owners in tied_owners(model):
        splits = [style.get(id(module)) for _, module, _ in owners]
        if all(m is None or m.style in ("replicate", "sequence_parallel") for m in splits):
            continue  # left whole everywhere
        names = [f"{name}.{pname}" if name else pname for name, _, pname in owners]
        for (name, module, pname), m, full in zip(owners, splits, names):
            why = _cannot_share(module, pname, m)
            if why:
                others = ", ".join(n for n in names if n != full)
                out.append(f"{full} is shared with {others} (tied weights), and {why}: a tied weight is split only as "
                           "the embedding's vocabulary (embedding_rowwise) and a bias-free head's output rows (colwise, "
                           "colwise_gather_output); untie them (e.g. tie_word_embeddings=False) or replicate both")
    return out


def tied_owners(model: nn.Module) -> list[list[tuple[str, nn.Module, str]]]:
    """Each parameter more than one module holds, as its (module name, module, parameter name) owners in the order of
    `named_modules()`: the first is the name `named_parameters()` and checkpoints give it."""
    owners: dict[int, list[tuple[str, nn.Module, str]]] = {}
    seen: set[tuple[int, str]] = set()
    for name, module in model.named_modules(remove_duplicate=False):
        for pname, p in module.named_parameters(recurse=False):
            if (id(module), pname) not in seen:  # a module registered twice holds its parameter once
                seen.add((id(module), pname))
                owners.setdefault(id(p), []).append((name, module, pname))
    return [o for o in owners.values() if len(o) > 1]


def _cannot_share(module: nn.Module, pname: str, m: Match | None) -> str:
    """Why this use of a tied weight cannot hold the same rows as the others ("" when it can)."""
    what = f"{type(module).__name__}"
    if m is None:
        return f"{what} matches no rule (it would stay whole while another use is split)"
    where = f"{what} under rule {m.pattern!r} -> {m.style}"
    if pname != "weight":
        return f"{where} splits its {pname}"
    if m.style == "embedding_rowwise":
        return ""
    if m.style not in COLUMN:
        return f"{where} does not split it by vocabulary rows"
    if getattr(module, "bias", None) is not None:
        return f"{where} has a bias"
    return ""


def _examples(model: nn.Module) -> str:
    names = [n for n, _ in model.named_modules() if n][:3]
    return ", ".join(repr(n) for n in names) or "(none)"
