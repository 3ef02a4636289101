"""Where each rank's piece of a tensor sits in the unparallelised tensor, as placements on the whole hybrid mesh.

A parameter may be split by tensor parallelism (on "mp", the dim its layer records) and then by FSDP2 (dim 0 of
that shard, on "sharding"; replicated on "dp"). DCP reads these placements to save and reshard across any degrees.
When both split dim 0 and the sharding axis comes before mp in the mesh, the sharding split is the inner one: a
_StridedShard, as torch's own FSDP2 + tensor parallelism lays it out.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Placement, Replicate, Shard
from torch.distributed.tensor.placement_types import _StridedShard

from ..topology.experts_mark import expert_block
from ..tensor.shards import SHARD_DIM
from ..topology.groups import HybridGroup

__all__ = ["as_global"]


def as_global(t: torch.Tensor, param: torch.Tensor | None, hcg: HybridGroup) -> DTensor:
    """`t` (laid out like `param`: the parameter itself, its optimizer state or master copy) as a DTensor over the
    whole mesh, sharing this rank's storage."""
    block = expert_block(param) if param is not None else None
    if block is not None and hcg.ep_size > 1 and hcg.expert_mesh is not None:
        return _expert_global(t, block[2], hcg.expert_mesh)
    mesh = state_mesh(hcg)
    dims = tuple(mesh.mesh_dim_names or ())
    mp_dim = getattr(param, SHARD_DIM, None) if param is not None else None
    placements: list[Placement] = [Replicate()] * len(dims)
    shape = list(t.shape)
    if isinstance(t, DTensor):  # FSDP2's: placements on its data mesh ("sharding", or "dp" and "sharding")
        for name, placement, size in zip(t.device_mesh.mesh_dim_names or (), t.placements, t.device_mesh.shape):
            if name in dims:
                placements[dims.index(name)] = placement
            else:  # left out of the state mesh, which only a dim of size 1 (splitting nothing) may be
                assert size == 1, f"FSDP2 mesh dim {name!r} of size {size} is not on the state mesh {dims}"
        t = t.to_local()
    if mp_dim is not None and hcg.mp_size > 1:
        placements[dims.index("mp")] = Shard(mp_dim)
        shape[mp_dim] *= hcg.mp_size
        _nest(placements, dims, mp_dim, hcg)
    stride = torch.empty(shape, device="meta").stride()
    return DTensor.from_local(t, mesh, placements, run_check=False, shape=torch.Size(shape), stride=stride)


def _expert_global(t: torch.Tensor, experts: int, mesh: DeviceMesh) -> DTensor:
    """This ep rank's block of the experts: Shard(0) of the whole [num_experts, ...] over ep; FSDP2's shard of the
    block (moe_sharding > 1) Shard(0) of that over moe_sharding (the mesh's inner dim); replicated over edp."""
    rows = t.shape[0]  # the block's (of FSDP2's DTensor too, whose local tensor is this rank's rows of it)
    t = t.to_local() if isinstance(t, DTensor) else t
    names = tuple(mesh.mesh_dim_names or ())
    placements = [Shard(0) if d in ("ep", "moe_sharding") else Replicate() for d in names]
    shape = [experts, *t.shape[1:]]
    assert rows * mesh.size(names.index("ep")) == experts, (rows, experts)
    stride = torch.empty(shape, device="meta").stride()
    return DTensor.from_local(t, mesh, placements, run_check=False, shape=torch.Size(shape), stride=stride)


def state_mesh(hcg: HybridGroup) -> DeviceMesh:
    """The mesh a tensor of this rank's lives on: the axes of degree > 1 (size-1 dims split nothing, and each one
    multiplies the states torch's redistribution planner searches: on the whole 6-D mesh, gathering one FSDP2
    parameter took seconds), less pp when the model is pipelined (a stage's parameters exist on its own ranks
    only; the other stages hold other keys)."""
    names = tuple(hcg.mesh.mesh_dim_names or ())
    kept = tuple(d for d in names if d != "pp")
    dims = tuple(d for d in kept if getattr(hcg, f"{d}_size") > 1) or kept[-1:]  # one size-1 dim when nothing splits
    if dims == names:
        return hcg.mesh
    if "state" not in hcg.meshes:  # one slice per init
        hcg.meshes["state"] = hcg.mesh[dims]
    return hcg.meshes["state"]


def _nest(placements: list[Any], dims: tuple[str, ...], mp_dim: int, hcg: HybridGroup) -> None:
    """mp split the tensor first, FSDP2 then split each mp shard: when both split the same dim and sharding comes
    first in the mesh, its split is strided over the mp shards."""
    if "sharding" not in dims:  # sharding_degree 1: nothing splits the mp shards further
        return
    k, m = dims.index("sharding"), dims.index("mp")
    mine = placements[k]
    if k < m and isinstance(mine, Shard) and not isinstance(mine, _StridedShard) and mine.dim == mp_dim:
        placements[k] = _StridedShard(mp_dim, split_factor=hcg.mp_size)
