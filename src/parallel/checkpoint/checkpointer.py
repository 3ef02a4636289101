"""`Checkpointer`: the strategy's checkpoint_configs run — periodic saves, at most one in the background, the newest
few kept, and a restarted job continuing from the newest complete checkpoint by itself.

A checkpoint holds what makes the continuation exact: the model and optimizer (any layout, DCP), the loss scaler
and gradient-merge position (the optimizer's extra state), the step, and each rank's RNG states, data position and
scheduler (rank_state.py). Under `torchrun --max-restarts N` a job whose rank died starts again with the same
command: `start` finds the newest checkpoint, skips one that is not readable (a truncated file) with a warning
naming it, and loads it; the steps since that save are run again, the same way.
"""

from __future__ import annotations

import threading
import warnings
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn

from strategy import CheckpointSettings

from ..topology.groups import HybridGroup, current
from . import catalog, rank_state
from ..training.optimizer import HybridParallelOptimizer
from .optimizer_view import Optimizer
from .save_load import Checkpoint, begin_save, load, read_marker

__all__ = ["Checkpointer"]


class Checkpointer:
    """Saves and resumes a run as `hcg.resolved.checkpoint` (checkpoint_configs) says. Every rank makes one, after
    `parallel.init` (with async_save it makes a gloo group of its own: a collective call).

    Example::

        ckpt = parallel.Checkpointer()                      # checkpoint_configs { dir: "ckpt" every_steps: 100 }
        first = ckpt.start(model, opt, scheduler=sched)     # 0, or the step the newest checkpoint was taken after
        for step in range(first, steps):
            train_one_step(step)                            # step k reads batch k: the step is the data position
            ckpt.step(step + 1)                             # saves after steps 100, 200, ... (in the background)
        ckpt.close()                                        # the last background save, committed

    Args:
        hcg: the hybrid group; None means `parallel.current()`.
        settings: instead of the strategy's checkpoint_configs (`strategy.CheckpointSettings`).
    """

    def __init__(self, hcg: HybridGroup | None = None, *, settings: CheckpointSettings | None = None) -> None:
        self.hcg = hcg or current()
        self.settings = settings if settings is not None else self.hcg.resolved.checkpoint
        self.dir = Path(self.settings.dir).absolute() if self.settings.dir else None
        self.resumed: Checkpoint | None = None  # what `start` loaded
        self.resumed_from: Path | None = None
        self._model: nn.Module | None = None
        self._optimizer: Optimizer | None = None
        self._objects: dict[str, rank_state.Stateful | None] = {}
        # Background saves write over a gloo group of their own: their collectives run in another thread, beside the
        # training's on the default group (torchtitan does the same).
        self._group = dist.new_group(backend="gloo") if self.settings.async_save else None
        self._inflight: tuple[Future, threading.Event, list[BaseException]] | None = None

    # -- resume ------------------------------------------------------------------------------------------------
    def start(self, model: nn.Module, optimizer: Optimizer | None = None, *, scheduler: rank_state.Stateful | None = None,
              data: rank_state.Stateful | None = None) -> int:
        """Restore what `resume` says into `model`, `optimizer`, `scheduler` and `data` (anything with
        state_dict/load_state_dict: a sampler, a loader, a batch generator) and every rank's RNGs; return the step to
        continue from (0 when starting fresh). Remembers them for `step` and `save`.

        Raises:
            ValueError: the checkpoint does not fit the model (naming the first mismatching key and both shapes),
                before anything is loaded; or `resume` names a directory that is no finished checkpoint.
        """
        self._model, self._optimizer = model, optimizer
        # (each rank's model-parallel stream with its other generators: restored only at the same layout)
        self._objects = {"scheduler": scheduler, "data": data, "model_parallel_rng": self.hcg.mp_rng}
        path = self._resume_path()
        if path is None:
            return 0
        self.resumed = load(path, model, optimizer, hcg=self.hcg)
        self.resumed_from = path
        if read_marker(path).get("rank_state"):
            self._restore_rank_state(path)
        return self.resumed.step or 0

    def _resume_path(self) -> Path | None:
        """Rank 0 chooses (the others may see the directory later), every rank gets its answer, or its error."""
        resume = self.settings.resume
        if resume == "never" or (resume == "auto" and self.dir is None):
            return None
        if self.dir is None:  # a path, and no dir of periodic saves that could hold a newer one
            return Path(resume).absolute()
        choice: list[Any] = [None, [], None]
        if self.hcg.rank == 0:
            try:
                choice = self._choose(None if resume == "auto" else Path(resume).absolute())
            except Exception as e:  # noqa: BLE001 - every rank raises it, none waits for rank 0
                choice = [None, [], f"{type(e).__name__}: {e}"]
        dist.broadcast_object_list(choice, src=0)
        if choice[2]:
            raise RuntimeError(f"choosing the checkpoint to resume from failed on rank 0: {choice[2]}")
        if self.hcg.rank == 0:
            for message in choice[1]:
                warnings.warn(message, RuntimeWarning, stacklevel=3)
        return Path(choice[0]) if choice[0] else None

    def _choose(self, given: Path | None) -> list[Any]:
        """[path or None, warnings, None]: the newest readable checkpoint of dir, or `given` unless dir holds a newer
        one (a job restarted under torchrun goes on from its own periodic saves, not from the path it began with)."""
        assert self.dir is not None
        catalog.remove_debris(self.dir)
        path, skipped = catalog.newest_readable(self.dir)
        if given is not None:
            newer = path is not None and (read_marker(path).get("step") or 0) > (read_marker(given).get("step") or 0)
            if not newer:
                return [str(given), [], None]
            skipped.append(f"{path} is newer than checkpoint_configs.resume {given}: continuing from it (a restart)")
        return [str(path) if path else None, skipped, None]

    def _restore_rank_state(self, path: Path) -> None:
        if self.resumed is not None and self.resumed.resharded is None:  # the same layout: each rank its own
            rank_state.restore(rank_state.read(path, self.hcg.rank), self._objects)
            return
        # Another layout: rank r's generators and data position belong to no rank here (or to one with another role);
        # the scheduler is the same on every rank.
        rank_state.restore(rank_state.read(path, 0), {"scheduler": self._objects.get("scheduler")}, rng=False)
        if self.hcg.rank == 0:
            assert self.resumed is not None
            warnings.warn(f"{path}: saved at another layout ({self.resumed.resharded}): the scheduler is restored, each "
                          "rank's RNG states and data position start afresh", RuntimeWarning, stacklevel=3)

    # -- save --------------------------------------------------------------------------------------------------
    def step(self, step: int) -> Path | None:
        """Call after each training step with the number of steps done: saves when every_steps divides it (returns
        the checkpoint's path, complete already unless async_save), else None."""
        every = self.settings.every_steps
        if every > 0 and step > 0 and step % every == 0:
            return self.save(step)
        return None

    def save(self, step: int) -> Path:
        """Save now as `dir/step-{step}` (waiting first for a background save still in flight)."""
        if self._model is None:
            raise RuntimeError("Checkpointer.save before start(model, optimizer): call start first")
        if self.dir is None:
            raise ValueError("checkpoint_configs.dir is not set: the Checkpointer has nowhere to save")
        if isinstance(self._optimizer, HybridParallelOptimizer) and self._optimizer.pending_micro_steps:
            raise ValueError(f"step {step} is inside a gradient merge (the optimizer holds gradients of micro-steps "
                             "not yet applied, which a checkpoint does not keep): save after an update, e.g. "
                             "checkpoint_configs.every_steps a multiple of gradient_merge_configs.k_steps")
        self.wait()
        target = catalog.step_dir(self.dir, step)
        pending = begin_save(target, self._model, self._optimizer, step=step, hcg=self.hcg,
                             rank_state=rank_state.capture(self._objects))
        if self._group is None:
            dcp.save(pending.state, checkpoint_id=str(pending.partial))
            dist.barrier()  # every rank's shards are on disk
            error = None
            try:
                self._finish(pending)
            except Exception as e:  # noqa: BLE001 - shared below, so no rank waits on a barrier rank 0 left
                error = e
            _agree_done(error, "saving " + str(target))
            return target
        # The state is copied before async_save returns (its staging), so training may change the tensors at once;
        # rank 0's future completes only after every rank's write (DCP gathers their results to finish).
        future = dcp.async_save(pending.state, checkpoint_id=str(pending.partial), process_group=self._group)
        assert isinstance(future, Future)  # (an AsyncSaveResponse comes only with an async stager)
        done, errors = threading.Event(), []

        def finish(f: Future) -> None:
            try:
                f.result()
                self._finish(pending)
            except BaseException as e:  # noqa: BLE001 - raised on every rank at the next wait
                errors.append(e)
            finally:
                done.set()

        future.add_done_callback(finish)
        self._inflight = (future, done, errors)
        return target

    def _finish(self, pending: Any) -> None:
        """Rank 0: the marker, the rename into place, then the older checkpoints beyond keep_last."""
        pending.commit()
        if self.hcg.rank == 0 and self.dir is not None:
            catalog.retire(self.dir, self.settings.keep_last, newest=pending.target)

    @property
    def saving(self) -> bool:
        """A background save is still being written (or committed)."""
        return self._inflight is not None and not self._inflight[1].is_set()

    def wait(self) -> None:
        """Until the background save in flight (if any) is written and committed; raises what it raised."""
        if self._inflight is None:
            return
        future, done, errors = self._inflight
        self._inflight = None
        done.wait()
        _agree_done(errors[0] if errors else None, "the background save")

    def close(self) -> None:
        """Wait for the save in flight and release the background group."""
        try:
            self.wait()
        finally:
            if self._group is not None:
                dist.destroy_process_group(self._group)
                self._group = None

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _agree_done(error: BaseException | None, what: str) -> None:
    """Every rank learns whether any failed (one all-reduce on the default group) and all raise together: a rank
    that raised alone would leave the others waiting in their next collective."""
    failed = torch.tensor([1.0 if error is not None else 0.0])
    dist.all_reduce(failed, op=dist.ReduceOp.MAX)
    if error is not None:
        raise error
    if failed.item():
        raise RuntimeError(f"{what} failed on another rank (its error is in that rank's log)")
