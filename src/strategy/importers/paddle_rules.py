"""Paddle's trainers' own rules, applied after the shared planner has sized the degrees: the blocks each writes only
when its axis is on, the silent rules (MAPPING.md §7), the order, amp by fp16_opt_level, and what they refuse.

Each step is one rule of `TrainingArguments.__post_init__` (PaddleNLP 3.0.0b4 / PaddleFormers 1.2.0), named in its
comment; `Trainer` (in `paddle`) holds where the two versions differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .common import located
from .paddle import _AXES, _BLOCK, _MP, _PP, _SD, ORDERS, VISIBLE, unknown_words

__all__ = ["apply", "finisher"]

# Written only when the named sibling is on (else a warning and nothing): PN:1366-1373, PF:2080-2092.
_ONLY_WITH = {_MP + "mp_skip_c_identity": _MP + "mp_async_allreduce",
              _MP + "mp_fused_linear_param_grad_add": _MP + "mp_async_allreduce"}
# Written as "the word and the degree > 1": PN:1320-1321, PF:2040-2041.
_AND_DEGREE = {_PP + "dp_comm_overlap": "dp", _PP + "sharding_comm_overlap": "sharding"}
# Ignored (with a warning) under a pipeline: PN:1512-1517, PF:2301-2306.
_NOT_UNDER_PP = (_SD + "tensor_fusion", _SD + "comm_overlap")
_SYNC = (_MP + "sync_param", _MP + "sync_grad", _MP + "sync_moment")
_WHY = "(what Paddle's trainer sets)"


def apply(t: Any, p: Any) -> None:
    ep = int(p.get("ep", 1))
    degrees = {"pp": p.pp, "mp": p.tp, "sharding": p.sharding or 1, "dp": p.dp or 1}
    hybrid = max(p.tp, p.pp, p.sep, p.cp, p.sharding or 1, ep) > 1
    auto = bool(p.get("auto_parallel"))
    _refusals(t, p, ep)
    _unknown_words(p, degrees, hybrid and not auto)
    _overlap_checks(t, p, degrees["sharding"] > 1 and hybrid and not auto)
    _evaluation(t, p)
    p.mark("eval_batch", "no counterpart", "evaluation's batch: the strategy has no evaluation setting" +
           (f" ({t.name} rewrites it to micro-batch × accumulation under a pipeline)" if t.expert_order == "pn" and
            p.pp > 1 else ""))
    _order(t, p, hybrid, ep)
    _experts(t, p, ep)
    _sharding(t, p)
    _fields(t, p, degrees, hybrid and not auto)
    _auto_pipeline(t, p, auto)
    _seed(t, p, auto)
    _amp(t, p)
    _recompute(t, p)
    _checkpoints(t, p)
    _visible_devices(p)
    if p.get("auto_parallel"):
        p.note("auto_parallel", f"{t.name}'s auto-parallel path: fleet.init gets only the degrees and the order; "
               "the micro-batches and accumulation (pipeline_configs.micro_batch_size, "
               "pipeline_configs.accumulate_steps), amp, recompute and sharding go to fleet.auto.Strategy, written "
               "here in this strategy's own fields")
    if p.has("expert_switch") and not p.owns("expert_switch"):
        p.mark("expert_switch", "nothing to set", "no expert degree above 1: the order stays as it is")
    p.fit(_WHY)


def _visible_devices(p: Any) -> None:
    """A device list the script exports stands for --devices (launch/context/device.py): say which and where."""
    for o in p.by_fact.get("node_procs", []):
        leaf = p.leaves[o.entry]
        if leaf.key in VISIBLE:
            line = f" (line {leaf.where.line})" if leaf.where.line else ""
            p.note("node_procs", f"the command names no --devices, so paddle.distributed.launch starts one rank per "
                   f"device {leaf.key} lists{line}: {o.value} a machine")


def _refusals(t: Any, p: Any, ep: int) -> None:
    """What the trainer raises on (asserts and ValueErrors), located at the argument."""
    seps = [o for o in p.by_fact.get("sep", []) if int(o.value) > 1]
    if len({p.leaves[o.entry].key for o in seps}) > 1:  # PN:1152-1154: sep and cp share the sep axis
        raise p.error("sep", "sep_parallel_degree and context_parallel_degree cannot both be > 1 (the trainer "
                      "asserts it: both ride on the sep axis)")
    stage = p.get("zero_stage")
    if t.expert_order == "pn" and stage in (2, 3) and p.pp > 1 and (p.sharding or 1) > 1:  # PN:1244-1248
        raise p.error("zero_stage", f"pipeline parallel is not compatible for sharding stage2 or stage3 ({t.name} "
                      "raises it): use stage1 with pipeline_parallel_degree > 1")
    if ep > 1 and p.world is not None:
        _expert_refusals(t, p, ep)
    if len({o.value for o in p.by_fact.get("dtype", [])}) > 1:
        raise p.error("dtype", "bf16 and fp16 cannot both be true (the trainer raises ValueError)")
    master = p.get("master_grad", False)
    if master and not p.has("dtype") and t.master_grad_needs_amp:  # PF:1925-1933
        raise p.error("master_grad", f"amp_master_grad{p.default('master_grad')} needs bf16 or fp16 ({t.name} "
                      "raises ConfigConflict): set amp_master_grad: false for a float32 run")
    if p.pp > 1 and t.eval_batch and p.has("eval_batch") and p.has("micro") and \
            int(p.get("eval_batch")) != int(p.get("micro")):  # PF:2042-2050
        raise p.error("eval_batch", f"per_device_eval_batch_size must equal per_device_train_batch_size under a "
                      f"pipeline ({t.name} raises ConfigConflict)")
    if p.pp > 1 and p.get(_PP + "dp_comm_overlap") and (p.dp or 1) > 1:  # PN:1304-1306
        raise p.error(_PP + "dp_comm_overlap", "dp comm overlap has an accuracy issue: the trainer raises ValueError")
    if p.pp > 1 and p.get(_PP + "sharding_comm_overlap") and (p.sharding or 1) > 1 and not master:  # PN:1300-1303
        raise p.error(_PP + "sharding_comm_overlap", "sharding comm overlap needs amp_master_grad (the trainer "
                      "raises ValueError)")
    if (p.sharding or 1) > 1 and p.get(_SD + "split_param") and not (master and p.has("dtype")):  # PN:1560-1566
        raise p.error(_SD + "split_param", "split_param needs amp_master_grad with bf16 or fp16 (the trainer asserts "
                      "it)")
    if (p.sharding or 1) > 1 and p.get(_SD + "use_reduce_avg") is False and stage != 1:  # PN:1477-1485
        raise p.error(_SD + "use_reduce_avg", "disable_stage1_reduce_avg needs sharding stage1 (the trainer asserts it)")


def _expert_refusals(t: Any, p: Any, ep: int) -> None:
    """PaddleNLP asserts sharding % ep and dp 1 (PN:1170-1173, 1183-1186); PaddleFormers asserts use_expert_parallel,
    dp 1 and sharding % moe_sharding, moe_sharding = world // (pp · ep) (PF:2824-2845, 2204-2207)."""
    if t.expert_order == "pf" and not p.get("expert_switch"):
        raise p.error("ep", f"expert parallelism needs use_expert_parallel: true ({t.name} asserts it)")
    if (p.dp or 1) > 1:
        raise p.error("ep", f"data parallel degree {p.dp} with expert parallelism ({t.name} asserts dp 1): give the "
                      "data ranks to sharding (sharding set, its degree -1)")
    moe = ep if t.expert_order == "pn" else _moe_sharding(p, ep)
    if (p.sharding or 1) % moe:
        what = f"expert_parallel_degree {ep}" if t.expert_order == "pn" else \
            f"the moe sharding degree world // (pp · ep) = {moe}"
        raise p.error("ep", f"the sharding degree {p.sharding or 1} should be divided by {what} ({t.name} asserts it)")


