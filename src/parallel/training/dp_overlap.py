"""The dp gradient average overlapped with the backward, bucket by bucket, as torch's DDP and Paddle's DataParallel do:
when every gradient of a bucket is ready in the update's last backward, its all-reduce starts asynchronously; the
backward's end waits for them, so when `backward()` returns the gradients are the dp average.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from strategy import DpBucketSettings

from ..topology.guard import guard

__all__ = ["BUCKET_BYTES", "DpBuckets", "FIRST_BUCKET_BYTES"]

# fuse_grad_size_in_MB's and last_comm_group_size_MB's defaults (Paddle's DataParallel buffers; DDP's first bucket is
# 1 MiB too, its others 25)
BUCKET_BYTES, FIRST_BUCKET_BYTES = DpBucketSettings()


class _Bucket:
    __slots__ = ("params", "ready", "work", "flat", "started")

    def __init__(self, params: list[nn.Parameter]) -> None:
        self.params = params
        self.ready: set[int] = set()  # ids of the parameters whose gradient of this update is complete
        self.work: dist.Work | None = None
        self.flat: torch.Tensor | None = None
        self.started: float | None = None  # perf_counter when its all-reduce was launched (bench/dp.py)


def _call(method: weakref.WeakMethod, p: torch.Tensor) -> None:
    ready = method()
    if ready is not None:
        ready(p)


class DpBuckets:
    """Post-accumulate-grad hooks on `params` (a model's dp-replicated parameters with `.grad`), grouped into buckets
    of about `bucket_bytes` in reverse order (the backward produces the last layers' gradients first).

    Every rank launches the buckets in the same order (the collectives pair up by order): bucket k starts once its
    gradients are ready and buckets 0..k-1 have started. A bucket some gradient of which this backward did not
    produce (a parameter this rank's loss did not reach) starts at the backward's end with zeros for it, as
    step() would have reduced it; a rank whose backward reached none of them starts them all in step() (`flush`).

    Args:
        params: the parameters to average over `group`, in registration (forward) order.
        group: the dp group.
        reducing: asked at each gradient: whether this backward is the last of an update (gradient merge reduces
            only the merged sum, as DDP's `no_sync` does for the other micro-steps).
        bucket_bytes: the size a bucket fills up to (one parameter may exceed it alone): fuse_grad_size_in_MB.
        first_bucket_bytes: the first bucket's (the last layers' gradients, ready first), smaller so that
            communication starts early: last_comm_group_size_MB.
        micro_batches: under a pipeline (pp_configs.dp_comm_overlap), the backwards a step runs through each of this
            rank's stages: a gradient is complete at its `micro_batches`-th; the step's end (`flush`, in step())
            waits for the buckets instead of each backward's.
    """

    def __init__(self, params: list[nn.Parameter], group: dist.ProcessGroup, *, reducing: Callable[[], bool],
                 bucket_bytes: int = BUCKET_BYTES, first_bucket_bytes: int = FIRST_BUCKET_BYTES,
                 micro_batches: int | None = None) -> None:
        self.group = group
        self._micro_batches = micro_batches
        self._seen: dict[int, int] = {}  # under a pipeline: each parameter's gradients so far this step
        self.size = dist.get_world_size(group)
        self._reducing = reducing
        self.buckets: list[_Bucket] = []
        current: list[nn.Parameter] = []
        filled = 0
        for p in reversed(params):
            cap = bucket_bytes if self.buckets else first_bucket_bytes
            if current and (filled + p.numel() * p.element_size() > cap or p.dtype != current[0].dtype):
                self.buckets.append(_Bucket(current))
                current, filled = [], 0
            current.append(p)
            filled += p.numel() * p.element_size()
        if current:
            self.buckets.append(_Bucket(current))
        self._of = {id(p): b for b in self.buckets for p in b.params}
        self.reduced: set[nn.Parameter] = set()  # averaged in this update; step() leaves them alone
        self.filled: list[nn.Parameter] = []  # given zeros for a gradient this rank's loss never reached
        self._next = 0  # the next bucket to start, in order
        self._queued = False  # a backward of this update is running, its end will wait for the buckets
        self.backward_started: float | None = None
        self.overlapped = 0  # buckets of the last update started while gradients were still coming (not at the end)
        # (the hooks hold the buckets weakly: torch keeps a tensor's hooks where Python's collector cannot see, so a
        # hook holding what holds the parameter would keep the model, its optimizer and its groups alive forever)
        mine = weakref.WeakMethod(self._ready)
        self._handles = [p.register_post_accumulate_grad_hook(lambda p: _call(mine, p)) for p in params]

    def _ready(self, p: torch.Tensor) -> None:
        if not self._reducing():
            return
        if not self._queued:  # the first gradient of this update: wait for the buckets when its backward ends
            self._queued = True
            self.backward_started = time.perf_counter()
            self.overlapped = 0
            for b in self.buckets:
                b.started = None
            if self._micro_batches is None:  # (a pipeline's backwards are one per micro-batch: step() waits)
                torch.autograd.Variable._execution_engine.queue_callback(self._finish)
        if self._micro_batches is not None:
            self._seen[id(p)] = self._seen.get(id(p), 0) + 1
            if self._seen[id(p)] < self._micro_batches:
                return
        self._of[id(p)].ready.add(id(p))
        while self._next < len(self.buckets) and len(self.buckets[self._next].ready) == len(self.buckets[self._next].params):
            self._launch(self.buckets[self._next])
            self.overlapped += 1

    def _launch(self, bucket: _Bucket) -> None:
        for p in bucket.params:
            if p.grad is None:  # not reached by this rank's loss: its share of the average is zero
                p.grad = torch.zeros_like(p)
                self.filled.append(p)
        bucket.flat = _flatten_dense_tensors([p.grad for p in bucket.params])  # type: ignore[misc]
        bucket.started = time.perf_counter()
        self._next += 1
        with guard("dp gradient all-reduce (overlapped with the backward)", self.group):
            bucket.work = dist.all_reduce(bucket.flat, group=self.group, async_op=True)

    def _finish(self) -> None:
        """At the backward's end (or in step(), see `flush`): start what has not started, in order, wait for every
        bucket and put the averages back."""
        while self._next < len(self.buckets):
            self._launch(self.buckets[self._next])
        for bucket in self.buckets:
            assert bucket.work is not None and bucket.flat is not None
            with guard("dp gradient all-reduce (overlapped with the backward)", self.group):
                bucket.work.wait()
            bucket.flat.div_(self.size)
            grads = [p.grad for p in bucket.params]
            for g, averaged in zip(grads, _unflatten_dense_tensors(bucket.flat, grads)):  # type: ignore[arg-type]
                g.copy_(averaged)  # type: ignore[union-attr]
            self.reduced.update(bucket.params)
            bucket.work, bucket.flat = None, None
            bucket.ready.clear()
        self._next = 0
        self._seen.clear()

    def flush(self) -> None:
        """Before step() reduces: under a pipeline, wait for the buckets (and start those some gradient of which never
        came); else a rank whose last backward reached no bucketed parameter starts them all now (with zeros), in the
        order every other rank started them during its backward."""
        if not self.reduced:
            self._finish()

    def starts(self) -> list[float]:
        """Seconds from the backward's first gradient to each bucket's launch, in launch order (the last update)."""
        t0 = self.backward_started or 0.0
        return sorted(b.started - t0 for b in self.buckets if b.started is not None)

    def clear(self) -> None:
        """After the step's reduction: nothing reduced yet for the next update."""
        self.reduced.clear()
        self.filled.clear()
        self._queued = False

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
