"""HybridParallelOptimizer: a torch optimizer made hybrid-parallel, with Paddle's mp sync options.

Around the wrapped optimizer's step: gradients are averaged over the dp group; sync_grad (before) and
sync_param / sync_moment (after) make values of parameters replicated across the mp group agree, by
broadcast from mp rank 0 or by averaging. `main_grad` buffers (the fused flag's fp32 accumulators) are
what the optimizer sees, and bf16/fp16 parameters are updated through fp32 master copies.
"""

from __future__ import annotations

import time

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from ..pipeline.tied import sum_tied_grads
from ..topology.experts_mark import is_expert
from ..topology.tied_mark import is_tied_copy
from ..tensor.grads import grad_of
from ..tensor.partial import sum_partial_grads
from ..tensor.sequence import sum_sequence_parallel_grads
from ..tensor.shards import is_sharded
from ..sharding.fsdp import sharded_roots
from ..topology.coalesced import all_reduce_coalesced, broadcast_coalesced
from ..topology.dtensors import is_data_sharded, local
from ..topology.groups import SEQUENCE_AXES, HybridGroup, current
from .amp import LossScaler, found_nonfinite
from .clipping import clip_by_global_norm
from .dp_overlap import DpBuckets

__all__ = ["HybridParallelOptimizer"]

_LOW_PRECISION = (torch.bfloat16, torch.float16)