def _unknown_words(p: Any, degrees: dict[str, int], hybrid: bool) -> None:
    """A word the trainer does not know raises ValueError when it reads its block (PN:1255-1275, 1342-1357,
    1456-1475; PF validates them too), which it does only on the hybrid path with that axis on; the first one found
    is the error, located at its config string."""
    for leaf, message, axis in unknown_words(p.leaves):
        if hybrid and degrees[axis] > 1:
            raise located(leaf, message)


# The sharding overlap switches the trainer only checks (PN:1524-1558, PF:2312-2334): the stage each needs, whether
# it needs split_param (None: either), whether PaddleFormers asks logging_steps > 1 too (PaddleNLP always does), and
# what stands for it here.
_OVERLAPS = {
    "stage2_overlap": (2, None, True, "the Trainer's stage-2 reduce and broadcast overlap; FSDP2 overlaps its "
                       "reduce-scatters with the backward on its own"),
    "stage1_broadcast_overlap": (1, False, False, "FSDP2 prefetches its all-gathers on its own"),
    "stage1_allgather_overlap": (1, True, False, "FSDP2 prefetches its all-gathers on its own"),
}


def _overlap_checks(t: Any, p: Any, sharded: bool) -> None:
    """What the trainer asserts of its sharding overlap switches, inside its sharding block (`sharded`); each sets
    nothing in the strategy."""
    logging = p.get("logging_steps")
    for fact, (stage, split, pf_logging, why) in _OVERLAPS.items():
        if not p.get(fact):
            p.mark(fact, "nothing to set", "off")
            continue
        if not sharded:
            p.mark(fact, "no counterpart", _BLOCK["sharding"].format(name=t.name))
            continue
        if p.get("zero_stage") != stage:
            raise p.error(fact, f"{p.key(fact)} needs sharding stage{stage} ({t.name} asserts it)")
        if split is not None and bool(p.get(_SD + "split_param")) != split:
            raise p.error(fact, f"{p.key(fact)} needs split_param {'on' if split else 'off'} ({t.name} asserts it)")
        if (pf_logging or t.expert_order == "pn") and logging is not None and int(logging) <= 1:
            raise p.error(fact, f"{p.key(fact)} needs logging_steps > 1, got {logging} ({t.name} asserts it: the "
                          "loss it logs is read before the overlapped communication ends)")
        p.mark(fact, "nothing to set", why)


