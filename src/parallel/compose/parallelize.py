"""`parallelize`: tensor-parallelise a model you already have, by a plan, with every resolved mp flag.

Each nn.Linear / nn.Embedding the plan names is replaced, in place, by our ColumnParallelLinear /
RowParallelLinear / VocabParallelEmbedding holding this rank's shard of the module's existing weights
(pretrained or freshly initialised): the shard is cut from the module being replaced, so no rank makes a
full-size copy of anything but that one module's tensors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from strategy import StrategyError

from ..pipeline.runner import LossFn, PipelineModel, StagePlan, check_cut, split_model
from ..pipeline.split import Cut
from ..sep.hf import check_heads, is_hugging_face
from ..sep.hf import install as install_sep_attention
from ..sep.mixers import check_token_mixers
from ..sep.required import require_sep_attention
from ..cp.wiring import install_cp_attention, require_cp_attention
from ..experts.interface import check_experts, split_experts
from ..sharding.fsdp import apply_sharding, sharding_units
from ..tensor.column import ColumnParallelLinear
from ..tensor.data import broadcast_data
from ..tensor.embedding import VocabParallelEmbedding
from ..tensor.in_place import forward_of_its_own, keep_forward
from ..tensor.partial import mark_partial_over_mp
from ..tensor.row import RowParallelLinear
from ..tensor.sequence import mark_sequence_parallel
from ..tensor.shards import shard_of
from ..topology.groups import HybridGroup, current
from ..training.recompute import apply_recompute, recompute_targets
from .hf_sequence import install as install_sequence_parallel
from .hf_sequence import plan_sequence_parallel, without_sequence_parallel
from .attention_rng import fork_split_attention
from .plan import COLUMN, ROW, Match, match_plan, plan_for, tied_owners
from .transformers_versions import check_transformers

__all__ = ["parallelize"]

APPLIED = "_parallel_plan"  # on the model: {module name: style}, what parallelize did (for checkpoints)


def parallelize(model: nn.Module, plan: str | Mapping[str, str] = "auto", *, hcg: HybridGroup | None = None,
                sequence_dim: int = 1, loss_fn: LossFn | None = None) -> Any:
    """Replace, in place, the modules `plan` names by parallel layers carrying their weights; returns `model`.

    Args:
        plan: `{module-name glob: style}` (fnmatch on `model.named_modules()` names, first match wins), or
            "auto": the strategy's `hybrid_configs.mp_configs.tp_plan` if it has rules, else the model's own
            Hugging Face plan (what transformers uses for tp_plan="auto"). Styles, as Hugging Face names
            them: colwise, colwise_gather_output (= colwise_rep), rowwise, rowwise_split_input,
            embedding_rowwise, replicate, sequence_parallel, replicated_with_grad_allreduce (replicated, its
            gradient summed over mp: a norm per head after a colwise split). Experts are never split by mp: a
            model's own plan's expert rules are left out (experts stay whole, split over ep when ep_degree > 1).
        hcg: the hybrid group; None means `parallel.current()`.
        sequence_dim: the sequence dimension of the model's activations under sequence parallelism (1 for
            batch-first models such as Hugging Face's).
        loss_fn: with pp_degree > 1, `loss_fn(output, labels)` of the last stage; default: a Hugging Face causal
            LM's own next-token loss.

    Returns:
        `model`, or with pp_degree > 1 a `PipelineModel`: this rank's stages of it (their parameters under the
        whole model's names), trained by `train_batch((inputs, labels), optimizer)`.

    Raises:
        RuntimeError: a Hugging Face model with a transformers release outside the supported range (naming both).
        StrategyError: an unknown style, a rule that matches nothing, a style on the wrong module type, a
            dimension (or a head count) not divisible by mp_degree, a tied weight two uses would split differently (a
            biased head, another split of either), or sharding on a model with no blocks; every problem is named
            (pattern, module, shape, degree) before anything is changed. A tied embedding and head that both cut the
            vocabulary rows share one Parameter on each rank (see docs/tensor-parallel.md).

    The techniques apply in one fixed order: tensor (and sequence) parallelism, recompute, the pipeline cut
    (pp_degree > 1: the blocks of the largest ModuleList in pp_degree × virtual_pp_degree contiguous chunks, the
    embedding with the first, the final norm and head with the last), then ZeRO sharding (sharding_degree > 1:
    FSDP2 units over each chunk's blocks, see `apply_sharding`). `plan={}` applies no tensor parallelism, the rest
    still.

    With `need_broadcast_data` on (the default), the model's forward first broadcasts its tensor inputs from
    the mp group's first rank. Parameters left replicated (norms, replicate) are the ones HybridParallelOptimizer's
    sync_param / sync_grad / sync_moment act on.

    Example::

        model = LlamaForCausalLM(config)
        parallel.parallelize(model)                      # the model's own plan, or the strategy's
        opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters()))
    """
    check_transformers(model)  # a release whose internals differ fails here, before anything changes
    hcg = hcg or current()
    matches = match_plan(model, *plan_for(model, plan, hcg), hcg.mp_size)
    hf_sequence, experts, stages = _check_before_any_change(model, matches, hcg)
    applied = apply_tp(model, matches, hcg, hf_sequence=hf_sequence, sequence_dim=sequence_dim)
    if hf_sequence is not None:
        install_sequence_parallel(model, hf_sequence, hcg, sequence_dim)
    apply_attention(model, matches, hcg)
    split_experts(experts, hcg)
    setattr(model, APPLIED, {**getattr(model, APPLIED, {}), **applied})
    apply_recompute(model, hcg=hcg)  # recompute_configs.checkpoints, when the strategy turns recompute on
    if hcg.resolved.mp.need_broadcast_data and hcg.mp_size > 1 and hcg.pp_size == 1:  # pipelines broadcast per stage
        model.register_forward_pre_hook(_broadcast_inputs(hcg), with_kwargs=True)
    return apply_pipeline_and_sharding(model, hcg, loss_fn, stages)


def apply_attention(model: nn.Module, matches: list[Match], hcg: HybridGroup) -> None:
    """After tensor parallelism, the attention every axis that splits it needs: split heads' dropout on each mp rank's
    own stream, sep's all-to-all and cp's ring (Hugging Face models; a model of one's own calls them itself)."""
    fork_split_attention(model, matches, hcg)
    if hcg.sep_size > 1 and is_hugging_face(model):  # mp and sep split the heads together
        install_sep_attention(model, hcg)
    if hcg.cp_size > 1 and is_hugging_face(model):  # cp attends over mp's heads
        install_cp_attention(model, hcg)


def apply_pipeline_and_sharding(model: nn.Module, hcg: HybridGroup, loss_fn: LossFn | None,
                                stages: StagePlan | None = None) -> Any:
    """Last: without a pipeline, FSDP2 units over the blocks as the other techniques left them; with one, this rank's
    stages cut out and each stage's chunk sharded (its blocks, plus the chunk as the root)."""
    if hcg.pp_size == 1:
        apply_sharding(model, hcg=hcg)
        if hcg.sep_size > 1:  # a Hugging Face model attends through it now; a model of one's own must
            require_sep_attention(model)
        if hcg.cp_size > 1:
            require_cp_attention(model)
        return model
    _, chunks, mine = split_model(model, hcg, stages)  # (check_cut refused sep_degree and cp_degree > 1 before)
    for chunk in chunks:
        apply_sharding(chunk, hcg=hcg)
    return PipelineModel(model, chunks, mine, hcg, loss_fn)


def _check_before_any_change(model: nn.Module, matches: list[Match], hcg: HybridGroup) -> tuple[Any, list[Any], Any]:
    """Every technique's refusals, before the model changes (replacing keeps module names, so later checks hold):
    the Hugging Face sequence-parallel plan (None without it), the experts to split over ep and the pipeline's cut."""
    # Hugging Face decoders enter the sequence-parallel region at their first layer (see sequence_hf).
    hf_sequence = None
    if hcg.resolved.mp.sequence_parallel and hcg.mp_size > 1 and getattr(model, "config", None) is not None:
        hf_sequence = plan_sequence_parallel(model, matches)
    recompute_targets(model, hcg)
    sharding_units(model, hcg)
    experts = _check_expert_parallel(model, hcg) if hcg.ep_size > 1 else []
    stages = check_cut(model, hcg) if hcg.pp_size > 1 else None
    if stages is not None:
        _check_recompute_below_the_cut(model, stages.cut, hcg)
    if hcg.sep_size > 1:
        check_heads(model, hcg)
    for axis in ("sep", "cp"):
        if hcg.axis(axis).size > 1 and is_hugging_face(model):
            check_token_mixers(model, f"hybrid_configs.{axis}_degree")
    return hf_sequence, experts, stages


def _check_recompute_below_the_cut(model: nn.Module, c: Cut, hcg: HybridGroup) -> None:
    """Recompute wraps a module's forward; a stage runs a copy of each container on the way to the blocks, whose
    wrapped forward would still be the whole model's: only the blocks and what lies inside them can be recomputed."""
    path = c.blocks.split(".") if c.blocks else []
    containers = {".".join(path[:i]) for i in range(len(path) + 1)}
    above = [n for n in recompute_targets(model, hcg) if n in containers]
    if above:
        raise StrategyError(
            f"recompute_configs.checkpoints names {above[0]!r}, which holds {type(model).__name__}'s blocks "
            f"({c.blocks}): under pp_degree {hcg.pp_size} each stage runs its own part of it; name the blocks or "
            "modules inside them (the default, every block, when no glob is named)", field="recompute_configs.checkpoints")


def apply_tp(model: nn.Module, matches: list[Match], hcg: HybridGroup, *, hf_sequence: Any = None,
             sequence_dim: int = 1) -> dict[str, str]:
    """Tensor parallelism: each matched module replaced by its parallel layer (carrying its weights), marked
    (sequence_parallel, replicated_with_grad_allreduce) or left whole (replicate); a tied embedding and head share
    one Parameter. Returns {module name: style}."""
    modules = dict(model.named_modules())
    # A weight tied between two modules: the Parameter their replacements share, once the first is made.
    tied: list[tuple[torch.Tensor, nn.Parameter | None]] = [(getattr(o[0][1], o[0][2]), None) for o in tied_owners(model)]
    applied: dict[str, str] = {}
    for m in matches:
        applied[m.name] = m.style
        if m.style == "replicate":
            continue
        if m.style == "sequence_parallel":
            mark_sequence_parallel(m.module, hcg=hcg)
            continue
        if m.style == "replicated_with_grad_allreduce":
            mark_partial_over_mp(m.module.parameters())
            continue
        whole = hf_sequence is not None and m.name in hf_sequence.replicated_input  # gets the whole sequence
        replacement = _replacement(m, without_sequence_parallel(hcg) if whole else hcg, sequence_dim)
        _share_tied(m.module, replacement, tied)
        if forward_of_its_own(m.module):  # (a scaled embedding): kept, its base-class step the parallel layer's
            keep_forward(m.module, replacement)
            continue
        parent_name, _, child = m.name.rpartition(".")
        setattr(modules[parent_name], child, replacement)
    return applied


def _check_expert_parallel(model: nn.Module, hcg: HybridGroup) -> list[tuple[str, nn.Module]]:
    """The model's experts, split evenly over ep, with the axes ep composes with; StrategyError otherwise, naming
    both degrees, before anything changes. (sep and cp with ep are refused by the strategy itself.)"""
    if hcg.pp_size > 1:
        raise StrategyError(
            f"hybrid_configs.ep_degree {hcg.ep_size} with hybrid_configs.pp_degree {hcg.pp_size}: experts split over ep "
            "are not run inside pipeline stages here (ep runs beside dp, sharding and moe_sharding, mp, amp, gradient "
            "merge, recompute and checkpoints); set one of them to 1", field="hybrid_configs.ep_degree")
    return check_experts(model, hcg)


def _replacement(m: Match, hcg: HybridGroup, sequence_dim: int) -> nn.Module:
    """The parallel layer for one match, holding this rank's shard of the module's weights."""
    old = m.module
    kwargs: dict[str, Any] = dict(hcg=hcg, device=old.weight.device, dtype=old.weight.dtype, init="empty")
    if m.style in COLUMN:
        assert isinstance(old, nn.Linear)
        new: nn.Module = ColumnParallelLinear(old.in_features, old.out_features, old.bias is not None,
                                              gather_output=COLUMN[m.style], sequence_dim=sequence_dim, **kwargs)
        _adopt(new, old, {"weight": 0, "bias": 0}, hcg)
    elif m.style in ROW:
        assert isinstance(old, nn.Linear)
        new = RowParallelLinear(old.in_features, old.out_features, old.bias is not None,
                                input_is_parallel=ROW[m.style], sequence_dim=sequence_dim, **kwargs)
        _adopt(new, old, {"weight": 1, "bias": None}, hcg)
    else:
        assert isinstance(old, nn.Embedding)
        new = VocabParallelEmbedding(old.num_embeddings, old.embedding_dim, sequence_dim=sequence_dim,
                                     padding_idx=old.padding_idx, **kwargs)
        _adopt(new, old, {"weight": 0}, hcg)
    new.train(old.training)
    return new


@torch.no_grad()
def _adopt(new: nn.Module, old: nn.Module, dims: dict[str, int | None], hcg: HybridGroup) -> None:
    """Copy each of `old`'s tensors into `new`: this rank's block along its dim, or whole (None)."""
    for name, dim in dims.items():
        src, dst = getattr(old, name, None), getattr(new, name, None)
        if src is None or dst is None:
            continue
        dst.copy_(src if dim is None else shard_of(src, dim, hcg.mp_rank, hcg.mp_size))
        dst.requires_grad_(src.requires_grad)


def _share_tied(old: nn.Module, new: nn.Module, tied: list[tuple[torch.Tensor, nn.Parameter | None]]) -> None:
    """The uses of a tied weight hold one Parameter, the first use's (the embedding's): match_plan let through only uses
    that cut the same vocabulary rows, so each rank's block serves both, and autograd sums both gradients into it (the
    head's fused accumulation adds into the same main_grad) with no collective."""
    for i, (weight, param) in enumerate(tied):
        if old.weight is weight:
            if param is None:
                assert isinstance(new.weight, nn.Parameter)
                tied[i] = (weight, new.weight)
            else:
                new.weight = param
            return


def _broadcast_inputs(hcg: HybridGroup):
    """A forward pre-hook: tensor arguments come from the mp group's first rank (need_broadcast_data)."""

    def hook(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        names = [k for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
        values = broadcast_data(*args, *(kwargs[k] for k in names), hcg=hcg)
        return tuple(values[: len(args)]), {**kwargs, **dict(zip(names, values[len(args):]))}

    return hook
