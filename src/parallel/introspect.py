"""Counting what a step does: autograd nodes, aten ops (copies included) and collectives.

Used by the tests and benchmarks to show what each mp flag removes; cheap enough to use in a notebook.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["OpCounter", "count_collectives", "graph_nodes"]

_COLLECTIVES = ("all_reduce", "all_gather", "broadcast", "all_gather_object", "reduce_scatter", "all_gather_single",
                "reduce_scatter_single")


class OpCounter(TorchDispatchMode):
    """Counts the aten ops that run inside it by name (copies show up as `clone` and `copy_`)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket.__name__)] += 1
        return func(*args, **(kwargs or {}))

    @property
    def copies(self) -> int:
        return self.ops["clone"] + self.ops["copy_"]


def graph_nodes(t: torch.Tensor) -> int:
    """Number of autograd nodes reachable from `t.grad_fn`."""
    seen, stack = set(), [t.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(next_fn for next_fn, _ in node.next_functions)
    return len(seen)


@contextmanager
def count_collectives() -> Iterator[Counter[str]]:
    """Count torch.distributed collectives issued inside the block, by name."""
    counts: Counter[str] = Counter()
    originals = {name: getattr(dist, name) for name in _COLLECTIVES if hasattr(dist, name)}

    def wrap(name, fn):
        counted_as = name.removesuffix("_single")  # all_gather_single is an all-gather, as the list form is

        def counted(*args, **kwargs):
            counts[counted_as] += 1
            return fn(*args, **kwargs)

        return counted

    for name, fn in originals.items():
        setattr(dist, name, wrap(name, fn))
    try:
        yield counts
    finally:
        for name, fn in originals.items():
            setattr(dist, name, fn)