def _evaluation(t: Any, p: Any) -> None:
    """do_eval with evaluation_strategy "no" (the default): PaddleFormers raises ConfigConflict (PF:1831-1838),
    PaddleNLP warns and evaluates every eval_steps."""
    if p.get("do_eval") and p.get("eval_strategy", "no") == "no" and t.eval_needs_strategy:
        raise p.error("do_eval", f"do_eval needs evaluation_strategy \"steps\" or \"epoch\" ({t.name} raises "
                      "ConfigConflict with evaluation_strategy \"no\", its default)")
    for fact in ("logging_steps", "do_eval", "eval_strategy"):
        p.mark(fact, "no counterpart", "the training loop's (logging, evaluation): the strategy has no setting for it")


def _order(t: Any, p: Any, hybrid: bool, ep: int) -> None:
    """hybrid_configs["order"] from hybrid_parallel_topo_order, reordered for experts (PN:1416-1427,
    PF:2146-2174); Paddle's default order when nothing is hybrid."""
    if p.get("auto_parallel"):  # PN:1574-1794: the auto path hands fleet.init pp first
        p.set("hybrid_configs.order", ["pp", "dp", "sharding", "sep", "mp"], "auto_parallel")
        p.mark("topo_order", "nothing to set", "the auto-parallel path lays the axes out pp first")
        return
    if not hybrid:
        p.mark("topo_order", "nothing to set", f"no degree above 1: {t.name} builds no hybrid strategy (plain data "
               "parallel), and the order is Paddle's default")
        return
    order = list(ORDERS[p.get("topo_order", "pp_first")])
    by = ["topo_order"]
    if t.expert_order == "pn" and p.get("expert_switch"):
        order = order[1:-1] + ["dp", "mp"]
        by.append("expert_switch")
    if ep > 1:
        order.insert(order.index("mp"), "ep")
        order.insert(order.index("sharding"), "moe_sharding")
        if t.expert_order == "pf":
            order.insert(order.index("moe_sharding") + 1, "cp")
        else:  # PaddleNLP builds its expert groups inside each sharding group after fleet.init (add_moe_comm_group)
            p.note("ep", f"{t.name} keeps expert parallelism outside its proto (add_moe_comm_group builds the "
                   "expert groups inside each sharding group after fleet.init); here it is hybrid_configs.ep_degree, "
                   "with \"ep\" and \"moe_sharding\" listed in hybrid_configs.order, which the expert topology needs")
        by.append("ep")
        if p.has("expert_switch"):
            by.append("expert_switch")
    if p.cp > 1 and "cp" not in order:
        order.insert(order.index("sep") + 1, "cp")
        by.append("cp")
    p.set("hybrid_configs.order", order, *by)


