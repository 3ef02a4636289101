"""ZeRO sharding on FSDP2: what each rank holds at stages 0-3 (sharding 2 and 4) next to ZeRO's formulas, and the
step time of parallel.apply_sharding next to calling fully_shard by hand on the same model (the same engine).

Stage 0 is plain data parallelism (dp = world, HybridParallelOptimizer's all-reduce). Bytes are measured from the
tensors each rank holds after a step (its local shards); the peak is the most tensor memory alive during the step
(parameters, gradients, state, activations, communication buffers), tracked op by op on CPU, by the allocator on CUDA.

Run: .venv/bin/python bench/sharding.py
"""

from __future__ import annotations

import sys
import weakref
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

import parallel  # noqa: E402
import strategy  # noqa: E402
from parallel.topology.dtensors import local  # noqa: E402

VOCAB, HIDDEN, LAYERS, ROWS, SEQ = 2048, 256, 6, 4, 64


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.up = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.down = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.down(F.gelu(self.up(self.norm(h))))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return F.cross_entropy(self.head(self.norm(h)).flatten(0, 1), ids.roll(-1, 1).flatten())


class PeakTracker(TorchDispatchMode):
    """Bytes of the tensors created inside it that are still alive, and the most at any point (CPU has no allocator
    statistics): each op's outputs count until their storage is freed."""

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self._seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and not isinstance(t, torch.distributed.tensor.DTensor):
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if key and key not in self._seen:
                    self._seen.add(key)
                    self.live += storage.nbytes()
                    self.peak = max(self.peak, self.live)
                    weakref.finalize(storage, self._free, key, storage.nbytes())
        return out

    def _free(self, key: int, nbytes: int) -> None:
        self._seen.discard(key)
        self.live -= nbytes


def _held(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, int]:
    size = lambda ts: sum(local(t).numel() * local(t).element_size() for t in ts if t is not None)  # noqa: E731
    params = list(model.parameters())
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    return {"params": size(params), "grads": size(p.grad for p in params), "state": size(state)}


def _batch(hcg, step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step)
    ids = torch.randint(0, VOCAB, (ROWS * hcg.data_size, SEQ), generator=g)
    return ids[hcg.data_rank * ROWS:(hcg.data_rank + 1) * ROWS]


def _ours(hcg):
    torch.manual_seed(0)
    model = parallel.apply_sharding(Model(), hcg=hcg)
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-4), hcg=hcg)
    return model, opt, opt.optimizer


def _by_hand(hcg, stage: int):
    """fully_shard called directly, as torch's FSDP2 tutorial does, on the same mesh and units."""
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = Model()
    mesh = hcg.mesh["sharding"]
    for block in model.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=stage == 3)
    fully_shard(model, mesh=mesh, reshard_after_forward=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt, opt


def _step(model, opt, hcg, step: int) -> None:
    model(_batch(hcg, step)).backward()
    opt.step()
    opt.zero_grad()


def run(rank, world, device, stage, rounds):
    text = (f"hybrid_configs {{ dp_degree: {world} }}" if stage == 0 else
            f"hybrid_configs {{ dp_degree: 1 sharding_degree: {world} sharding_configs {{ stage: {stage} }} }}")
    hcg = parallel.init(strategy.loads(text))
    model, opt, inner = _ours(hcg)
    _step(model, opt, hcg, 0)  # state exists
    model(_batch(hcg, 1)).backward()
    opt.step()
    held = _held(model, inner)  # after a step, gradients not yet cleared
    opt.zero_grad()
    tracker = PeakTracker()
    with tracker:  # what a step allocates on top of the parameters and state held between steps
        _step(model, opt, hcg, 2)
    peak = held["params"] + held["state"] + tracker.peak
    params = sum(p.numel() for p in Model().parameters())
    out = {"held": held, "peak": harness.max_over_ranks(peak), "params": params}
    if stage:
        theirs, their_opt, _ = _by_hand(hcg, stage)
        step = iter(range(3, 10**6))
        times = harness.interleaved({"ours": lambda: _step(model, opt, hcg, next(step)),
                                     "by hand": lambda: _step(theirs, their_opt, hcg, next(step))},
                                    harness.Timer(device), rounds)
        out["times"] = {k: harness.max_over_ranks(v) for k, v in times.items()}
    return out


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    rows, results = [], {}
    mib = 1 / 2**20
    for world in (2, 4):
        for stage in (0, 1, 2, 3):
            r = results[f"n{world}_stage{stage}"] = harness.run_ranks(world, "cpu", run, stage, args.rounds)
            psi = r["params"]
            zero = strategy.resolve(strategy.loads(
                f"hybrid_configs {{ sharding_degree: {world} sharding_configs {{ stage: {max(stage, 1)} }} }}"),
                world_size=world).model_state_memory(psi).per_rank
            if stage == 0:
                zero = zero._replace(optimizer=zero.optimizer * world)  # no sharding: everything whole
            held = r["held"]
            ratio = r["times"]["ours"] / r["times"]["by hand"] if stage else None
            rows.append([f"N={world} stage {stage}", held["params"] * mib, held["grads"] * mib, held["state"] * mib,
                         zero.total * mib, sum(held.values()) * mib, r["peak"] * mib,
                         f"{r['times']['ours'] * 1e3:.1f}" if stage else "-",
                         f"{r['times']['by hand'] * 1e3:.1f}" if stage else "-", f"{ratio:.3f}" if ratio else "-"])
    print(harness.table(
        f"per-rank model state (MiB), {results['n2_stage0']['params']:,} parameters, fp32 AdamW; step time (ms)",
        ["layout", "params", "grads", "Adam state", "ZeRO formula", "held", "peak", "ours ms", "by hand ms", "ratio"],
        rows,
        "ZeRO formula: (4+4+8)Ψ with stage 1 sharding the state (/N), stage 2 the gradients too, stage 3 the "
        "parameters too. This project's stages 1-2 also hold gradients and parameters sharded at rest (FSDP2 reshards "
        "after backward); they differ from stage 3 in keeping a block's parameters gathered from forward to backward. "
        "'by hand': fully_shard on the same units and mesh with a plain AdamW."))
    harness.save("sharding", "cpu", {"results": results}, args.json)


if __name__ == "__main__":
    main()
