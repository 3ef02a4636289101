"""Forward-only evaluation of a pipeline whose torch schedule cannot run forward only: the V-shaped ones.

torch's `eval()` runs a schedule's training program with the backward switched off. In a V (DualPipeV, ZBV) the two
stages in the turn of the V sit on one rank and hand their gradients over locally; run forward only, those hand-overs
(`get_local_bwd_output`) fail with "can't steal_bwd_input if this stage doesn't have backward" (torch 2.13, on every
pp degree). Here the same stages in the same V run a program of forwards only, on torch's own runtime.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.pipelining import schedules
from torch.distributed.pipelining.schedules import _Action, _add_send_recv, _add_unshard_reshard, _ComputationType
from torch.torch_version import TorchVersion

__all__ = ["V_EVAL_FIXED_IN", "ForwardOnlyV", "needs_forward_only_v"]

# The first torch release whose V schedules evaluate forward only. None: none does yet (2.13 is the newest measured);
# tests/parallel/pipeline/test_pipeline_eval.py runs torch's own V eval and fails once a release fixes it, so this can name it.
V_EVAL_FIXED_IN: str | None = None


def needs_forward_only_v(placement: str, version: str = str(torch.__version__)) -> bool:
    """Whether eval on a pipeline of this placement ("loop" or "v") needs `ForwardOnlyV` on this torch release."""
    return placement == "v" and (V_EVAL_FIXED_IN is None or TorchVersion(version) < V_EVAL_FIXED_IN)


class ForwardOnlyV(schedules.ScheduleZBVZeroBubble):
    """ZBV's V placement and runtime with a forward-only program: pp rank r runs every micro-batch through its first
    stage r, then through its second stage 2·pp − 1 − r (GPipe's forward half over the V; the 2·pp − 1 stage-forwards
    of fill are its bubble). Only `eval` is meant: there is no backward in the program."""

    def __init__(self, stages: list[Any], n_microbatches: int, loss_fn: Any) -> None:
        super().__init__(stages, n_microbatches=n_microbatches, loss_fn=loss_fn, scale_grads=False)
        pp, last = self.pp_group_size, self._num_stages - 1
        forward = _ComputationType.FORWARD
        program = {r: [_Action(s, forward, m) for s in (r, last - r) for m in range(n_microbatches)] for r in range(pp)}
        self.pipeline_order = dict(program)  # type: ignore[arg-type]
        # torch's lowering (FSDP unshard/reshard, then the sends and receives between ranks), without its check
        # that every stage runs a backward per micro-batch.
        lowered = {r: _add_unshard_reshard(actions) for r, actions in program.items()}  # type: ignore[arg-type]
        self.pipeline_order_with_comms = _add_send_recv(
            lowered, stage_to_rank=lambda s: self.stage_index_to_group_rank[s], num_stages=self._num_stages)