def _experts(t: Any, p: Any, ep: int) -> None:
    """PaddleFormers writes moe_sharding_degree = world // (pp · ep) beside ep_degree (PF:2204-2209): the ranks of a
    pipeline stage that hold the same experts shard their state; PaddleNLP writes neither."""
    if ep > 1 and t.expert_order == "pf" and p.world is not None:
        p.set("hybrid_configs.moe_sharding_degree", _moe_sharding(p, ep), "ep", "expert_switch")


def _moe_sharding(p: Any, ep: int) -> int:
    """PaddleFormers' moe_sharding_degree: the ranks of a stage over ep (PF:2824-2826)."""
    return int(p.world) // (p.pp * ep)


def _sharding(t: Any, p: Any) -> None:
    """A sharding degree that comes out 1 drops sharding (PN:1156-1168, PF:2809-2818); a degree without a stage is
    forced to -1 (PN:1240-1241)."""
    if p.has("shard_group") and not p.owns("shard_group"):
        p.mark("shard_group", "nothing to set", f"`sharding` is empty, so {t.name} sets the sharding degree to -1: "
               "no sharding")
    if p.has("zero_stage") and p.get("zero_stage") and (p.sharding or 1) == 1 and p.sharding is not None:
        p.unset("hybrid_configs.sharding_configs.stage")
        p.note("zero_stage", f"the sharding degree comes out 1: {t.name} drops sharding (a warning only), so no stage "
               "is written")


def _fields(t: Any, p: Any, degrees: dict[str, int], hybrid: bool) -> None:
    """The fields the words and switches name, each written while its axis is on, as the trainer does."""
    for fact in [f for f in p.facts if "." in f]:
        if fact == _PP + "virtual_pp_degree" and p.get("auto_parallel"):
            continue  # (fleet.auto.Strategy's: _auto_pipeline)
        axis = next((a for prefix, a in _AXES if fact.startswith(prefix)), None)
        value = p.get(fact)
        if axis is not None and (not hybrid or degrees[axis] == 1):
            p.mark(fact, "no counterpart", _BLOCK[axis].format(name=t.name) if degrees[axis] == 1 else
                   f"{t.name} writes none of these blocks outside its hybrid path")
            continue
        if fact in _ONLY_WITH and value and not p.get(_ONLY_WITH[fact]):
            p.mark(fact, "nothing to set", f"{t.name} sets it only with {_ONLY_WITH[fact].rsplit('.', 1)[1]} on "
                   "(a warning otherwise)")
            continue
        if fact in _AND_DEGREE:
            value = bool(value) and degrees[_AND_DEGREE[fact]] > 1
        if fact in _NOT_UNDER_PP and p.pp > 1:
            p.mark(fact, "nothing to set", f"ignored under a pipeline ({t.name} warns)")
            continue
        if fact == "pipeline_configs.enable_partial_send_recv" and p.get("sequence_parallel"):
            value = False  # PN:1277-1282: sequence parallelism turns partial send/recv off (a warning)
            p.set(fact, value, fact, "sequence_parallel")
            p.note(fact, f"false: sequence_parallel turns it off ({t.name} warns)")
            continue
        p.set(fact, value, fact)
        if fact == _SD + "comm_overlap" and value:  # PN:1507-1511: with the accumulation it overlaps over
            p.set(_SD + "accumulate_steps", int(p.get("accum", 1)), fact)
        if fact in _SYNC and value:
            p.note(fact, "any sync word also sets Paddle's sync_param_name = [\"\"] (a Python attribute, outside its "
                   "proto: every parameter); here the syncs act on every parameter replicated across the mp group")
        if fact == _PP + "virtual_pp_degree":
            p.note(fact, f"{t.name} hands it to the model config (PipelineLayer's num_virtual_pipeline_stages), "
                   "outside the strategy")
    if p.pp > 1 and hybrid:
        if p.get("release_grads"):
            p.set(_PP + "release_gradients", True, "release_grads")
        for path, value in t.pp_always.items():
            p.set(path, value, "pp")
    elif p.has("release_grads"):
        p.mark("release_grads", "no counterpart", _BLOCK["pp"].format(name=t.name))


