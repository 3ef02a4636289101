"""ZeRO sharding over the mesh's sharding axis on torch's FSDP2 (`fully_shard`): one unit per block, plus the root.

Stage 1 and 2 keep each unit's parameters gathered from forward to backward; stage 3 frees them after the forward
and gathers them again for the backward. With dp > 1 it is hybrid sharding: replicated over dp, sharded over
sharding; FSDP2 reduce-scatters the gradients and averages them over dp × sharding.
"""

from __future__ import annotations

import weakref

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

from strategy import StrategyError

from ..blocks import block_names
from ..tensor.sequence import flag_unreduced, is_sequence_parallel
from ..topology.experts_mark import is_expert
from ..topology.groups import HybridGroup, current, mesh_over
from ..topology.coalesced import broadcast_coalesced

__all__ = ["apply_sharding", "data_mesh", "sharded_roots", "sharding_units"]

FIELD = "hybrid_configs.sharding_degree"
_ROOT = "_parallel_fsdp_root"  # on each sharded parameter: a weak reference to its FSDP2 root module


def apply_sharding(model: nn.Module, *, hcg: HybridGroup | None = None) -> nn.Module:
    """Shard `model` over the sharding axis as the strategy's `sharding_configs.stage` says; unchanged when
    sharding_degree is 1. Call it after tensor parallelism and recompute (parallelize does), before building the
    optimizer. Every parameter starts from the values of the first data rank (dp 0, sharding 0), as DDP does.

    Raises:
        StrategyError: the model has no blocks to make FSDP units of (saying what to add), before any change.
    """
    hcg = hcg or current()
    if hcg.sharding_size == 1:
        return model
    if isinstance(model, FSDPModule):
        raise RuntimeError(f"{type(model).__name__} is already sharded (apply_sharding was called twice)")
    stage = hcg.resolved.sharding.stage
    modules = dict(model.named_modules())
    blocks = sharding_units(model, hcg)
    _start_from_first_data_rank(model, hcg)
    markers = {name: _markers(p) for name, p in model.named_parameters()}
    mesh = data_mesh(hcg)
    policy = _mixed_precision(hcg)
    # Experts split over ep are each rank's block: FSDP2 shards them over moe_sharding (their own mesh), or not at all.
    experts = {p for p in model.parameters() if is_expert(p)} or None
    if experts and hcg.moe_sharding_size > 1:
        _shard_experts(model, hcg, stage, policy)
        experts = None  # each experts module is a unit of its own now: the blocks around it leave its parameters
    for name in blocks:  # bottom-up: each block one all-gather / reduce-scatter group
        fully_shard(modules[name], mesh=mesh, reshard_after_forward=stage == 3, mp_policy=policy, ignored_params=experts)
    fully_shard(model, mesh=mesh, reshard_after_forward=False, mp_policy=policy,  # the rest: embeddings, norm, head
                ignored_params=experts)
    root = weakref.ref(model)
    for name, p in model.named_parameters():  # FSDP2 made new parameters: carry our markers over
        for key, value in markers.get(name, {}).items():
            setattr(p, key, value)
        setattr(p, _ROOT, root)
    regional = [p for p in model.parameters() if is_sequence_parallel(p) and p.requires_grad]
    if regional and hcg.resolved.mp.sequence_parallel:
        # FSDP2 assigns the reduced shard's gradient (no autograd accumulation hook fires on it): each forward
        # makes the sequence-parallel gradients due their sum over the mp group again.
        model.register_forward_pre_hook(lambda *_: _flag_all(regional))
    return model


def _shard_experts(model: nn.Module, hcg: HybridGroup, stage: int, policy: MixedPrecisionPolicy) -> None:
    """Each module holding experts one FSDP2 unit over the expert data mesh (moe_sharding, replicated over edp).

    FSDP2 would average an expert's gradient over the ranks holding its block; what each holds is its tokens'
    share of every data rank's loss, so the sum over them is divided by the number of distinct batches instead
    (`HybridGroup.expert_grad_divisor`), as the dense average over the data ranks is. A block no token reached on a
    rank still joins the reduce-scatter, with zeros."""
    mesh = hcg.expert_data_mesh
    assert mesh is not None
    for m in [m for m in model.modules() if any(is_expert(p) for p in m.parameters(recurse=False))]:
        unit = fully_shard(m, mesh=mesh, reshard_after_forward=stage == 3, mp_policy=policy)
        unit.set_gradient_divide_factor(float(hcg.expert_grad_divisor))
        if mesh.device_type == "cpu":  # gloo has no pre-multiplied sum (NCCL's division by that factor): sum, then divide
            unit.set_force_sum_reduction_for_comms(True)
        unit.set_reduce_scatter_unused_params(True)


