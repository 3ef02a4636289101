"""Helpers used inside spawned ranks: strategies by flags, quiet init, comparisons and op counting."""

from __future__ import annotations

import warnings

import torch

import parallel
import strategy
from parallel.introspect import OpCounter, count_collectives, graph_nodes  # noqa: F401  (re-exported for the cases)

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


def data_mean(value: torch.Tensor | float, hcg: parallel.HybridGroup) -> float:
    """The whole batch's loss from this rank's: sep (cp) shares summed, then the mean over the data ranks (dp ×
    sharding)."""
    import torch.distributed as dist

    t = torch.as_tensor(value, dtype=torch.float64).detach().clone()
    for axis in ("sep", "cp"):
        if getattr(hcg, f"{axis}_size") > 1:
            dist.all_reduce(t, group=hcg.group(axis))
    for axis in ("dp", "sharding"):
        if getattr(hcg, f"{axis}_size") > 1:
            dist.all_reduce(t, group=hcg.group(axis))
            t /= getattr(hcg, f"{axis}_size")
    return float(t)


def close(actual: torch.Tensor, expected: torch.Tensor, what: str, rtol: float = RTOL, atol: float = ATOL) -> None:
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


def shard(t: torch.Tensor, dim: int, hcg: parallel.HybridGroup) -> torch.Tensor:
    return t.chunk(hcg.mp_size, dim=dim)[hcg.mp_rank]


class RecordedWait:
    """Wraps a collective's work handle so a test sees when the backward waits on it."""

    def __init__(self, work, events: list[str]) -> None:
        self.work, self.events = work, events

    def wait(self):
        self.events.append("wait")
        return self.work.wait()