def _auto_pipeline(t: Any, p: Any, auto: bool) -> None:
    """The auto-parallel path hands the pipeline to fleet.auto.Strategy (PN:1632-1674, PF:2436-2480): its
    schedule_mode is pipeline_schedule_mode, and under "VPP" the model places its layers in virtual_pp_degree chunks a
    rank (its pipeline.vpp_degree stays 1: the VPP pass reads the chunks); ZBVPP's V runs two. Here
    pipeline_configs.schedule_mode and pp_configs.virtual_pp_degree, which pick torch's schedule."""
    vpp, mode = _PP + "virtual_pp_degree", p.get("auto_schedule")
    if not auto:
        p.mark("auto_schedule", "no counterpart", f"read only on {t.name}'s auto-parallel path (enable_auto_parallel); "
               "the hybrid path's schedule is its pipeline words' and the model's virtual_pp_degree")
        return
    if p.pp == 1:
        for fact in ("auto_schedule", vpp):
            p.mark(fact, "no counterpart", _BLOCK["pp"].format(name=t.name))
        return
    virtual = int(p.get(vpp, 1))
    if mode == "VPP" and virtual > 1:
        p.set(vpp, virtual, vpp, "auto_schedule")
        p.note(vpp, "under VPP the model places its layers in this many chunks a pipeline rank (fleet.auto.Strategy's "
               "pipeline.vpp_degree stays 1; its VPP pass reads the chunks), written here to "
               "hybrid_configs.pp_configs.virtual_pp_degree, which fleet.init's strategy leaves at 1")
    elif p.has(vpp):
        p.mark(vpp, "mapped", "one model chunk per rank: no virtual stages" if virtual <= 1 else
               f"the auto-parallel {mode or '1F1B'} schedule runs one chunk a rank (only VPP runs the model's virtual "
               "stages; ZBVPP its V of two)")
    if mode is None:
        return
    if mode == "Eager1F1B":
        p.set("pipeline_configs.schedule_mode", "1F1B", "auto_schedule")
        p.note("auto_schedule", "Paddle's Eager1F1B starts forwards earlier than 1F1B to overlap its sends; torch has no "
               "such schedule, so 1F1B runs (the same gradients, less overlap)")
        return
    p.set("pipeline_configs.schedule_mode", mode, "auto_schedule")
    p.note("auto_schedule", "fleet.auto.Strategy's pipeline.schedule_mode" +
           (", a V of two chunks a rank" if mode == "ZBVPP" else "") +
           ", written here to pipeline_configs.schedule_mode, which fleet.init's strategy leaves at its default")