class HybridParallelOptimizer:
    """Wrap `optimizer` (built on the model's parameters) for the current hybrid group.

    `max_grad_norm` clips by the global norm inside step() (after unscaling, on merged gradients, as Paddle's
    optimizers carry their grad_clip; the norm is then `last_grad_norm`), so a pipeline's train_batch clips too.

    Without a pipeline, the dp average runs during the update's last backward, bucket by bucket as DDP's (`dp_buckets`;
    gradient merge's other micro-steps reduce nothing): when `backward()` returns the gradients are averaged.

    step() (clip_grad_norm_ does 1-2 early, to clip the final gradient):
      1. sum the gradients of sequence-parallel parameters over the mp group (mark_sequence_parallel) and of a
         weight tied across pipeline stages over the embedding group (pipeline/tied.py), then
         average over the dp group what the backward did not (main_grad, unused parameters; everything under a
         pipeline), one all-reduce per dtype, and sum over the sep or cp group (each rank's loss there is a share of
         the same rows);
      2. sync_grad: replicated parameters' gradients agree across the mp group (sync_mode);
      3. hand main_grad to the optimizer; bf16/fp16 parameters step through fp32 master copies;
      4. sync_param / sync_moment: replicated parameters and their same-shaped optimizer state agree.
    Sharded parameters (from the parallel layers) are never synced across the mp group. Parameters sharded over
    the data axes (apply_sharding: FSDP2 DTensors) have their gradients reduced by FSDP2 over dp × sharding; this
    wrapper acts on their local shards, and under gradient merge at stage 1 lets FSDP2 reduce only on the last
    micro-step (one reduction per update).

    Example::

        opt = HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=3e-4))
        loss.backward(); opt.step(); opt.zero_grad()
    """

    def __init__(self, optimizer: torch.optim.Optimizer, *, hcg: HybridGroup | None = None,
                 max_grad_norm: float | None = None) -> None:
        hcg = hcg or current()
        if max_grad_norm is not None and not max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be positive (or None: no clipping), got {max_grad_norm!r}")
        self.optimizer = optimizer
        self.hcg = hcg
        self.max_grad_norm = max_grad_norm
        self.last_grad_norm: torch.Tensor | None = None  # the norm step() clipped by, before clipping
        # hybrid_configs.enable_optimizer_timer: the last update's parts in seconds ("reduce", "clip", "update",
        # "sync", and their "total"); None when the strategy leaves it off (nothing is timed).
        self.timings: dict[str, float] | None = {} if hcg.resolved.optimizer_timer else None
        self.settings = hcg.resolved.mp
        self._model_params: list[nn.Parameter] = [p for g in optimizer.param_groups for p in g["params"]]
        self._reduced: list[tuple[nn.Parameter, torch.Tensor]] | None = None  # this step's reduced gradients
        self._found_inf = False
        amp = hcg.resolved.amp
        self.scaler = LossScaler(amp) if amp.enabled and amp.loss_scaling else None
        self.merge_steps = hcg.resolved.gradient_merge.k_steps
        self._merge_avg = hcg.resolved.gradient_merge.avg
        self._micro = 0  # optimizer steps taken since the last update (gradient merge)
        # Stage 1 under gradient merge: FSDP2 accumulates full gradients and reduce-scatters once per update.
        self._deferred_sync = sharded_roots(self._model_params) if hcg.resolved.sharding.stage == 1 else []
        self._defer_reduction()
        if hcg.dp_size > 1:
            # Start every replica from dp rank 0's values, as DDP does, whatever seed each rank used; experts split
            # over ep are no replicas over dp: their copies are the edp ranks'.
            broadcast_coalesced([p.detach() for p in self._model_params if not is_expert(p)], hcg.dp_group)
        if hcg.edp_size > 1 and hcg.edp_group is not None:
            broadcast_coalesced([p.detach() for p in self._model_params if is_expert(p)], hcg.edp_group)
        # The dp average overlapped with the backward, bucket by bucket (DDP's way), for what step() would average over
        # dp: not FSDP2's shards (it reduces them), not experts (their edp group), not main_grad (the fused layers
        # accumulate there, past autograd's hooks: step() reduces it). A pipeline's stages reduce in step(), unless
        # pp_configs.dp_comm_overlap starts each bucket at its last micro-batch's gradients.
        self.dp_buckets: DpBuckets | None = None
        pipeline = hcg.resolved.pipeline
        if hcg.dp_size > 1 and (hcg.pp_size == 1 or pipeline.dp_comm_overlap):
            bucketed = [p for p in self._model_params if p.requires_grad and not is_data_sharded(p) and not is_expert(p)
                        and getattr(p, "main_grad", None) is None]
            if bucketed:  # under a pipeline (pp_configs.dp_comm_overlap), at each stage's last micro-batch
                sizes = hcg.resolved.dp_buckets  # fuse_grad_size_in_MB, last_comm_group_size_MB
                self.dp_buckets = DpBuckets(bucketed, hcg.dp_group, reducing=lambda: not self.accumulating,
                                            bucket_bytes=sizes.bucket_bytes, first_bucket_bytes=sizes.first_bucket_bytes,
                                            micro_batches=pipeline.accumulate_steps if hcg.pp_size > 1 else None)
        # Low-precision parameters are replaced inside the optimizer by fp32 masters it updates instead.
        self._master: dict[nn.Parameter, nn.Parameter] = {}
        self._synced_version: dict[nn.Parameter, int] = {}
        for group in optimizer.param_groups:
            for i, p in enumerate(group["params"]):
                if p.dtype in _LOW_PRECISION:
                    master = nn.Parameter(p.detach().float())
                    self._master[p] = master
                    self._synced_version[p] = p._version
                    group["params"][i] = master

    # -- pass-through ---------------------------------------------------------------------------------
    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.optimizer.param_groups

    @property
    def state(self) -> Any:
        return self.optimizer.state

    def state_dict(self) -> dict[str, Any]:
        """The wrapped optimizer's state dict, plus the fp32 master copies (key "fp32_master_params",
        in parameter order) when there are bf16/fp16 parameters, so a resume keeps full precision."""
        out = self.optimizer.state_dict()
        if self._master:
            out["fp32_master_params"] = [self._master[p].detach().clone() if p in self._master else None for p in self._model_params]
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)  # never modify the caller's dict
        masters = state_dict.pop("fp32_master_params", None)
        self.optimizer.load_state_dict(state_dict)
        with torch.no_grad():
            for i, p in enumerate(self._model_params):
                if p in self._master:
                    saved = masters[i] if masters is not None else None
                    self._master[p].copy_(saved if saved is not None else p.detach().float())
                    self._synced_version[p] = p._version

    # -- checkpoints: what parallel.save / load call; nothing outside training/ reads the wrapper's privates ------
    def stepped(self, p: torch.Tensor) -> torch.Tensor:
        """The tensor the wrapped optimizer steps for model parameter `p` (whose state it keeps): its fp32 master
        under pure bf16/fp16, else `p` itself."""
        return self._master.get(p, p)  # type: ignore[call-overload]

    def master_weight(self, p: torch.Tensor) -> torch.Tensor | None:
        """`p`'s fp32 master copy (None when `p` is stepped in its own dtype)."""
        return self._master.get(p)  # type: ignore[call-overload]

    @torch.no_grad()
    def masters_restored(self) -> None:
        """The fp32 masters were just filled (a checkpoint loaded them): their parameters take their values."""
        for p, master in self._master.items():
            p.copy_(master)
            self._synced_version[p] = p._version

    # -- amp and gradient merge -----------------------------------------------------------------------
    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """`loss` times the current loss scale under fp16 amp (backward through it); `loss` itself otherwise.

        Example::

            opt.scale(loss).backward(); opt.step(); opt.zero_grad()
        """
        return loss * self.scaler.scale if self.scaler is not None else loss

    @property
    def loss_scale(self) -> float | None:
        """The current loss scale (None without fp16 loss scaling)."""
        return self.scaler.scale if self.scaler is not None else None

    @property
    def accumulating(self) -> bool:
        """True while gradient merge is accumulating: the next `step()` will not update the parameters."""
        return (self._micro + 1) % self.merge_steps != 0

    @property
    def pending_micro_steps(self) -> int:
        """Micro-steps whose gradients gradient merge holds, not yet applied (0 right after an update)."""
        return self._micro

    @property
    def skipped_last_step(self) -> bool:
        """True when the last update was skipped because some rank's gradient held inf/NaN."""
        return self._found_inf

    def extra_state(self) -> dict[str, Any]:
        """What a checkpoint keeps besides tensors: the loss scaler and the gradient-merge position."""
        return {"scaler": self.scaler.state_dict() if self.scaler else None, "micro_steps": self._micro}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self._micro = int(state.get("micro_steps", 0))

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear `.grad` everywhere; `main_grad` buffers are zeroed in place (they are reused). While gradient
        merge is accumulating (a step that did not update), nothing is cleared."""
        if self._micro:
            return
        self._reduced = None
        self.optimizer.zero_grad(set_to_none=set_to_none)
        for p in self._model_params:
            if p.grad is not None:
                p.grad = None if set_to_none else p.grad.zero_()
            main = getattr(p, "main_grad", None)
            if main is not None:
                main.zero_()

    # -- step -----------------------------------------------------------------------------------------
    @torch.no_grad()
    def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0, *, error_if_nonfinite: bool = False) -> torch.Tensor:
        """Clip the whole model's gradient by its global norm; returns that norm (before clipping).

        The norm is what `torch.nn.utils.clip_grad_norm_` returns on the unparallelised model: sharded
        parameters' shards are summed over the mp group, replicated ones count once, dp replicas are averaged
        first (this finishes the gradient reduction `step` would do, so call it right before `step`). Reads
        `main_grad` where a parameter has one, else `.grad`; `norm_type=inf` takes the max. NaN/Inf are never
        hidden: they make the norm non-finite, an error with `error_if_nonfinite=True`.

        Example::

            loss.backward(); norm = opt.clip_grad_norm_(1.0); opt.step(); opt.zero_grad()
        """
        if self.accumulating:
            return torch.zeros(())  # gradient merge: the k-th step clips the merged gradient
        return clip_by_global_norm(self._reduced_grads(), self.hcg, max_norm, norm_type, error_if_nonfinite=error_if_nonfinite)

    def _reduce_experts(self, grads: list[torch.Tensor]) -> None:
        """An expert's gradient holds its share of every data rank's loss whose tokens reached this block: summed
        over the ranks that hold the same experts (edp) and divided by the distinct batches, it is the mean over the
        data ranks, as the dense parameters' average over dp is. (FSDP2 reduces the experts it shards itself.)"""
        if not grads:  # (every rank alike: FSDP2 shards all the experts, or there are none)
            return
        if self.hcg.edp_size > 1:
            assert self.hcg.edp_group is not None
            all_reduce_coalesced(grads, self.hcg.edp_group, average=False)
        torch._foreach_mul_([local(g) for g in grads], 1.0 / self.hcg.expert_grad_divisor)

    def _reduced_grads(self) -> list[tuple[nn.Parameter, torch.Tensor]]:
        """Every gradient as the optimizer will use it: sequence-parallel sums, dp average, sync_grad. Once per step."""
        if self._reduced is not None:
            return self._reduced
        grads = []
        filled = []
        split = [axis for axis in SEQUENCE_AXES if getattr(self.hcg, f"{axis}_size") > 1]
        for p in self._model_params:
            g = grad_of(p)
            if g is None and p.requires_grad and (self.hcg.dp_size > 1 and not is_data_sharded(p) or split
                                                  or is_expert(p) or is_tied_copy(p)):
                # Unused on this replica (a branch not taken, an expert no token chose): every rank must reduce the
                # same buffers.
                g = p.grad = torch.zeros_like(p)
                if not is_expert(p):  # (a block of experts is a slice of one Parameter, which some token reached)
                    filled.append(p)
            if g is not None:
                grads.append((p, g))
        if self.dp_buckets is not None:  # the overlapped dp average complete (and put back) before the sums below
            self.dp_buckets.flush()
            filled += self.dp_buckets.filled
        # Sequence-parallel parameters (norms in the region) saw only this rank's tokens: sum over the mp group.
        sum_sequence_parallel_grads(grads, self.hcg)
        sum_partial_grads(grads, self.hcg)  # norms per head after a column split: each rank's heads' part
        # A weight tied across pipeline stages: each end's copy holds its use's gradient; both step with the sum.
        sum_tied_grads(grads, self.hcg)
        if self.hcg.dp_size > 1:  # FSDP2 reduced the data-sharded ones already; experts are not replicas over dp
            done = self.dp_buckets.reduced if self.dp_buckets is not None else set()  # averaged during the backward
            all_reduce_coalesced([g for p, g in grads if not is_data_sharded(p) and not is_expert(p) and p not in done],
                                 self.hcg.dp_group, average=True)
            if self.dp_buckets is not None:
                self.dp_buckets.clear()
        if self.hcg.ep_size > 1:
            self._reduce_experts([g for p, g in grads if is_expert(p) and not is_data_sharded(p)])
        for axis in split:
            # Each sep (cp) rank's loss is its share of the rows' tokens: the gradient is the sum of the shares
            # (Paddle's "sep all reduce is not scaled").
            all_reduce_coalesced([g for _, g in grads], self.hcg.group(axis), average=False)
        if self.settings.sync_grad:
            self._sync([g for p, g in grads if _mp_replica(p)])
        # Unscale (fp16 loss scaling) and average the merged micro-steps in one multiplication.
        divisor = (self.scaler.scale if self.scaler is not None else 1.0) * (self.merge_steps if self._merge_avg else 1)
        pipeline = self.hcg.resolved.pipeline
        if pipeline.delay_scale_loss:  # the micro-batches' losses were left whole: the mean's gradient, before clipping
            divisor *= pipeline.accumulate_steps
        if divisor != 1.0:
            torch._foreach_mul_([local(g) for _, g in grads], 1.0 / divisor)
        grads = _unused_everywhere_dropped(grads, filled)
        self._found_inf = found_nonfinite([local(g) for _, g in grads]) if self.scaler is not None else False
        self._reduced = grads
        return grads

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        if closure is not None:
            raise ValueError("HybridParallelOptimizer.step does not take a closure: run forward/backward first")
        if self.accumulating:  # gradient merge: keep accumulating, update on the k-th call
            self._micro += 1
            self._defer_reduction()
            return None
        self._micro = 0
        clock = _Parts(self.timings, self._model_params)
        self._defer_reduction()
        self._refresh_stale_masters()
        grads = self._reduced_grads()
        self._reduced = None
        if self.scaler is not None:
            self.scaler.update(self._found_inf)
            if self._found_inf:  # every rank saw it (one all-reduce over the world): every rank skips
                clock.done("reduce")
                return None
        clock.done("reduce")
        if self.max_grad_norm is not None:  # Paddle's grad_clip: the merged, unscaled gradient of the whole model
            self.last_grad_norm = clip_by_global_norm(grads, self.hcg, self.max_grad_norm)
        clock.done("clip")
        for p, g in grads:
            target = self._master.get(p, p)
            if target is not p or g is not p.grad:
                target.grad = g if g.dtype == target.dtype else g.to(target.dtype)
        result = self.optimizer.step()
        for master in self._master.values():
            # The fp32 copy (or the main_grad alias) existed for this update only: between steps mixed precision holds
            # the 16-bit weights and gradients and the fp32 masters and moments, ZeRO's 2 + 2 + 12 bytes a parameter.
            master.grad = None
        clock.done("update")
        if self.settings.sync_param:
            self._sync([self._master.get(p, p) for p in self._model_params if _mp_replica(p)])
        if self.settings.sync_moment:
            self._sync(list(self._moments()))
        for p, master in self._master.items():
            p.copy_(master)
            self._synced_version[p] = p._version
        clock.done("sync")
        return result

    def _defer_reduction(self) -> None:
        """Before the next backward: FSDP2 reduces gradients only if the next step updates (stage 1 merge)."""
        for root in self._deferred_sync:
            root.set_requires_gradient_sync(not self.accumulating)

    def _refresh_stale_masters(self) -> None:
        """Take a parameter changed outside the optimizer (e.g. model.load_state_dict) into its master."""
        for p, master in self._master.items():
            if p._version != self._synced_version[p]:
                master.copy_(p.detach().float())
                self._synced_version[p] = p._version

    def _moments(self) -> Iterator[torch.Tensor]:
        """Tensor-valued optimizer state of replicated parameters, of the parameter's shape (Adam's m and v)."""
        for p in self._model_params:
            if not _mp_replica(p):
                continue
            owner = self._master.get(p, p)
            for value in self.optimizer.state.get(owner, {}).values():
                if torch.is_tensor(value) and value.shape == owner.shape:
                    yield value

    def _sync(self, tensors: list[torch.Tensor]) -> None:
        if self.hcg.mp_size == 1 or not tensors:
            return
        if self.settings.sync_mode == "average":
            all_reduce_coalesced(tensors, self.hcg.mp_group, average=True)
        else:
            broadcast_coalesced(tensors, self.hcg.mp_group)


