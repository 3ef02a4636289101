"""A pool of N gloo ranks on CPU that runs test functions on every rank and re-raises a rank's failure.

Spawning torch processes costs seconds, so a pool lives for the whole session (one per world size) and
each test sends it a module-level function. A rank that fails or times out breaks the pool; the next
test gets a fresh one.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import queue
import socket
import traceback
from typing import Any, Callable

_CTX = mp.get_context("spawn")


class RankFailure(AssertionError):
    """A function failed on one or more ranks; the message holds each failing rank's traceback."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world_size: int, port: int) -> dict[str, str]:
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world_size),
    }


def thread_count() -> int:
    """This process's threads, native ones included (gloo's), where /proc tells; 0 elsewhere."""
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 0


def _worker(rank: int, world_size: int, port: int, tasks: Any, results: Any) -> None:
    os.environ.update(rank_env(rank, world_size, port))
    import datetime

    import torch
    import torch.distributed as dist

    import parallel

    torch.set_num_threads(1)  # N ranks share 2 cores
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    threads = thread_count()
    while True:
        item = tasks.get()
        if item is None:
            break
        fn, args, kwargs = item
        try:
            results.put((rank, True, fn(*args, **kwargs)))
        except BaseException:  # noqa: BLE001 - everything goes back to the test
            results.put((rank, False, traceback.format_exc()))
        finally:
            parallel.destroy()
            if thread_count() > threads:  # a task's groups outlived it in a reference cycle: their gloo threads would
                gc.collect()          # poll on through every later task (300 groups: a fifth of a core)
    dist.destroy_process_group()


class RankPool:
    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        port = free_port()
        self.tasks = [_CTX.Queue() for _ in range(world_size)]
        self.results = _CTX.Queue()
        self.procs = [
            _CTX.Process(target=_worker, args=(r, world_size, port, self.tasks[r], self.results), daemon=True)
            for r in range(world_size)
        ]
        for p in self.procs:
            p.start()
        self.broken = False

    def run(self, fn: Callable[..., Any], *args: Any, timeout: float = 90, **kwargs: Any) -> list[Any]:
        """fn(*args, **kwargs) on every rank; returns each rank's result, in rank order."""
        for q in self.tasks:
            q.put((fn, args, kwargs))
        got: dict[int, tuple[bool, Any]] = {}
        try:
            while len(got) < self.world_size:
                rank, ok, payload = self.results.get(timeout=timeout)
                got[rank] = (ok, payload)
                if not ok:
                    timeout = min(timeout, 10)  # the others may be stuck in a collective
        except queue.Empty:
            self.broken = True
            missing = sorted(set(range(self.world_size)) - set(got))
            failures = "".join(f"\n--- rank {r} ---\n{p}" for r, (ok, p) in sorted(got.items()) if not ok)
            raise RankFailure(f"ranks {missing} did not finish {fn.__name__} within the timeout{failures}") from None
        failures = {r: p for r, (ok, p) in got.items() if not ok}
        if failures:
            self.broken = len(failures) < self.world_size  # a partial failure may leave groups inconsistent
            raise RankFailure("".join(f"\n--- rank {r} ---\n{p}" for r, p in sorted(failures.items())))
        return [got[r][1] for r in range(self.world_size)]

    def close(self, deadline: float | None = None) -> None:
        """Wait for the ranks to leave until `deadline` (time.monotonic(); without one, ask them now and wait 5
        seconds), then kill the ones still there: a rank tearing torch down can take seconds, so Pools asks every
        pool first and waits for them together."""
        import time

        if deadline is None:
            self.leave()
        end = time.monotonic() + 5 if deadline is None else deadline
        for p in self.procs:
            p.join(timeout=max(0.0, end - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.kill()

    def leave(self) -> None:
        for q in self.tasks:
            q.put(None)


class Pools:
    """Session-wide pools by world size, replaced when broken."""

    def __init__(self) -> None:
        self._pools: dict[int, RankPool] = {}

    def __call__(self, world_size: int) -> RankPool:
        pool = self._pools.get(world_size)
        if pool is None or pool.broken:
            if pool is not None:
                pool.close()
            pool = self._pools[world_size] = RankPool(world_size)
        return pool

    def close(self) -> None:
        import time

        for pool in self._pools.values():
            pool.leave()
        deadline = time.monotonic() + 5
        for pool in self._pools.values():
            pool.close(deadline)