def _seed(t: Any, p: Any, auto: bool) -> None:
    """tensor_parallel_configs.tensor_init_seed = seed at tp > 1 (PN:1338, PF:2053)."""
    if not p.has("seed"):
        return
    if p.tp > 1 and not auto:
        p.set("tensor_parallel_configs.tensor_init_seed", int(p.get("seed")), "seed")
    else:
        p.mark("seed", "no counterpart", "the training script's seed; it reaches the strategy only at tensor "
               "parallel degree > 1 (tensor_init_seed)")


def _amp(t: Any, p: Any) -> None:
    """bf16 / fp16 with fp16_opt_level: O1 autocast, O2 pure low-precision weights with fp32 masters (the Trainer's
    paddle.amp.decorate), scale_loss the initial loss scale of fp16's GradScaler."""
    dtype, level = p.get("dtype"), p.get("opt_level", "O1")
    if dtype is None or level == "O0":
        why = "O0: no mixed precision" if dtype is not None else "neither bf16 nor fp16 is on: float32, no amp"
        for fact in ("opt_level", "scale_loss", "master_grad", "dtype"):
            p.mark(fact, "nothing to set", why)
        return
    by = ("dtype", "opt_level")
    p.set("amp", True, *by)
    p.set("amp_configs.dtype", dtype, *by)
    if level == "O2":
        p.set("amp_configs.use_pure_bf16" if dtype == "bfloat16" else "amp_configs.use_pure_fp16", True, *by)
    if dtype == "float16" and p.has("scale_loss"):
        p.set("amp_configs.init_loss_scaling", float(p.get("scale_loss")), "scale_loss")
    else:
        p.mark("scale_loss", "nothing to set", "bfloat16 needs no loss scaling (the Trainer scales fp16 only)")
    p.mark("master_grad", "nothing to set", "the optimizer keeps fp32 masters and steps on fp32 gradients under pure "
           "low precision here" if level == "O2" else "only O2 has master gradients")


def _recompute(t: Any, p: Any) -> None:
    """recompute with recompute_granularity: "full" is every block, as the strategy's recompute; the rest is
    selective (core_attn, full_attn) and has no counterpart."""
    granularity = p.get("granularity")
    on = granularity is not None if t.granularity_switches else bool(p.get("recompute"))
    if not on:
        p.mark("granularity", "nothing to set", "recompute is off")
        return
    if granularity in (None, "full"):
        if t.granularity_switches:
            p.set("recompute", True, "granularity")
        else:
            p.mark("granularity", "nothing to set", '"full": every block, as the strategy\'s recompute does')
        return
    p.unset("recompute")
    why = (f"recompute_granularity {granularity!r} recomputes part of each block; the strategy's recompute is whole "
           "blocks, and mapping one to the other would change what is saved")
    p.mark("recompute", "no counterpart", why)
    p.mark("granularity", "no counterpart", why)


def _checkpoints(t: Any, p: Any) -> None:
    """save_strategy "epoch" or "no": save_steps counts nothing."""
    how = p.get("save_strategy", "steps")
    if how == "steps":
        p.mark("save_strategy", "nothing to set", '"steps": checkpoints every save_steps, as every_steps counts')
        return
    for path in ("checkpoint_configs.every_steps", "checkpoint_configs.dir", "checkpoint_configs.keep_last"):
        p.unset(path)
    for fact in ("ckpt_every", "ckpt_dir", "ckpt_keep"):
        p.mark(fact, "nothing to set", f"save_strategy {how!r} leaves no step-counted checkpoints")
    if how == "no":
        p.mark("save_strategy", "nothing to set", '"no": no checkpoints, the strategy\'s default')
    else:
        p.mark("save_strategy", "no counterpart", "saving at each epoch's end has no counterpart: the strategy's "
               "checkpoints count steps")


def finisher(trainer: Any) -> Callable[[Any], None]:
    """The Tool's `finish` hook for `trainer` (a `paddle.Trainer`): its silent rules, after the shared planner."""
    return lambda p: apply(trainer, p)