def _unused_everywhere_dropped(grads: list[tuple[nn.Parameter, torch.Tensor]],
                               filled: list[nn.Parameter]) -> list[tuple[nn.Parameter, torch.Tensor]]:
    """A parameter no rank's loss reached (an indexer behind a top-k) has no gradient in one process, and torch's
    optimizers skip it (no weight decay, no moment decay). (Not a block of experts: in one process it is a slice of a
    Parameter some token reached, whose unused rows still decay.) Its zeros, filled so that every rank
    reduces the same buffers, are zeros still after the reduction: it goes back to no gradient, and is skipped here
    too."""
    if not filled:
        return grads
    still_zero = torch.stack([local(_grad(p)).any() for p in filled]).logical_not().tolist()  # one sync
    unused = {id(p) for p, zero in zip(filled, still_zero) if zero}
    for p in filled:
        if id(p) in unused:
            p.grad = None
    return [(p, g) for p, g in grads if id(p) not in unused]


def _mp_replica(p: torch.Tensor) -> bool:
    """Replicated over the mp group (what sync_param / sync_grad / sync_moment align): not split by tensor
    parallelism, and not an expert block (those are split over ep, which may span the mp ranks)."""
    return not is_sharded(p) and not is_expert(p)


def _grad(p: nn.Parameter) -> torch.Tensor:
    assert p.grad is not None, "a filled gradient"
    return p.grad


class _Parts:
    """The optimizer step's parts, timed into `timings` (each part the time since the previous one, the device's
    work done first); nothing is read when `timings` is None."""

    __slots__ = ("cuda", "last", "start", "timings")

    def __init__(self, timings: dict[str, float] | None, params: list[nn.Parameter]) -> None:
        self.timings = timings
        if timings is None:
            return
        timings.clear()
        self.cuda = next((p.device for p in params if p.device.type == "cuda"), None)
        self.start = self.last = self._now()

    def _now(self) -> float:
        if self.cuda is not None:
            torch.cuda.synchronize(self.cuda)
        return time.perf_counter()

    def done(self, part: str) -> None:
        if self.timings is None:
            return
        now = self._now()
        self.timings[part] = now - self.last
        self.timings["total"] = now - self.start
        self.last = now
