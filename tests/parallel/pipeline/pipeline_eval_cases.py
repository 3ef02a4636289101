"""Rank-side cases of pipeline evaluation: eval_batch on every schedule against one process on the same weights,
and whether torch's own V schedules evaluate forward only on the release installed."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, schedules

import parallel
import strategy
from parallel.pipeline import next_token_loss
from parallel.pipeline.evaluation import ForwardOnlyV
from rank_helpers import init
from pipeline_cases import LR, _batch, llama


def _reference_loss(model, held_out: torch.Tensor, micro_batches: int) -> float:
    """One process's mean micro-batch loss of `held_out` on the pipelined model's gathered weights."""
    reference = llama()
    reference.load_state_dict(parallel.full_state_dict(model))
    with torch.no_grad():
        return sum(float(next_token_loss(reference(input_ids=c).logits, c))
                   for c in held_out.chunk(micro_batches)) / micro_batches


def llama_eval(text: str, steps: int = 2) -> dict:
    """Train `steps` steps, eval_batch a held-out batch (parameters before and after), train once more and evaluate
    again: each evaluation beside one process's loss on the same weights."""
    hcg = init(strategy.loads(text))
    p = hcg.resolved.pipeline
    model = parallel.parallelize(llama())
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=LR))
    rows = p.micro_batch_size * p.accumulate_steps
    held_out = _batch(1000, rows)
    losses, refs, changed = [], [], []
    for step in range(steps + 1):
        ids = _batch(step, rows)
        model.train_batch((ids, ids), opt)
        if step < steps - 1:
            continue
        before = {n: v.detach().clone() for n, v in model.state_dict().items()}
        losses.append(model.eval_batch((held_out, held_out)))
        changed += [n for n, v in model.state_dict().items() if not torch.equal(v, before[n])]
        refs.append(_reference_loss(model, held_out, p.accumulate_steps))
    return {"losses": losses, "refs": refs, "changed": changed, "schedule": p.schedule}


def torch_v_eval(name: str) -> dict:
    """torch's own V schedule `name` (and ForwardOnlyV) evaluating two stages on one rank, the V's turn, forward only:
    the error torch's raises, if any, and each loss beside the two layers run directly."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)]
    x, y = torch.randn(8, 4), torch.randn(8, 4)

    def loss_fn(out, target):
        return ((out - target) ** 2).mean() / 4

    with torch.no_grad():
        direct = sum(float(loss_fn(layers[1](layers[0](a)), b)) for a, b in zip(x.chunk(4), y.chunk(4)))
    result: dict = {"direct": direct}
    for cls in (getattr(schedules, name), ForwardOnlyV):
        stages = [PipelineStage(m, i, 2, torch.device("cpu"), group=dist.group.WORLD) for i, m in enumerate(layers)]
        schedule = cls(stages, 4, loss_fn=loss_fn)
        losses: list[torch.Tensor] = []
        try:
            with torch.no_grad():
                schedule.eval(x, target=y, losses=losses)
            result[cls.__name__] = float(sum(losses))
        except AssertionError as e:
            result[cls.__name__] = f"AssertionError: {e}"
    return result
