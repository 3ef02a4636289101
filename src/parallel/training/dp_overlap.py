"""The dp gradient average overlapped with the backward, bucket by bucket, as torch's DDP and Paddle's DataParallel do:
when every gradient of a bucket is ready in the update's last backward, its all-reduce starts asynchronously; the
backward's end waits for them, so when `backward()` returns the gradients are the dp average.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from ..topology.guard import guard

__all__ = ["DpBuckets", "BUCKET_BYTES"]

BUCKET_BYTES = 25 * 2**20  # DDP's bucket_cap_mb default


class _Bucket:
    __slots__ = ("params", "waiting", "work", "flat", "started")

    def __init__(self, params: list[nn.Parameter]) -> None:
        self.params = params
        self.waiting = len(params)
        self.work: dist.Work | None = None
        self.flat: torch.Tensor | None = None
        self.started: float | None = None  # perf_counter when its all-reduce was launched (bench/dp.py)


class DpBuckets:
    """Post-accumulate-grad hooks on `params` (a model's dp-replicated parameters with `.grad`), grouped into buckets
    of about `bucket_bytes` in reverse order (the backward produces the last layers' gradients first).

    Args:
        params: the parameters to average over `group`, in registration (forward) order.
        group: the dp group.
        reducing: asked at each gradient: whether this backward is the last of an update (gradient merge reduces
            only the merged sum, as DDP's `no_sync` does for the other micro-steps).
        bucket_bytes: the size a bucket fills up to (one parameter may exceed it alone).
    """

    def __init__(self, params: list[nn.Parameter], group: dist.ProcessGroup, *, reducing: Callable[[], bool],
                 bucket_bytes: int = BUCKET_BYTES) -> None:
        self.group = group
        self.size = dist.get_world_size(group)
        self._reducing = reducing
        self.buckets: list[_Bucket] = []
        current: list[nn.Parameter] = []
        filled = 0
        for p in reversed(params):
            if current and (filled + p.numel() * p.element_size() > bucket_bytes or p.dtype != current[0].dtype):
                self.buckets.append(_Bucket(current))
                current, filled = [], 0
            current.append(p)
            filled += p.numel() * p.element_size()
        if current:
            self.buckets.append(_Bucket(current))
        self._of = {p: b for b in self.buckets for p in b.params}
        self.reduced: set[nn.Parameter] = set()  # averaged in this update's backward; step() leaves them alone
        self._queued = False
        self.backward_started: float | None = None
        self._handles = [p.register_post_accumulate_grad_hook(self._ready) for p in params]

    def _ready(self, p: torch.Tensor) -> None:
        if not self._reducing():
            return
        if not self._queued:  # the first gradient of this backward: wait for the buckets when it ends
            self._queued = True
            self.backward_started = time.perf_counter()
            for b in self.buckets:
                b.started = None
            torch.autograd.Variable._execution_engine.queue_callback(self._finish)
        bucket = self._of[p]  # type: ignore[index]
        bucket.waiting -= 1
        if bucket.waiting == 0:
            self._launch(bucket)

    def _launch(self, bucket: _Bucket) -> None:
        bucket.flat = _flatten_dense_tensors([p.grad for p in bucket.params])  # type: ignore[misc]
        bucket.started = time.perf_counter()
        with guard("dp gradient all-reduce (overlapped with the backward)", self.group):
            bucket.work = dist.all_reduce(bucket.flat, group=self.group, async_op=True)

    def _finish(self) -> None:
        """At the backward's end: wait for every launched bucket and put the average back; a bucket some gradient of
        which never came (a parameter this backward did not reach) is left to step(), which reduces it in one piece."""
        for bucket in self.buckets:
            if bucket.work is not None:
                with guard("dp gradient all-reduce (overlapped with the backward)", self.group):
                    bucket.work.wait()
                assert bucket.flat is not None
                bucket.flat.div_(self.size)
                grads = [p.grad for p in bucket.params]
                for g, averaged in zip(grads, _unflatten_dense_tensors(bucket.flat, grads)):  # type: ignore[arg-type]
                    g.copy_(averaged)  # type: ignore[union-attr]
                self.reduced.update(bucket.params)
            bucket.work, bucket.flat, bucket.waiting = None, None, len(bucket.params)
        self._queued = False

    def starts(self) -> list[float]:
        """Seconds from the backward's first gradient to each bucket's launch, in launch order (the last update)."""
        t0 = self.backward_started or 0.0
        return sorted(b.started - t0 for b in self.buckets if b.started is not None)

    def clear(self) -> None:
        """After the step: nothing reduced yet for the next update."""
        self.reduced.clear()

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
