"""This rank's part of a pipelined model, and one training step over it on a torch.distributed.pipelining schedule.

`PipelineModel` holds the stages this rank runs and behaves as the whole model for the rest of the package:
`parameters()`, `named_parameters()` and `state_dict()` are those of this rank's modules, under the whole model's
names (checkpoints and plans keep working). `train_batch` runs the strategy's schedule over `accumulate_steps`
micro-batches, then one optimizer step, as Paddle's PipelineParallel.train_batch does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage, schedules

from strategy import StrategyError

from ..tensor.data import broadcast_data
from ..topology.groups import SEQUENCE_AXES, HybridGroup
from ..topology.guard import guard
from .chunks import chunk_for, is_hugging_face_causal_lm
from .layer_chain import LayerChain, layer_chain
from .losses import check_whole_loss, next_token_loss
from .evaluation import ForwardOnlyV, needs_forward_only_v
from .split import FIELD, Cut, chunk_blocks, cut, prune, skeleton
from .tied import tie_across_stages
from .timers import StageTimer

__all__ = ["LossFn", "PipelineModel", "StagePlan", "check_cut", "next_token_loss", "pipeline_stages", "split_model"]

LossFn = Callable[[Any, torch.Tensor], torch.Tensor]


def pipeline_stages(hcg: HybridGroup) -> tuple[int, ...]:
    """The stage indices this rank runs, in its local order (loop: r, r + pp, ...; V: r and 2·pp − 1 − r)."""
    return hcg.resolved.pipeline.stages_of(hcg.pp_rank)


class StagePlan(NamedTuple):
    """Where a model is cut: its blocks and the modules around them, each stage's blocks, and for a Hugging Face causal
    LM how its layers chain (its stages run its own forward)."""

    cut: Cut
    ranges: list[range]
    chain: LayerChain | None


def check_cut(model: nn.Module, hcg: HybridGroup) -> StagePlan:
    """Where `model` is cut and each stage's blocks; StrategyError (nothing changed) when it cannot be. Run it before
    anything changes: a Hugging Face model's forward runs once here (`layer_chain`)."""
    for axis in SEQUENCE_AXES:
        degree = getattr(hcg, f"{axis}_size")
        if degree > 1:
            # A stage gets micro-batches of whole rows: it would number this rank's chunks from position 0 and shift
            # the labels inside them, training on wrong positions and losing each chunk's last target.
            raise StrategyError(
                f"hybrid_configs.pp_degree {hcg.pp_size} with hybrid_configs.{axis}_degree {degree}: the "
                f"pipeline does not carry {axis}'s global positions and shifted labels between stages yet; set one "
                "of them to 1", field=f"hybrid_configs.{axis}_degree")
    c = cut(model)
    settings = hcg.resolved.pipeline
    if c.tied and hcg.sharding_size > 1 and settings.pp_rank_of(0) == settings.pp_rank_of(settings.num_stages - 1):
        # Each chunk is an FSDP2 root of its own: the V's first and last chunk would each shard the one Parameter.
        first, last = c.tied[0]
        raise StrategyError(
            f"hybrid_configs.sharding_degree {hcg.sharding_size} with a V placement ({settings.schedule}) and a tied "
            f"weight ({first} is {last}): the first and last stage's chunks on pp rank 0 would each shard it; use "
            "another schedule_mode (1F1B, interleaved), or sharding_degree 1", field="hybrid_configs.sharding_degree")
    ranges = chunk_blocks(c.size, settings.num_stages, f"{type(model).__name__}.{c.blocks}")
    if not is_hugging_face_causal_lm(model):
        if getattr(model, "config", None) is not None and hasattr(model, "_no_split_modules"):
            raise StrategyError(
                f"pipelining a {type(model).__name__} is not supported: its stages run a Hugging Face causal LM's own "
                "forward (a ...ForCausalLM class: input ids in, logits out); use that class", field=FIELD)
        return StagePlan(c, ranges, None)
    check_whole_loss(model)
    return StagePlan(c, ranges, layer_chain(model, c.blocks, c.before, c.after))


def split_model(model: nn.Module, hcg: HybridGroup, plan: StagePlan | None = None) -> tuple[Cut, list[nn.Module], tuple[int, ...]]:
    """Prune `model` to this rank's part, and make one chunk per local stage (`plan`: what check_cut found before
    anything changed; found now when not given)."""
    c, ranges, chain = plan or check_cut(model, hcg)
    num_stages = len(ranges)
    mine = pipeline_stages(hcg)
    first, last = 0 in mine, num_stages - 1 in mine
    prune(model, c, {i for s in mine for i in ranges[s]}, first, last)
    if first != last:  # one end: its copy of each tied weight (both ends on one rank keep one Parameter)
        tie_across_stages(model, c.tied, hcg, first=first)
    # Under sequence parallelism a stage's input is this mp rank's part of the sequence.
    split = hcg.mp_size if hcg.mp_size > 1 and hcg.resolved.mp.sequence_parallel else 1
    chunks = [chunk_for(skeleton(model, c, ranges[s], s == 0, s == num_stages - 1), chain, ranges[s], s == 0,
                        s == num_stages - 1, split) for s in mine]
    return c, chunks, mine


