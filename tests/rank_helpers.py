"""Helpers used inside spawned ranks: strategies by flags, quiet init, comparisons and op counting."""

from __future__ import annotations

import warnings
from collections import Counter
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

import parallel
import strategy

FLAG_NAMES = ("mp_async_allreduce", "mp_skip_c_identity", "mp_fused_linear_param_grad_add")
RTOL, ATOL = 1e-5, 1e-6


def make_strategy(mp: int, dp: int = 1, flags: tuple[bool, bool, bool] = (False, False, False), **mp_config) -> strategy.DistributedStrategy:
    s = strategy.DistributedStrategy()
    s.hybrid_configs.dp_degree = dp
    s.hybrid_configs.mp_degree = mp
    for name, value in zip(FLAG_NAMES, flags):
        setattr(s.hybrid_configs.mp_configs, name, value)
    for name, value in mp_config.items():
        setattr(s.hybrid_configs.mp_configs, name, value)
    return s


def init(s: strategy.DistributedStrategy, policy: str = "strict") -> parallel.HybridGroup:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", strategy.StrategyWarning)
        return parallel.init(s, policy=policy)


def close(actual: torch.Tensor, expected: torch.Tensor, what: str, rtol: float = RTOL, atol: float = ATOL) -> None:
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


def shard(t: torch.Tensor, dim: int, hcg: parallel.HybridGroup) -> torch.Tensor:
    return t.chunk(hcg.mp_size, dim=dim)[hcg.mp_rank]


@contextmanager
def count_collectives():
    """Count torch.distributed collectives issued inside the block (patched at module level)."""
    counts: Counter[str] = Counter()
    names = ("all_reduce", "all_gather", "broadcast", "all_gather_object")
    originals = {n: getattr(dist, n) for n in names}

    def wrap(name, fn):
        def counted(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)
        return counted

    for n, fn in originals.items():
        setattr(dist, n, wrap(n, fn))
    try:
        yield counts
    finally:
        for n, fn in originals.items():
            setattr(dist, n, fn)


class OpCounter(TorchDispatchMode):
    """Counts the aten ops that run inside it (copies show up as aten.clone / aten.copy_)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket.__name__)] += 1
        return func(*args, **(kwargs or {}))


def graph_nodes(t: torch.Tensor) -> int:
    """Number of autograd nodes reachable from t.grad_fn."""
    seen, stack = set(), [t.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(next_fn for next_fn, _ in node.next_functions)
    return len(seen)
