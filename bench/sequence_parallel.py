"""Sequence parallelism: activation memory and step time of a stack of pre-norm MLP blocks at mp 2.

Ours without sequence parallelism, with it, and with recompute_allgather, next to torch's DTensor tensor
parallelism without and with `SequenceParallel` on the same blocks. Activation memory is what autograd saves
for the backward (saved-tensor hooks, each storage counted once), per rank: deterministic on any device.

Run: .venv/bin/python bench/sequence_parallel.py [--device cuda]
"""

from __future__ import annotations

import dataclasses
import sys
from collections import OrderedDict
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

import parallel  # noqa: E402

S, B, H, F_, LAYERS = 1024, 4, 512, 2048, 4  # [s, b, h]: sequence first, as Paddle and Megatron lay it out


def with_sp(hcg: parallel.HybridGroup, on: bool, recompute: bool = False) -> parallel.HybridGroup:
    """The same groups, other mp settings (layers read their settings from the hcg they are given)."""
    mp = dataclasses.replace(hcg.resolved.mp, sequence_parallel=on, recompute_allgather=recompute, sp_async_reduce_scatter=on)
    return dataclasses.replace(hcg, resolved=dataclasses.replace(hcg.resolved, mp=mp))


class OurBlock(nn.Module):
    def __init__(self, hcg: parallel.HybridGroup, dev: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.norm = parallel.mark_sequence_parallel(nn.LayerNorm(H, device=dev, dtype=dtype), hcg=hcg)
        self.up = parallel.ColumnParallelLinear(H, F_, gather_output=False, hcg=hcg, device=dev, dtype=dtype)
        self.down = parallel.RowParallelLinear(F_, H, input_is_parallel=True, hcg=hcg, device=dev, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class TorchBlock(nn.Module):
    def __init__(self, dev: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(H, device=dev, dtype=dtype)
        self.mlp = nn.Sequential(OrderedDict(up=nn.Linear(H, F_, device=dev, dtype=dtype), act=nn.GELU(),
                                             down=nn.Linear(F_, H, device=dev, dtype=dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


def ours(hcg, sp: bool, recompute: bool, dev, dtype):
    g = with_sp(hcg, sp, recompute)
    blocks = nn.Sequential(*[OurBlock(g, dev, dtype) for _ in range(LAYERS)])
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(blocks.parameters(), lr=0.0), hcg=g)
    rows = S // hcg.mp_size if sp else S
    x = torch.randn(rows, B, H, device=dev, dtype=dtype, requires_grad=True)

    def step():
        blocks(x).sum().backward()
        opt.step()  # sums the sequence-parallel norm gradients over the mp group (lr 0: weights stay)
        opt.zero_grad()
    return step, lambda: blocks(x), blocks


def torch_tp(hcg, sp: bool, dev, dtype):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel,
                                                   parallelize_module)

    mesh = init_device_mesh(dev.type, (hcg.mp_size,))
    blocks = nn.Sequential(*[TorchBlock(dev, dtype) for _ in range(LAYERS)])
    for block in blocks:
        if sp:  # torchtitan's plan: norms on the local sequence block, all-gather into the MLP, reduce-scatter out
            plan = {"norm": SequenceParallel(sequence_dim=0),
                    "mlp": PrepareModuleInput(input_layouts=(Shard(0),), desired_input_layouts=(Replicate(),)),
                    "mlp.up": ColwiseParallel(), "mlp.down": RowwiseParallel(output_layouts=Shard(0))}
        else:
            plan = {"mlp.up": ColwiseParallel(), "mlp.down": RowwiseParallel()}
        parallelize_module(block, mesh, plan)
    rows = S // hcg.mp_size if sp else S
    x = torch.randn(rows, B, H, device=dev, dtype=dtype, requires_grad=True)

    def step():
        blocks(x).sum().backward()
        blocks.zero_grad(set_to_none=True)
    return step, lambda: blocks(x), blocks


def saved_mib(blocks: nn.Module, forward) -> dict[str, float]:
    """MiB autograd keeps for the backward of one forward, each storage once (DTensors by their local part),
    split into the norms (the sequence-parallel region), the column layers' inputs, and the rest."""
    storages: dict[int, tuple[str, int]] = {}
    owner = ["rest"]

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = getattr(t, "_local_tensor", t).untyped_storage()
        storages.setdefault(storage.data_ptr(), (owner[0], storage.nbytes()))
        return t

    hooks = []
    for block in blocks:
        for name, module in (("norms", block.norm), ("column inputs", getattr(block, "up", None) or block.mlp.up)):
            hooks.append(module.register_forward_pre_hook(lambda m, a, name=name: owner.__setitem__(0, name)))
            hooks.append(module.register_forward_hook(lambda m, a, o: owner.__setitem__(0, "rest")))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = forward()
    del out
    for h in hooks:
        h.remove()
    parts = {k: 0.0 for k in ("norms", "column inputs", "rest")}
    for kind, nbytes in storages.values():
        parts[kind] += nbytes / 2**20
    return parts | {"total": sum(parts.values())}


def run(rank, world, device, rounds):
    hcg, dtype, dev, timer = harness.setup(rank, world, device)
    torch.manual_seed(0)
    built = {
        "ours: tensor parallel": ours(hcg, False, False, dev, dtype),
        "ours: + sequence_parallel": ours(hcg, True, False, dev, dtype),
        "ours: + sequence_parallel + recompute_allgather": ours(hcg, True, True, dev, dtype),
        "torch DTensor: Colwise/Rowwise": torch_tp(hcg, False, dev, dtype),
        "torch DTensor: + SequenceParallel": torch_tp(hcg, True, dev, dtype),
    }
    memory = {name: {k: harness.max_over_ranks(v) for k, v in saved_mib(blocks, fwd).items()}
              for name, (_, fwd, blocks) in built.items()}
    times = harness.interleaved({name: step for name, (step, _, _) in built.items()}, timer, rounds)
    return {"memory_mib": memory, "seconds": {name: harness.max_over_ranks(t) for name, t in times.items()}}


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    result = harness.run_ranks(2, args.device, run, args.rounds)
    mem, sec = result["memory_mib"], result["seconds"]
    base, base_t = mem["ours: tensor parallel"], sec["torch DTensor: + SequenceParallel"]
    rows = [[name, m["norms"], m["norms"] / base["norms"], m["column inputs"], m["total"], m["total"] / base["total"],
             sec[name] * 1e3, sec[name] / base_t] for name, m in mem.items()]
    print(harness.table(
        f"{LAYERS} pre-norm MLP blocks, s={S} b={B} h={H} ffn={F_}, mp=2: activations saved for backward (MiB per rank) "
        "and step time",
        ["variant", "norms (region)", "vs TP", "column inputs", "total", "vs TP", "ms/step", "vs DTensor+SP"], rows))
    harness.save("sequence_parallel", args.device, {"rounds": args.rounds, "shape": [S, B, H, F_, LAYERS], **result}, args.json)


if __name__ == "__main__":
    main()