def sharding_units(model: nn.Module, hcg: HybridGroup) -> list[str]:
    """The blocks that become FSDP2 units (the root takes the rest); checked before anything changes.

    Raises:
        StrategyError: sharding is on and the model has no blocks, or the mesh cannot shard as asked.
    """
    if hcg.sharding_size == 1:
        return []
    data_mesh(hcg)
    blocks = block_names(model)
    if not blocks:
        raise StrategyError(
            f"{FIELD} is {hcg.sharding_size}, but {type(model).__name__} has no blocks to shard one by one: give the "
            "model a `_no_split_modules` list naming its block classes (as Hugging Face models have), or keep its "
            "blocks in an nn.ModuleList", field=FIELD)
    return blocks


def data_mesh(hcg: HybridGroup) -> DeviceMesh:
    """The mesh FSDP2 shards over: ("dp", "sharding") when dp > 1 (replicate, shard), else ("sharding",)."""
    if hcg.dp_size == 1:
        return hcg.mesh["sharding"]
    order = hcg.resolved.order
    if order.index("dp") < order.index("sharding"):
        return hcg.mesh["dp", "sharding"]
    # sharding outside dp (Paddle's MoE order): the same groups as a mesh of its own, replicate dim first
    if "data" not in hcg.meshes:  # one per init
        names = tuple(hcg.mesh.mesh_dim_names or ())
        hcg.meshes["data"] = mesh_over(hcg.mesh.mesh, names, ("dp", "sharding"), [hcg.dp_group, hcg.sharding_group],
                                       hcg.rank, hcg.mesh.device_type)
    return hcg.meshes["data"]


def sharded_roots(params: list[nn.Parameter]) -> list[FSDPModule]:
    """The FSDP2 roots (one per apply_sharding) that own any of `params`, each once."""
    roots: dict[int, FSDPModule] = {}
    for p in params:
        ref = getattr(p, _ROOT, None)
        root = ref() if ref is not None else None
        if root is not None:
            roots[id(root)] = root
    return list(roots.values())


def _flag_all(params: list[nn.Parameter]) -> None:
    for p in params:
        flag_unreduced(p)


def _markers(p: nn.Parameter) -> dict[str, object]:
    """What this package set on a parameter (mp shard dim, sequence-parallel flags); not gradients or buffers."""
    return {k: v for k, v in vars(p).items() if k != "main_grad" and not callable(v)}


def _mixed_precision(hcg: HybridGroup) -> MixedPrecisionPolicy:
    """Pure fp16/bf16: the fp32 shards are the master weights; FSDP2 gathers them in the low dtype for compute and
    reduces gradients in fp32 (torchtitan's choice). Otherwise parameters keep their dtype."""
    amp = hcg.resolved.amp
    if not (amp.enabled and amp.pure):
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=getattr(torch, amp.dtype), reduce_dtype=torch.float32)


@torch.no_grad()
def _start_from_first_data_rank(model: nn.Module, hcg: HybridGroup) -> None:
    """FSDP2 shards whatever each rank holds: make every data rank hold the same values first."""
    dense = [p.detach() for p in model.parameters() if not is_expert(p)]
    experts = [p.detach() for p in model.parameters() if is_expert(p)]
    # Experts split over ep are each rank's own block: the same as the other holders of that block's.
    for tensors, groups in ((dense, ((hcg.sharding_group, hcg.sharding_size), (hcg.dp_group, hcg.dp_size))),
                            (experts, ((hcg.moe_sharding_group, hcg.moe_sharding_size), (hcg.edp_group, hcg.edp_size)))):
        for group, size in groups:
            if tensors and size > 1 and group is not None:
                broadcast_coalesced(tensors, group)
