"""From the facts a file states (tensor degree 8, ZeRO stage 3, bf16) to strategy fields on Paddle's axes.

World = dp · pp · sharding · sep · cp · mp. The data ranks (world / (mp · pp · sep · cp)) go to dp_degree, or to
sharding_degree under ZeRO / FSDP; ep_degree is carved out of the ranks outside mp and pp (Megatron's and torchtitan's
rule), or out of a pipeline stage's ranks where experts stay whole (PaddleFormers; an expert tensor degree of 1),
never multiplying the world. Each fact is stated once by the tools' rules; this module (with `world`, the world
size and the degrees it sizes, on `ledger`'s bookkeeping) is the one place that turns facts into fields, so every
importer maps alike.
"""

from __future__ import annotations

from typing import Any

from .common import Leaf, Tool, located
from .facts import SCHEDULES, Occurrence, Outcome
from .world import World

__all__ = ["plan"]

# How a tool keeps each expert whole (its expert tensor degree 1), which lets ep span the tensor-parallel ranks.
_EXPERTS_WHOLE = {"megatron": "--expert-tensor-parallel-size 1",
                  "torchtitan": "parallelism.expert_tensor_parallel_degree = 1"}


def plan(occurrences: list[Occurrence], leaves: list[Leaf], tool: Tool, world_size: int | None
         ) -> tuple[dict[str, Any], int | None, dict[int, list[Outcome]]]:
    """The strategy as a dict, the world size used, and each entry's outcomes (one per fact it states)."""
    planner = _Planner(occurrences, leaves, tool, world_size)
    planner.run()
    return planner.strategy, planner.world, planner.outcomes()


