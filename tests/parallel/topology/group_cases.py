"""Rank-side checks of parallel.init: layout, agreement between ranks, errors on every rank."""

from __future__ import annotations

import gc
import time
import weakref

import torch
import torch.distributed as dist

import parallel
import strategy
from distributed import thread_count
from rank_helpers import init, make_strategy, tiny_llama


def layout(dp: int, mp: int) -> dict:
    hcg = init(make_strategy(mp, dp=dp))
    return {
        "rank": hcg.rank,
        "mp_ranks": list(dist.get_process_group_ranks(hcg.mp_group)),
        "dp_ranks": list(dist.get_process_group_ranks(hcg.dp_group)),
        "mp_rank": hcg.mp_rank,
        "dp_rank": hcg.dp_rank,
        "sizes": (hcg.mp_size, hcg.dp_size, hcg.world_size),
        "current_is_it": parallel.current() is hcg,
    }


def current_before_init() -> str:
    try:
        parallel.current()
    except RuntimeError as e:
        return str(e)
    raise AssertionError("current() did not raise before init")


def disagreeing_strategies() -> tuple[str, float]:
    rank = dist.get_rank()
    flags = (rank == 1, False, False)  # rank 1 turns on mp_async_allreduce, rank 0 does not
    start = time.monotonic()
    try:
        init(make_strategy(dist.get_world_size(), flags=flags))
    except strategy.StrategyError as e:
        return str(e), time.monotonic() - start
    raise AssertionError("init accepted disagreeing strategies")


def one_rank_cannot_load(path_for_rank_1: str) -> str:
    """Rank 1's file is missing; every rank must raise instead of waiting for it."""
    target = path_for_rank_1 if dist.get_rank() == 1 else make_strategy(dist.get_world_size())
    try:
        parallel.init(target)
    except strategy.StrategyError as e:
        return str(e)
    raise AssertionError("init succeeded although rank 1 could not load its strategy")


def init_from_path(path: str) -> tuple[int, bool]:
    hcg = parallel.init(path)
    return hcg.resolved.mp_degree, hcg.resolved.mp.async_allreduce


def destroy_releases_groups() -> bool:
    init(make_strategy(dist.get_world_size()))
    parallel.destroy()
    parallel.destroy()  # idempotent
    try:
        parallel.current()
    except RuntimeError:
        return dist.is_initialized()  # the default group was not created by init, so it stays
    return False


def destroy_lets_the_meshes_and_their_threads_go(text: str) -> dict:
    """A Llama stepped at `text` and gathered whole (torch's DTensor caches then key on its meshes; dp's buckets hook
    its parameters), then dropped: afterwards nothing holds the model, its optimizer or the layout's meshes, and
    their groups' gloo threads have ended."""
    threads = thread_count()
    hcg = init(strategy.loads(text))
    model = parallel.parallelize(tiny_llama(1, vocab=32, seq=8))
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3))
    ids = torch.randint(0, 32, (2, 8))
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    whole = parallel.full_state_dict(model)
    held = [weakref.ref(m) for m in (hcg.mesh, *hcg.meshes.values(), model, opt)]
    result = {"gathered": sorted(whole) == sorted(tiny_llama(1, vocab=32, seq=8).state_dict()),
              "derived": sorted(hcg.meshes), "buckets": opt.dp_buckets is not None}
    del model, opt, hcg
    parallel.destroy()
    gc.collect()  # (a model with hooks is a reference cycle)
    alive = sum(ref() is not None for ref in held)
    return result | {"alive": alive, "threads": thread_count() - threads}


def axes_match_the_resolved_layout(text: str) -> dict:
    """Every axis's group, rank, size and ranks, and mesh[axis]'s group, are what the strategy resolves to."""
    hcg = init(strategy.loads(text))
    resolved = hcg.resolved
    layout = resolved.process_groups()
    coordinates = resolved.coordinates(hcg.rank)
    assert tuple(hcg.mesh.mesh_dim_names) == resolved.order == tuple(layout)
    for axis, groups in layout.items():
        (mine,) = [g for g in groups if hcg.rank in g]
        group = getattr(hcg, f"{axis}_group")
        assert list(dist.get_process_group_ranks(group)) == mine, axis
        assert list(getattr(hcg, f"{axis}_ranks")) == mine, axis
        assert getattr(hcg, f"{axis}_rank") == mine.index(hcg.rank) == coordinates[axis], axis
        assert getattr(hcg, f"{axis}_size") == resolved.degrees[axis] == len(mine), axis
        assert list(dist.get_process_group_ranks(hcg.mesh[axis].get_group())) == mine, f"mesh[{axis!r}]"
        assert hcg.group(axis) is group
    return {"rank": hcg.rank, "data": (hcg.data_rank, hcg.data_size), "coordinates": coordinates}


def every_axis_by_name(text: str) -> dict:
    """hcg.axis(name) and hcg.group(name) for the dense axes and the expert ones, and the flat names beside them."""
    hcg = init(strategy.loads(text))
    names = ("dp", "pp", "sharding", "sep", "cp", "mp", "ep", "moe_sharding", "edp", "ep_mp")
    records = {n: (hcg.axis(n).rank, hcg.axis(n).size, hcg.axis(n).ranks) for n in names}
    flat = {n: (getattr(hcg, f"{n}_rank"), getattr(hcg, f"{n}_size"), getattr(hcg, f"{n}_ranks")) for n in names}
    sizes = {}
    for n in names:
        try:
            sizes[n] = dist.get_world_size(hcg.group(n))
        except ValueError as e:
            sizes[n] = str(e)
    return {"records": records, "flat": flat, "sizes": sizes}