class PipelineModel:
    """This rank's stages of a pipelined model; everything else is the pruned whole model's (see the module doc).

    Example::

        model = parallel.parallelize(LlamaForCausalLM(config))     # pp_degree: 2
        opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters()), max_grad_norm=1.0)
        loss = model.train_batch((input_ids, input_ids), opt)      # this data rank's mean micro-batch loss
    """

    def __init__(self, model: nn.Module, chunks: list[nn.Module], stages: tuple[int, ...], hcg: HybridGroup,
                 loss_fn: LossFn | None) -> None:
        if loss_fn is None:
            if not is_hugging_face_causal_lm(model):
                raise StrategyError(f"pipelining {type(model).__name__}: pass loss_fn(output, labels) to parallelize "
                                    "(the default is a Hugging Face causal LM's next-token loss)",
                                    field="hybrid_configs.pp_degree")
            loss_fn = next_token_loss
        self.module = model
        self.chunks = chunks
        self.stage_ids = stages
        self.hcg = hcg
        self.loss_fn = loss_fn
        settings = hcg.resolved.pipeline
        self.num_stages = hcg.pp_size * settings.virtual_pp_degree
        self.accumulate_steps = settings.accumulate_steps
        self.micro_batch_size = settings.micro_batch_size
        # Schedules by (train or eval, the batch's shape): torch's PipelineStage infers its input and output shapes on
        # its first step and keeps them, so a batch of another shape needs stages of its own (settings.shapes).
        self._schedules: dict[tuple[bool, tuple[int, ...]], Any] = {}
        # torch's V schedules cannot evaluate forward only (evaluation.py): eval runs a schedule of its own there.
        self._eval_apart = needs_forward_only_v(settings.placement)
        self._scale = 1.0
        # pp_configs.enable_timer / profiling: each micro-batch's forward and backward timed on this rank's stages.
        self.timer: StageTimer | None = StageTimer(_device(hcg)) if settings.timer or settings.profiling else None

    # -- the whole model's face -------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:  # parameters(), state_dict(), named_modules(), config, ...
        return getattr(self.__dict__["module"], name)

    @property
    def first(self) -> bool:
        return 0 in self.stage_ids

    @property
    def last(self) -> bool:
        return self.num_stages - 1 in self.stage_ids

    # -- steps ------------------------------------------------------------------------------------------
    def train_batch(self, data: tuple[torch.Tensor, torch.Tensor], optimizer: Any) -> float:
        """One step: the schedule over `accumulate_steps` micro-batches of `data` = (inputs, labels), then
        `optimizer.step()` and `zero_grad()`. Inputs are read on the first stage and labels on the last (other ranks
        may pass what they have). Returns this data rank's mean micro-batch loss, on every rank."""
        self.module.train()
        # fp16 loss scaling: each micro-batch's loss is scaled before its backward; step() unscales.
        self._scale = float(getattr(optimizer, "loss_scale", None) or 1.0)
        loss = self._run(data, train=True) / self._scale
        self._scale = 1.0
        optimizer.step()
        optimizer.zero_grad()
        return loss

    @torch.no_grad()
    def eval_batch(self, data: tuple[torch.Tensor, torch.Tensor]) -> float:
        """The mean micro-batch loss of `data`, without a step and without changing a parameter (on every rank). Runs
        the training schedule forward only, except on a V (DualPipeV, ZBV), whose torch schedule cannot: there the
        same stages in the same V run `evaluation.ForwardOnlyV`."""
        self.module.eval()
        return self._run(data, train=False)

    def _run(self, data: tuple[torch.Tensor, torch.Tensor], *, train: bool) -> float:
        inputs, labels = data
        rows = inputs.shape[0] if self.first else labels.shape[0]
        expected = self.micro_batch_size * self.accumulate_steps
        if rows != expected:
            raise StrategyError(
                f"the batch has {rows} rows, but a pipeline step takes pipeline_configs.micro_batch_size × "
                f"accumulate_steps = {self.micro_batch_size} × {self.accumulate_steps} = {expected} per data rank; "
                "give that many rows, or change the two fields", field="pipeline_configs.accumulate_steps")
        if self.hcg.mp_size > 1 and self.hcg.resolved.mp.need_broadcast_data:  # the mp group runs one batch
            if self.first:
                (inputs,) = broadcast_data(inputs, hcg=self.hcg)
            if self.last:
                (labels,) = broadcast_data(labels, hcg=self.hcg)
        # A V's eval runs a forward-only schedule of its own (evaluation.py); other evals run the training schedule's.
        schedule = self._schedule_for(train or not self._eval_apart, self._batch_shape(inputs))
        losses: list[torch.Tensor] = []
        args = (inputs,) if self.first else ()
        target = labels if self.last else None
        run = schedule.step if train else schedule.eval
        if self.timer is not None and train:
            self.timer.begin()
        try:
            run(*args, target=target, losses=losses if self.last else None, return_outputs=False)
        finally:
            if self.timer is not None and train:
                self.timer.end()
        total = torch.stack([x.detach().float() for x in losses]).sum() if self.last else torch.zeros(())
        if self.hcg.resolved.pipeline.delay_scale_loss:  # the losses were left whole: their mean
            total = total / self.accumulate_steps
        # The last stage's rank has the loss; one broadcast over the pp group gives it to every stage.
        owner = self.hcg.resolved.pipeline.pp_rank_of(self.num_stages - 1)
        with guard("pipeline loss broadcast", self.hcg.pp_group):
            dist.broadcast(total, group=self.hcg.pp_group, group_src=owner)
        return float(total)

    def _batch_shape(self, inputs: torch.Tensor) -> tuple[int, ...]:
        """The step's input shape as the first stage sees it, on every rank of the pp group (the others hold no inputs):
        every stage picks the same stages for it, or refuses it together, before anything is sent."""
        shape = torch.zeros(8, dtype=torch.int64)
        if self.first:
            shape[0] = inputs.dim()
            shape[1:1 + inputs.dim()] = torch.tensor(inputs.shape)
        owner = self.hcg.resolved.pipeline.pp_rank_of(0)
        with guard("pipeline batch shape broadcast", self.hcg.pp_group):
            dist.broadcast(shape, group=self.hcg.pp_group, group_src=owner)
        return tuple(int(d) for d in shape[1:1 + int(shape[0])])

    def _schedule_for(self, train: bool, shape: tuple[int, ...]) -> Any:
        """The training schedule (or a V's forward-only one) for a step of this shape: built on first use, then kept or
        rebuilt as the pipeline settings' `shapes` says."""
        key = (train, shape)
        mode = self.hcg.resolved.pipeline.shapes
        if mode == "every_step":  # (pp_configs.clear_every_step_cache)
            self._schedules.clear()
        schedule = self._schedules.get(key)
        if schedule is not None:
            return schedule
        seen = [s for (t, s) in self._schedules if t == train]
        if mode == "fixed" and seen:
            raise StrategyError(
                f"this step's batch has shape {list(shape)}, the pipeline's stages were built for {list(seen[0])} "
                "(pipeline_configs.p2p_cache_shape keeps the first step's shapes): pad every batch to one shape, or set "
                "pp_configs.enable_dynamic_shape: true (stages kept for each shape) or pp_configs."
                "clear_every_step_cache: true (built anew each step)", field="pipeline_configs.p2p_cache_shape")
        cls = getattr(schedules, self.hcg.resolved.pipeline.schedule) if train else ForwardOnlyV
        schedule = self._schedules[key] = self._build(cls)
        return schedule

    def _build(self, cls: Any) -> Any:
        stages = [PipelineStage(chunk, s, self.num_stages, _device(self.hcg), group=self.hcg.pp_p2p_group)
                  for chunk, s in zip(self.chunks, self.stage_ids)]
        if self.timer is not None:
            for stage in stages:
                self.timer.wrap(stage)
        n, fn = self.accumulate_steps, self.loss_fn
        # Each micro-batch's loss is divided by their number, so the summed gradients are the mean's (also into
        # main_grad, which the schedule's own scaling would miss), and the summed losses are the mean; under
        # pp_configs.delay_scale_loss it is left whole and HybridParallelOptimizer.step divides the summed gradients.
        per_loss = 1 if self.hcg.resolved.pipeline.delay_scale_loss else n
        loss_fn = lambda out, y: fn(out, y) * (self._scale / per_loss)  # noqa: E731
        if cls is ForwardOnlyV:
            return cls(stages, n, loss_fn)
        stage_arg: Any = stages[0] if issubclass(cls, schedules.PipelineScheduleSingle) else stages
        return cls(stage_arg, n_microbatches=n, loss_fn=loss_fn, scale_grads=False)


def _device(hcg: HybridGroup) -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if hcg.mesh.device_type == "cuda" else torch.device("cpu")