class _Planner(World):
    """The rules, in order: the degrees, the data split and stage, experts, batches, pipeline, precision, checkpoints."""

    def __init__(self, occurrences: list[Occurrence], leaves: list[Leaf], tool: Tool, world_size: int | None) -> None:
        super().__init__(occurrences, leaves, tool, world_size)
        # The data split (`data_split`): dp_degree and sharding_degree (None: the world size leaves them open), and
        # whether the data ranks shard (a stage applies).
        self.dp: int | None = None
        self.sharding: int | None = None
        self.sharded = False

    def run(self) -> None:
        self.degrees()
        self.data_split()
        self.experts()
        self.batches()
        self.pipeline()
        self.precision()
        self.checkpoints()
        self.metrics()
        if self.has("recompute"):
            self.set("recompute", bool(self.get("recompute")), "recompute")
        if self.has("sequence_parallel"):
            if self.tp > 1:
                self.set("hybrid_configs.mp_configs.sequence_parallel", True, "sequence_parallel")
            else:
                own = f" ({self.tool.sequence_parallel_at_tp1})" if self.tool.sequence_parallel_at_tp1 else ""
                self.mark("sequence_parallel", "no counterpart", "the tensor-parallel degree is 1, so there is nothing to "
                          f"split the sequence over{own}")
        if not self.owns("num_machines"):
            self.mark("num_machines", "no counterpart", "the launcher's: where the processes run")
        if self.tool.finish is not None:
            self.tool.finish(self)

    def checkpoints(self) -> None:
        """Periodic checkpoints: where, how often, how many kept, in the background (unless the tool's are off)."""
        facts = {"ckpt_dir": "dir", "ckpt_every": "every_steps", "ckpt_keep": "keep_last", "ckpt_async": "async_save"}
        if self.has("ckpt_enable") and not self.get("ckpt_enable"):
            for fact in (*facts, "ckpt_enable"):
                self.mark(fact, "nothing to set", f"{self.key('ckpt_enable')} is off: the tool saves no checkpoints")
            return
        for fact, name in facts.items():
            if not self.has(fact):
                continue
            if name == "every_steps" and not self.has("ckpt_dir"):
                self.mark(fact, "no counterpart", "saving every N steps needs checkpoint_configs.dir, which the file "
                          "leaves out")
                continue
            value = self.get(fact)
            if name == "every_steps" and self.strategy.get("gradient_merge"):
                # the tools count optimizer updates; a training step here is a micro-step of gradient merge
                value *= self.strategy.get("gradient_merge_configs", {}).get("k_steps", 1)
            self.set(f"checkpoint_configs.{name}", value, fact, "ckpt_enable")

    def metrics(self) -> None:
        """What the run logs: its interval, TensorBoard, the optimizer's timer."""
        for fact, path in (("logging_steps", "metrics_configs.log_interval"), ("log_interval", "metrics_configs.log_interval"),
                           ("tensorboard", "metrics_configs.tensorboard"), ("timers", "hybrid_configs.enable_optimizer_timer")):
            if self.has(fact):
                self.set(path, self.get(fact), fact)

    def data_split(self) -> None:
        """dp_degree and sharding_degree from the data ranks, and the sharding stage."""
        stage, mode = self.get("zero_stage"), self.get("data_mode")
        if mode == "deepspeed" and stage is None and not self.included():
            stage = 2  # accelerate's DeepSpeedPlugin: zero_stage defaults to 2
            self.mark("data_mode", "mapped", "accelerate's DeepSpeed plugin runs ZeRO stage 2 unless told")
        explicit = self.has("replicate") or self.has("shard")
        if explicit:  # explicit degrees (torchtitan, accelerate's parallelism_config)
            self.dp, self.sharding = self.explicit_degrees()
            self.sharded = self.sharding > 1
        elif (stage or 0) >= 1 or (mode == "shard" and self.get("fsdp_stage") != 0):
            self.sharded = True
            self.dp, self.sharding = self.sharded_degrees()
        else:
            self.dp, self.sharding = self.replicated_degrees()
        self.write_data_degrees(explicit)
        self.stage(stage, self.sharded, self.sharding)
        if explicit and not self.owns("data_mode"):
            named = self.key("shard") if self.has("shard") else self.key("replicate")
            self.mark("data_mode", "mapped", f"the data degrees come from {named.rsplit('.', 1)[0]}")

    def explicit_degrees(self) -> tuple[int, int]:
        """(dp, sharding) as the file gives them (replicate, shard), a shard of -1 taking the data ranks left."""
        dp = int(self.get("replicate", 1))
        sharding = self.get("shard", 1)
        if self.tool.size_one_replicates and self.data and dp == sharding == 1 and self.data == self.world:
            dp = self.data
        if sharding == -1:
            if self.data is None:
                raise self.needs_world("shard", f"-1{self.default('shard')} takes the data ranks left, and so")
            if self.data % dp:
                raise self.error("replicate", f"{self.said('replicate')} does not divide the "
                                 f"{self.data} data ranks at {self.world_text()}")
            sharding = self.data // dp
        if self.data is not None and dp * sharding != self.data:
            blame = "shard" if self.has("shard") else "replicate"
            raise self.error(blame, f"{dp} replicas × {sharding} shards ≠ the {self.data} data ranks at "
                             f"{self.world_text()} (world / (tp · pp · sep · cp))")
        return dp, sharding

    def sharded_degrees(self) -> tuple[int | None, int | None]:
        """(dp, sharding) under ZeRO or FSDP: sharding over the shard group (a size, or each machine), else over every
        data rank."""
        group = self.get("shard_group")
        if group == "node" and self.data is not None:
            count = int(self.get("num_machines", 1))
            if self.data % count:
                raise self.error("num_machines", f"{self.said('num_machines')} does not divide the {self.data} "
                                 f"data ranks at {self.world_text()}")
            group = self.data // count
        if isinstance(group, int) and group > 0:
            if self.data is None:
                return None, group
            if self.data % group:
                raise self.error("shard_group", f"{self.said('shard_group')} does not divide the {self.data} "
                                 f"data ranks at {self.world_text()}")
            return self.data // group, group
        if self.data is not None:
            return 1, self.data
        if group == "node":
            raise self.needs_world("shard_group", "sharding within each machine")
        blame = next(f for f in ("zero_stage", "fsdp_stage", "data_mode") if self.has(f))
        raise self.needs_world(blame, "it shards over every data rank, and sharding_degree (the data ranks)")

    def replicated_degrees(self) -> tuple[int | None, int | None]:
        """(dp, sharding) when nothing shards: every data rank a replica (dp -1, inferred, without a world size)."""
        if self.data is not None:
            return self.data, 1
        for fact in ("data_mode", "zero_stage", "fsdp_stage"):
            if self.get(fact, 0) in (0, "replicate", "deepspeed"):
                self.mark(fact, "mapped", "the data ranks replicate: dp_degree (-1) is inferred at the world size")
        return None, None

    def write_data_degrees(self, explicit: bool) -> None:
        """dp_degree and sharding_degree, each owned by the facts that sized it."""
        machines = ("num_machines",) if self.get("shard_group") == "node" else ()
        by_dp = ("replicate", *self.sized, "data_ranks") if explicit else (
            "zero_stage", "data_mode", "fsdp_stage", "shard_group", *self.sized, "data_ranks", *machines)
        by_sharding = ("shard", *self.sized, "data_ranks") if explicit else by_dp
        if self.dp is not None:
            self.set("hybrid_configs.dp_degree", self.dp, *by_dp)
        if self.sharding is not None:
            self.set("hybrid_configs.sharding_degree", self.sharding, *by_sharding)

    def included(self) -> bool:
        """A DeepSpeed file was imported through accelerate's deepspeed_config_file (its stage, or DeepSpeed's 0)."""
        return any(".deepspeed_config_file." in leaf.key for leaf in self.leaves)

    def stage(self, stage: int | None, sharded: bool, sharding: int | None) -> None:
        """sharding_configs.stage: the ZeRO stage, else FSDP's strategy, else whether it reshards after forward."""
        by: tuple[str, ...]
        fsdp = self.get("data_mode") == "shard" or ((self.has("replicate") or self.has("shard")) and stage is None)
        if not fsdp and stage is not None and stage >= 1:  # ZeRO (DeepSpeed, Megatron's distributed optimizer)
            value, by = stage, ("zero_stage", "data_mode")
        elif self.get("fsdp_stage"):  # FSDP's sharding strategy
            value, by = int(self.get("fsdp_stage")), ("fsdp_stage",)
        elif self.has("reshard"):  # FSDP2's reshard_after_forward
            how = self.get("reshard")
            value = 3 if how == "always" or (how == "default" and self.pp == 1) else 2
            by = ("reshard",)
        else:
            value, by = 3, ("data_mode", "shard")  # FSDP's FULL_SHARD, every tool's default
        if sharded is False:
            why = "nothing is sharded, so no stage applies"
            if self.data == 1:
                why = "one data rank: nothing to shard, so no stage is written"
            if self.cp > 1 and (self.tool.fsdp_by_default or self.get("data_mode") == "shard"):
                why = (f"{self.tool.name}'s FSDP also shards over the {self.cp} cp ranks; here sharding_degree covers "
                       f"the data ranks only ({sharding}), so nothing is sharded and no stage is written")
            for fact in ("fsdp_stage", "reshard"):
                if self.get(fact) != 0:
                    self.mark(fact, "no counterpart", why)
            self.mark("fsdp_stage", "mapped", "no sharding: the data ranks replicate")
            self.mark("zero_stage", "mapped", "stage 0: the data ranks replicate")
            if self.get("data_mode") == "shard":
                self.mark("data_mode", "mapped", why)
            return
        self.set("hybrid_configs.sharding_configs.stage", value, *by)
        for fact in ("fsdp_stage", "reshard", "zero_stage"):
            if fact not in by and self.has(fact):
                self.mark(fact, "no counterpart", f"the stage comes from {self.key(by[0])}" if self.has(by[0]) else
                          "the stage comes from another key")
        if self.cp > 1 and self.tool.fsdp_spans_cp:
            self.mark("shard", "mapped", f"{self.tool.name}'s FSDP also spans the cp ranks; here sharding_degree covers "
                      "the data ranks only")

    def experts(self) -> None:
        """ep_degree out of the data ranks (Megatron's and torchtitan's rule while experts split over tp too), or out
        of a pipeline stage's ranks where each expert stays whole (PaddleFormers; an expert tensor degree of 1)."""
        etp = self.get("etp")
        if etp is not None and int(etp) > 1:
            self.mark("etp", "no counterpart", f"{self.said('etp')} splits each expert over tensor-parallel ranks; here "
                      "experts stay whole on every mp rank (ep_degree splits them between ranks)")
        if not self.has("ep"):
            if etp is not None and int(etp) <= 1:
                self.mark("etp", "mapped", "no expert parallelism: nothing to split")
            return
        ep = int(self.get("ep"))
        whole = self.tool.experts_span_tp or (etp is not None and int(etp) == 1)
        self.set("hybrid_configs.ep_degree", ep, "ep", *(("etp",) if etp is not None and int(etp) == 1 else ()))
        if self.world is None:
            return
        rest = self.world // (self.pp if whole else self.tp * self.pp)
        if rest % ep == 0:
            return
        if whole:
            raise self.error("ep", f"{self.said('ep')} must divide the {rest} ranks of a pipeline stage at "
                             f"{self.world_text()} (experts whole on every rank: ep spans the tensor-parallel ranks "
                             "too)")
        whole_key = _EXPERTS_WHOLE.get(self.tool.kind)
        fix = (f"; or keep each expert whole ({whole_key}), and ep may span the tensor-parallel ranks too, up to the "
               f"{self.world // self.pp} ranks of a stage" if whole_key and (self.world // self.pp) % ep == 0 else "")
        raise self.error("ep", f"{self.said('ep')} must divide the {rest} ranks outside tensor and pipeline "
                         f"parallelism at {self.world_text()} (experts are carved out of the data ranks){fix}")

    def batches(self) -> None:
        micro, glob, acc, pp_micro = (self.get(f) for f in ("micro", "global", "accum", "pp_micro"))
        ranks = self.dp * self.sharding if self.dp is not None and self.sharding is not None else None
        k: int | None = None
        by: tuple[str, ...] = ()
        if glob == -1:
            self.mark("global", "no counterpart", "-1: the local batch times the data ranks, no accumulation")
        if acc is not None:
            k, by = int(acc), ("accum",)
            if glob is not None and glob != -1:  # global = micro × accum × data ranks: checked with the degrees
                self.mark("global", "no counterpart", "the accumulation is set by " + self.key("accum") +
                          "; the global batch itself is the data loader's")
        elif glob is not None and glob != -1:
            if micro is None:
                self.mark("global", "no counterpart", "without a micro-batch size it sets no accumulation; "
                          "the global batch is the data loader's")
            elif ranks is None:
                raise self.needs_world("global", f"the accumulation, {self.said('global')} / ({self.said('micro')} × "
                                       "the data ranks),")
            else:
                q, r = divmod(glob, micro * ranks)
                if r or not q:
                    raise self.error("global", f"{self.said('global')} is not a multiple of {self.said('micro')} × "
                                     f"{ranks} data ranks at {self.world_text()}")
                if q == 1 and self.pp == 1:
                    self.mark("global", "no counterpart", f"it equals micro-batch × {ranks} data ranks: no "
                              "accumulation; the global batch is the data loader's")
                k, by = q, ("global",)
        if self.pp > 1:
            chunks = 1
            if pp_micro is not None and micro is not None:
                if micro % pp_micro:
                    raise self.error("pp_micro", f"{self.said('pp_micro')} does not divide {self.said('micro')}")
                chunks = micro // pp_micro
            size = pp_micro if pp_micro is not None else micro
            if size is not None:
                self.set("pipeline_configs.micro_batch_size", int(size), "pp_micro" if pp_micro is not None else "micro")
            sources = by + (("micro", "pp_micro") if pp_micro is not None and micro is not None else ())
            if sources:
                self.set("pipeline_configs.accumulate_steps", (k or 1) * chunks, *sources)
            return
        if k is not None:
            if k > 1:
                self.set("gradient_merge", True, *by)
                self.set("gradient_merge_configs.k_steps", k, *by)
                self.set("gradient_merge_configs.avg", True, *by)
            elif by == ("accum",):
                self.mark("accum", "mapped", "1 step: no accumulation, the strategy's default")
        self.mark("micro", "no counterpart", "the data loader's per-rank batch (without a pipeline no field holds it)")
        self.mark("pp_micro", "no counterpart", "the pipeline degree is 1")

    def pipeline(self) -> None:
        facts = ("schedule", "virtual", "layers_per_virtual", "layers_per_stage")
        if self.pp == 1:
            for fact in facts:
                self.mark(fact, "no counterpart", "the pipeline degree is 1: no pipeline runs")
            self.mark("num_layers", "no counterpart", "the model's architecture")
            return
        virtual = self.get("virtual")
        by: tuple[str, ...] = ("virtual",)
        unknown = False
        for fact in ("layers_per_virtual", "layers_per_stage"):
            if not self.has(fact):
                continue
            layers = self.get("num_layers")
            if layers is None:
                self.mark(fact, "unresolved", "the virtual stages are the layers / pp_degree / this, and the file does "
                          "not say how many layers the model has")
                unknown = True
                continue
            per_rank, rest = divmod(int(layers), self.pp * int(self.get(fact)))
            if rest or not per_rank:
                raise self.error(fact, f"{self.said(fact)} does not divide {self.said('num_layers')} over "
                                 f"{self.pp} pipeline ranks")
            virtual, by = per_rank, (fact, "num_layers")
        if "num_layers" not in by:
            self.mark("num_layers", "no counterpart", "the model's architecture")
        name = self.get("schedule")
        if name is None and virtual is not None and virtual > 1:
            name = "Interleaved1F1B"  # Megatron interleaves once there are virtual stages
        schedule = SCHEDULES[name] if name is not None else None
        if schedule is not None:
            if schedule.mode is not None:
                self.set("pipeline_configs.schedule_mode", schedule.mode, "schedule", *by)
            if schedule.dualpipev:
                self.set("hybrid_configs.pp_configs.use_dualpipev", True, "schedule")
            if virtual is None and schedule.virtual > 1 and not unknown:
                virtual, by = schedule.virtual, ("schedule",)
        if virtual is not None and virtual > 1:
            self.set("hybrid_configs.pp_configs.virtual_pp_degree", int(virtual), *by)
        elif virtual is not None:
            self.mark(by[0], "mapped", "one model chunk per rank: no virtual stages")

    def precision(self) -> None:
        on = self.by_fact.get("amp", [])
        if len({o.value[0] for o in on}) > 1:
            first, last = (self.leaves[o.entry] for o in (on[0], on[-1]))
            raise located(last, f"{last.key} and {first.key} turn on different precisions; keep one")
        if on:
            self.amp(*self.get("amp"))
        for fact, field in (("init_scale", "init_loss_scaling"), ("scale_window", "incr_every_n_steps"),
                            ("hysteresis", "decr_every_n_nan_or_inf")):
            if self.has(fact):
                value = self.get(fact)
                self.set(f"amp_configs.{field}", float(value) if field == "init_loss_scaling" else int(value), fact)
        if self.has("scale_power"):
            if self.get("static_scale"):
                self.mark("scale_power", "no counterpart", f"the static {self.key('static_scale')} is used instead")
            else:
                self.set("amp_configs.init_loss_scaling", float(2 ** int(self.get("scale_power"))), "scale_power")
        if self.has("static_scale"):
            scale = float(self.get("static_scale"))
            if scale > 0:
                self.set("amp_configs.use_dynamic_loss_scaling", False, "static_scale")
                self.set("amp_configs.init_loss_scaling", scale, "static_scale")
            else:
                self.set("amp_configs.use_dynamic_loss_scaling", True, "static_scale")

    def amp(self, dtype: str, mode: str) -> None:
        """`mode`: "pure" (weights in dtype, fp32 masters), "autocast", "plugin" (accelerate: pure under its FSDP,
        DeepSpeed or Megatron-LM plugins, as FSDP's param_dtype and those engines keep them, else autocast), "fsdp"
        (torchtitan: pure under FSDP or cp, autocast under plain DDP or one device, nothing otherwise)."""
        plugin = self.get("data_mode") in ("shard", "deepspeed", "megatron")
        sharded = self.sharded or (mode == "fsdp" and self.cp > 1) or (mode == "plugin" and plugin)
        if mode == "fsdp" and not sharded and (self.tp > 1 or self.pp > 1 or self.has("ep")):
            self.mark("amp", "no counterpart", "torchtitan applies it only under FSDP, or under plain DDP or on one "
                      "device: this run trains in float32")
            return
        pure = mode == "pure" or (mode in ("plugin", "fsdp") and bool(sharded))
        self.set("amp", True, "amp")
        self.set("amp_configs.dtype", dtype, "amp")
        if pure:
            self.set("amp_configs.use_pure_bf16" if dtype == "bfloat16" else "amp_configs.use_pure_fp16", True, "amp")
        if dtype == "float16":
            scaler = self.tool.scaler
            if self.get("data_mode") in ("deepspeed", "megatron"):  # accelerate hands fp16 to that engine's scaler
                from importlib import import_module

                scaler = import_module(f".{self.get('data_mode')}", __package__).TOOL.scaler
            for name, value in scaler.items():
                self.set(f"amp_configs.{name}", value, "amp")
