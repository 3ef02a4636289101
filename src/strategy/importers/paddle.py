"""What PaddleNLP's and PaddleFormers' trainers share: their argument files, the rules both spell alike, and the step
that `paddle_rules.finisher(trainer)` applies as their silent rules after the shared planner has sized the degrees.

`TrainingArguments.__post_init__` fills the fleet `DistributedStrategy` (this schema) from the arguments and leaves
the rest to the Trainer (sharding stage, amp, recompute, gradient merge, checkpoints); both are written here, the
second into this project's own fields. The facts, rule by rule with the source lines, are
`shared/fixtures/paddlenlp/MAPPING.md`; `paddlenlp` and `paddleformers` hold each version's rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .common import CLIP, Leaf, NoCounterpart, Nothing, Reader, Rule, choice, flatten, integer, number, text, truth

__all__ = ["MP_WORDS", "PP_WORDS", "SHARDING_WORDS", "Trainer", "arguments", "common_rules", "sharding_stage",
           "with_words", "words"]

ORDERS = {"pp_first": ["dp", "pp", "sharding", "sep", "mp"], "sharding_first": ["dp", "sharding", "pp", "sep", "mp"]}
WORD_KEYS = ("pipeline_parallel_config", "tensor_parallel_config", "sharding_parallel_config", "data_parallel_config",
             "sequence_parallel_config")

# The axis whose degree must be > 1 for the trainer to write a block (it skips the block otherwise).
_AXES = (("hybrid_configs.pp_configs.", "pp"), ("pipeline_configs.", "pp"), ("hybrid_configs.mp_configs.", "mp"),
         ("tensor_parallel_configs.", "mp"), ("hybrid_configs.sharding_configs.", "sharding"))
_BLOCK = {"pp": "the pipeline degree is 1: {name} writes pipeline settings only under a pipeline",
          "mp": "the tensor-parallel degree is 1: {name} writes mp_configs only at tensor_parallel_degree > 1",
          "sharding": "the sharding degree is 1: {name} writes sharding_configs only when it shards"}
# fleet.auto.Strategy's pipeline.schedule_mode, as PaddleNLP's and PaddleFormers' auto-parallel path sets it from
# pipeline_schedule_mode (PN:1632-1674, PF:2436-2480).
AUTO_SCHEDULES = ("1F1B", "FThenB", "VPP", "ZBH1", "ZBVPP", "Eager1F1B")
_MP = "hybrid_configs.mp_configs."
_PP = "hybrid_configs.pp_configs."
_SD = "hybrid_configs.sharding_configs."


def words(value: str) -> list[str]:
    """A `*_parallel_config` string's words: split on "," when it has one, else on blanks (trainer_utils.py:1204)."""
    return [w.strip() for w in (value.split(",") if "," in value else value.split()) if w.strip()]


def arguments(text_: str, source: str) -> list[Leaf]:
    """The arguments of a JSON or YAML file."""
    if source.lower().endswith((".yaml", ".yml")):
        from ..formats.yaml.located import parse
    else:
        from ..formats.json.located import parse  # type: ignore[assignment]
    return list(flatten(parse(text_, source)))


def with_words(arguments_: list[Leaf]) -> list[Leaf]:
    """The arguments, each `*_parallel_config` string followed by one leaf per word (only the last string of a key
    given twice: a flag's replaces the file's words, not adds to them)."""
    out: list[Leaf] = []
    last = {leaf.key: i for i, leaf in enumerate(arguments_)}
    for i, leaf in enumerate(arguments_):
        out.append(leaf)
        if leaf.key in WORD_KEYS and isinstance(leaf.value, str) and last[leaf.key] == i:
            out += [Leaf(f"{leaf.key}.{word}", True, leaf.where) for word in words(leaf.value)]
    return out


def _sharding(value: Any) -> Any:
    if value is True:
        return 1
    if value in (False, None, "", []):
        return Nothing("empty: no sharding")
    items = value if isinstance(value, list) else str(value).split()
    stages = [w for w in items if w in ("stage1", "stage2", "stage3")]
    unknown = [w for w in items if w not in ("stage1", "stage2", "stage3", "offload")]
    if unknown:
        raise ValueError(f"expected stage1, stage2 or stage3 (optionally with offload), not {unknown[0]!r}")
    if not stages:
        raise ValueError('"offload" needs a stage beside it (the trainer raises ValueError)')
    if len(stages) > 1:
        raise ValueError("one stage only (the trainer raises ValueError)")
    return int(stages[0][-1])


def sharding_stage() -> Reader:
    return Reader('"stage1" / "stage2" / "stage3" (true: "stage1"): the stage, sharding over the data ranks left '
                  '(a trailing "offload" is only warned about by the trainer); "": no sharding', _sharding)


def _words_config(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError("expected a string of words")
    return Nothing("its words follow, one line each" if words(value) else "no words")


WORDS_CONFIG = Reader("a string of words, each its own line below", _words_config)


def _nothing(why: str) -> Reader:
    return Reader(f"nothing to set: {why}", lambda value: Nothing(why))


def _refuse(why: str) -> Reader:
    def read(value: Any) -> Any:
        raise ValueError(why)

    return Reader(why, read)


def _word_rules(config: str, table: Mapping[str, tuple[str | None, Any]], cite: str, *,
                ignored: str | None = None, axis: str | None = None) -> tuple[Rule, ...]:
    """One rule a word: `table` word -> (field, value when the word is present) or (None, why) for a word that sets
    nothing; `ignored` (PaddleFormers 1.2.0) says every word is validated and ignored. An unknown word is refused
    where the trainer reads the words: at read for `axis` None, else by `paddle_rules` when that axis is on (the
    trainer checks a block's words only on entering it)."""
    rules = []
    for word, (path, on) in table.items():
        key = f"{config}.{word}"
        if ignored is not None:
            rules.append(Rule(key=key, reason=ignored, cite=cite))
        elif path is None:
            rules.append(Rule(key=key, means="checked", read=_nothing(on), cite=cite))
        else:
            rules.append(Rule(key=key, means=path, read=truth(on, not on), cite=cite))
    if axis is None:
        rules.append(Rule(key=f"{config}.*", read=_refuse(unknown_word(config, table)), means="refused", cite=cite))
    else:
        rules.append(Rule(key=f"{config}.*", cite=cite, reason=f"not a word of {config}; the trainer reads these "
                          f"words only at {_DEGREE[axis]} > 1 (where it raises ValueError on this one)"))
    return (Rule(key=config, means="checked", read=WORDS_CONFIG, cite=cite), *rules)


def unknown_word(config: str, known: Mapping[str, Any], word: str = "") -> str:
    """What the trainer says of a word its `config` does not know, with the word it most likely misspells."""
    from ..schema import closest

    close = closest(word, list(known)) if word else None
    hint = f"; did you mean {close}?" if close else f" (known: {', '.join(known)})"
    return f"not a word of {config}; the trainer raises ValueError on it{hint}"


def unknown_words(leaves: list[Leaf]) -> list[tuple[Leaf, str, str]]:
    """Each word leaf of a hybrid block's config that its table does not know: the leaf, what the trainer says of
    it, and the block's axis (pp, mp or sharding)."""
    out = []
    for leaf in leaves:
        config, _, word = leaf.key.partition(".")
        if config in _TABLES and word and word not in _TABLES[config][1]:
            out.append((leaf, unknown_word(config, _TABLES[config][1], word), _TABLES[config][0]))
    return out


# PaddleNLP's words (MAPPING.md §2-4), each the field it sets and the value when present (None: checks only).
PP_WORDS: dict[str, tuple[str | None, Any]] = {
    "disable_p2p_cache_shape": ("pipeline_configs.p2p_cache_shape", False),
    "disable_partial_send_recv": ("pipeline_configs.enable_partial_send_recv", False),
    **{f"enable_{name}": (_PP + name, True) for name in (
        "delay_scale_loss", "dp_comm_overlap", "sharding_comm_overlap", "overlap_p2p_comm", "clear_every_step_cache")},
    "enable_timer": (_PP + "enable_timer", True),
    "enable_release_grads": (_PP + "release_gradients", True),
    "disable_batch_p2p_comm": (_PP + "use_batch_p2p_comm", False),
    **{name: (_PP + name, True) for name in ("best_unbalanced_scheduler", "use_dualpipev")},
}
MP_WORDS: dict[str, tuple[str | None, Any]] = {
    **{f"enable_{name}": (_MP + name, True) for name in (
        "mp_async_allreduce", "mp_skip_c_identity", "mp_fused_linear_param_grad_add", "sp_async_reduce_scatter")},
    "enable_delay_scale_loss": (None, "accepted; the Trainer reads it, nothing in the strategy (each micro-batch's loss "
                                       "is scaled before its backward here)"),
    **{name: (_MP + name, True) for name in ("sync_param", "sync_grad", "sync_moment")},
}
SHARDING_WORDS: dict[str, tuple[str | None, Any]] = {
    "enable_stage1_tensor_fusion": (_SD + "tensor_fusion", True),
    "enable_stage1_overlap": (_SD + "comm_overlap", True),
    "enable_stage2_overlap": ("stage2_overlap", True),
    "split_param": (_SD + "split_param", True),
    "disable_stage1_reduce_avg": (_SD + "use_reduce_avg", False),
    "enable_stage1_broadcast_overlap": ("stage1_broadcast_overlap", True),
    "enable_stage1_allgather_overlap": ("stage1_allgather_overlap", True),
    "enable_release_grads": (_SD + "release_gradients", True),
    "enable_fuse_optimizer_states": (_SD + "enable_fuse_optimizer_states", True),
}
_AUTO_ONLY = "read by the auto-parallel path only (fleet.auto.Strategy's gradient scaling and dp optimization)"
AUTO_WORDS: dict[str, tuple[str | None, Any]] = {
    "enable_allreduce_avg_in_gradinent_scale": (None, _AUTO_ONLY), "gradient_sync_after_accumulate": (None, _AUTO_ONLY)}


_TABLES = {"pipeline_parallel_config": ("pp", PP_WORDS), "tensor_parallel_config": ("mp", MP_WORDS),
           "sharding_parallel_config": ("sharding", SHARDING_WORDS)}
_DEGREE = {"pp": "the pipeline degree", "mp": "the tensor-parallel degree", "sharding": "the sharding degree"}


def word_rules(cite: Mapping[str, str], *, ignored: Callable[[str], str] | None = None) -> tuple[Rule, ...]:
    """The rules of the four `*_parallel_config` strings (`cite`: config -> the tool's source key)."""
    out: list[Rule] = []
    for config, (axis, table) in _TABLES.items():
        out += _word_rules(config, table, cite[config], ignored=ignored(config) if ignored else None, axis=axis)
    for config in ("data_parallel_config", "sequence_parallel_config"):
        out += _word_rules(config, AUTO_WORDS, cite["auto"], ignored="read by the auto-parallel path only "
                           "(fleet.auto.Strategy); in the hybrid path data_parallel_config must be empty (asserted)")
    return tuple(out)


_MODEL = "the model's configuration (kernels, fusions, attention), set by the model's code"
_DATA = "the data pipeline's (datasets, lengths, packing, loaders)"
_LOOP = "the training loop's (steps, schedule, optimizer, logging, evaluation)"
_NOT_HERE = "the trainer's, with no counterpart in the strategy"


def common_rules(cite: str, trainer: str) -> tuple[Rule, ...]:
    """Arguments both trainers spell alike and mean alike (`cite`: the tool's TrainingArguments source key; `trainer`:
    the Trainer's source key, where amp and sharding stages are applied), in the order they are matched: what maps,
    the launcher's, what is refused, and what belongs to the model, the data or the training loop."""
    return (*_mapped_rules(cite, trainer), *launch_rules(), *_refused_rules(cite), *_elsewhere_rules(cite))


def _mapped_rules(cite: str, trainer: str) -> tuple[Rule, ...]:
    """The arguments that set strategy fields (or say why they set none)."""
    return (
        Rule(key="sharding", means="zero_stage", read=sharding_stage(), cite=trainer,
             reason="the stage is the Trainer's (sharding optimizer / group_sharded_parallel), outside Paddle's proto"),
        Rule(key="hybrid_parallel_topo_order", means="topo_order", cite=cite, read=_choice_order()),
        Rule(key="use_expert_parallel", means="expert_switch", read=truth(True, Nothing("off")), cite=cite),
        Rule(key="enable_auto_parallel", means="auto_parallel", read=truth(True, Nothing("off: the hybrid path")),
             cite="auto"),
        Rule(key="pipeline_schedule_mode", means="auto_schedule", cite="auto", read=choice(
            {mode: mode for mode in AUTO_SCHEDULES})),
        Rule(key="bf16", means="dtype", read=truth("bfloat16", Nothing("off")), cite=trainer),
        Rule(key="fp16", means="dtype", read=truth("float16", Nothing("off")), cite=trainer),
        Rule(key="fp16_opt_level", means="opt_level", cite=trainer, read=_opt_level()),
        Rule(key="scale_loss", means="scale_loss", read=number(), cite=trainer),
        Rule(key="amp_master_grad", means="master_grad", read=truth(True, False), cite=cite),
        Rule(key="amp_custom_*_list", reason="the op lists of Paddle's autocast: torch.autocast keeps its own",
             cite=trainer),
        Rule(key="sequence_parallel", means="sequence_parallel", read=truth(True, Nothing("off")), cite="model",
             reason="the model config's switch; mp_configs.sequence_parallel here"),
        Rule(key="gradient_accumulation_steps", means="accum", read=integer(), cite="pipeline"),
        Rule(key="per_device_train_batch_size", means="micro", read=integer(), cite="pipeline"),
        Rule(key="per_device_eval_batch_size", means="eval_batch", read=integer(), cite=cite),
        Rule(key="release_grads", means="release_grads", read=truth(True, Nothing("off")), cite="pipeline"),
        Rule(key="sharding_comm_buffer_size_MB", means=_SD + "comm_buffer_size_MB", cite="sharding",
             read=integer(-1, scale=lambda n: n if n > 0 else Nothing(f"{n}: not written (only > 0 is)"))),
        Rule(key="seed", means="seed", read=integer(0), cite="tensor"),
        Rule(key="output_dir", means="ckpt_dir", read=text(describe="the directory checkpoints are saved into"),
             cite=cite),
        Rule(key="save_steps", means="ckpt_every", read=integer(), cite=cite),
        Rule(key="save_total_limit", means="ckpt_keep", cite=cite,
             read=Reader("a whole number; null: all", lambda v: Nothing("null: keep every checkpoint") if v is None
                         else integer(0).read(v))),
        Rule(key="save_strategy", means="save_strategy", cite=cite,
             read=_when('"steps": save_steps counts; "no": no checkpoints; "epoch": no counterpart')),
        Rule(key="max_grad_norm", reason=CLIP, cite=cite),
        Rule(key="logging_steps", means="logging_steps", read=integer(), cite=cite),
        Rule(key="do_eval", means="do_eval", read=truth(True, False), cite=cite),
        Rule(key="evaluation_strategy", means="eval_strategy", cite=cite,
             read=_when('"steps", "epoch" or "no" (with do_eval, PaddleFormers refuses "no")')),
    )


def _refused_rules(cite: str) -> tuple[Rule, ...]:
    """What the strategy does not implement, and the checkpoint formats and resumption parallel.save leaves out."""
    return (
        Rule(key="tensorwise_offload_optimizer", reason="offloading to CPU is not implemented", cite=cite),
        Rule(key="offload_optim", reason="offloading to CPU is not implemented", cite=cite),
        Rule(key="unified_checkpoint*", reason="Paddle's unified checkpoint format; parallel.save writes DCP sharded "
                                               "checkpoints", cite=cite),
        Rule(key="*_checkpoint_format", reason="Paddle's checkpoint formats; parallel.save writes DCP sharded "
                                               "checkpoints", cite=cite),
        Rule(key="ignore_*", reason="how a checkpoint is resumed is the Checkpointer's", cite=cite),
        Rule(key="*_hf", reason="converting checkpoints to or from Hugging Face's format is the script's", cite=cite),
        Rule(key="load_sharded_model", reason="Paddle's per-rank sharded checkpoint files; parallel.load reads DCP "
                                              "checkpoints at any layout", cite=cite),
        Rule(key="save_sharded_model", reason="Paddle's per-rank sharded checkpoint files; parallel.save writes DCP "
                                              "sharded checkpoints", cite=cite),
        Rule(key="force_reshard_pp", reason="resharding a checkpoint across pipeline layouts: parallel.load reshards "
                                            "every degree on its own", cite=cite),
        *(Rule(key=key, cite="auto", reason="a pass of Paddle's static auto-parallel graph (fleet.auto.Strategy's "
                                            "fused_passes and mp/sp optimizations); the runtime's kernels are torch's")
          for key in ("fused_linear", "fused_linear_param_grad_add", "fuse_sequence_parallel_allreduce",
                      "eliminate_transpose", "fuse_allreduce_split_to_reducescatter")),
        Rule(key="virtual_pipeline_seg_method", cite="auto", reason="how the auto-parallel path cuts the model into "
             "chunks (by layer class); here the layers are cut into equal contiguous ranges"),
    )


def _elsewhere_rules(cite: str) -> tuple[Rule, ...]:
    """The model's, the data pipeline's and the training loop's arguments: no counterpart in a strategy."""
    return (
        *(Rule(key=key, reason=_MODEL, cite="model") for key in (
            "model_name_or_path", "tokenizer_name_or_path", "use_flash_attention", "use_fused_*", "fuse_attention_*",
            "use_fast_layer_norm", "enable_linear_fused_grad_add", "flash_mask", "zero_padding", "lora*", "pissa",
            "using_fake_gate", "using_flex_token", "moe_*", "attn_impl", "_attn_implementation", "use_flash_attn*",
            "fine_tuning", "stage", "prefix_tuning", "neftune*", "weight_quantize_algo", "quantization_config*",
            "rope_scaling*", "use_sparse_*", "virtual_pp_degree_", "tensor_parallel_output", "num_hidden_layers",
            "use_attn_mask_startend_row_indices", "pre_alloc_memory", "use_filtered_label_loss", "model_type",
            "attention_probs_dropout_prob", "hidden_dropout_prob")),
        *(Rule(key=key, reason=_DATA, cite=cite) for key in (
            "dataset_name_or_path", "input_dir", "split", "max_seq_length", "max_seq_len", "src_length", "max_length",
            "train_dataset_*", "eval_dataset_*", "packing", "mix_strategy", "template*", "num_samples_each_epoch",
            "dataloader_*", "distributed_dataloader", "data_cache", "dataset_type", "eval_iters", "autoregressive",
            "greedy_zero_padding", "lazy", "chat_template")),
        *(Rule(key=key, reason=_LOOP, cite=cite) for key in (
            "learning_rate", "min_learning_rate", "min_lr", "warmup_*", "weight_decay", "adam_*", "max_steps",
            "num_train_epochs", "logging_*", "eval_*", "evaluation_strategy", "do_train", "do_eval", "do_predict",
            "do_export", "disable_tqdm", "continue_training", "load_best_model_at_end", "metric_for_best_model",
            "autotuner_benchmark", "benchmark", "skip_memory_metrics", "skip_profile_timer", "device", "to_static",
            "pp_recompute_interval", "optim", "lr_scheduler_type", "overwrite_output_dir", "report_to", "run_name",
            "greater_is_better", "save_safetensors", "save_on_each_node", "resume_from_checkpoint", "profiler_*",
            "gradient_checkpointing*", "max_evaluate_steps", "eval_accumulation_steps", "predict_with_generate",
            "remove_unused_columns", "label_names", "num_cycles", "lr_end", "power", "local_rank", "no_cuda",
            "should_save_model_state", "use_intermediate_api", "use_hybrid_parallel")),
    )


_LAUNCHER = "paddle.distributed.launch's: where the processes start and meet"
# What paddle.distributed.launch counts when a command names no --devices / --gpus (launch/context/device.py,
# Device.parse_device; launch/context/args_envs.py): its own PADDLE_DEVICES, a custom device's visible list (the one
# PADDLE_XCCL_BACKEND names first: Ascend's ASCEND_RT_VISIBLE_DEVICES, ...), CUDA's, XPU's; fleetrun's selected ids.
VISIBLE = ("PADDLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "NPU_VISIBLE_DEVICES", "TOPS_VISIBLE_DEVICES",
           "MLU_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "XPU_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
           "FLAGS_selected_gpus", "FLAGS_selected_xpus", "FLAGS_selected_npus")
BACKEND_DEVICES = {"npu": "ASCEND_RT_VISIBLE_DEVICES", "gcu": "TOPS_VISIBLE_DEVICES"}


def _devices(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    ids = [i for i in str(value).split(",") if i.strip()]
    if not ids or not all(i.strip().isdigit() for i in ids):
        raise ValueError("expected device ids such as 0,1,2,3")
    return len(ids)


def _nodes(value: Any) -> Any:
    if isinstance(value, str) and ":" in value:
        return NoCounterpart(f"{value}: an elastic range, known at launch; --world-size gives the world size here")
    return integer().read(value)


def launch_rules() -> tuple[Rule, ...]:
    """A launch script's own lines: the command imported, the others, the argument file, the launcher's options."""
    return (
        Rule(key="command", means="checked", cite="launch", read=Reader(
            "the training command imported", lambda v: Nothing("the training command imported (--command K picks "
                                                                 "another of a script's)"))),
        Rule(key="other_command.*", reason="another training command of the script, not imported: --command K "
                                           "imports it", cite="launch"),
        Rule(key="argument_file", means="checked", cite="launch", read=Reader(
            "the arguments file", lambda v: Nothing("its arguments follow; a flag after it overrides its key"))),
        Rule(key="devices", means="node_procs", read=Reader("device ids: their count is the ranks per machine", _devices),
             cite="launch"),
        Rule(key="gpus", means="node_procs", read=Reader("device ids: their count is the ranks per machine", _devices),
             cite="launch"),
        Rule(key="nnodes", means="num_machines", read=Reader("the machines (× the devices, the world size)", _nodes),
             cite="launch"),
        *(Rule(key=name, means="node_procs", cite="launch", read=Reader(
            "the device ids the script exports: without --devices the launcher starts one rank per device", _devices))
          for name in VISIBLE),
        Rule(key="PADDLE_NNODES", means="num_machines", cite="launch",
             read=Reader("the machines the script exports (the launcher's --nnodes)", _nodes)),
        *(Rule(key=key, reason=_LAUNCHER, cite="launch") for key in (
            "master", "rank", "ips", "log_dir", "job_id", "run_mode", "log_level", "nproc_per_node", "host",
            "legacy", "elastic_level", "elastic_timeout", "max_restart")),
    )


def _choice_order() -> Reader:
    def read(value: Any) -> Any:
        if value is None:
            return Nothing("null: the trainer's default")
        if not isinstance(value, str) or value not in ORDERS:
            raise ValueError('expected "pp_first" or "sharding_first" (the trainer asserts it)')
        return value

    return Reader('"pp_first": order dp, pp, sharding, sep, mp; "sharding_first": dp, sharding, pp, sep, mp '
                  "(expert parallelism reorders it; no hybrid degree: Paddle's default order)", read)


def _opt_level() -> Reader:
    def read(value: Any) -> Any:
        level = str(value).strip().upper()
        if level not in ("O0", "O1", "O2"):
            raise ValueError('expected "O0", "O1" or "O2"')
        return level

    return Reader('with bf16 / fp16: "O1" autocast, "O2" pure (weights in that dtype, fp32 masters), "O0" no amp',
                  read)


def _when(describe: str) -> Reader:
    """A HF-style interval strategy ("steps", "epoch" or "no"), as save_strategy and evaluation_strategy take."""
    def read(value: Any) -> Any:
        key = str(value).strip().lower()
        if key not in ("steps", "no", "epoch"):
            raise ValueError('expected "steps", "epoch" or "no"')
        return key

    return Reader(describe, read)


@dataclass(frozen=True, slots=True, kw_only=True)
class Trainer:
    """How one trainer version differs in the rules `paddle_rules` applies.

    Attributes:
        name: the trainer as the report names it ("PaddleNLP").
        expert_order: how `use_expert_parallel` reorders the axes: "pn" (order[1:-1] + [dp, mp]) or "pf" (with
            ep > 1, "moe_sharding" before "sharding", "cp" before it and "ep" before "mp").
        master_grad_needs_amp: amp_master_grad without bf16 / fp16 is refused (PaddleFormers' ConfigConflict);
            else it is silently dropped (PaddleNLP).
        pp_always: fields written whenever pp > 1, whatever the file says (PaddleFormers: delay_scale_loss).
        eval_batch: eval batch must equal train batch under pp (PaddleFormers' ConfigConflict).
        eval_needs_strategy: do_eval with evaluation_strategy "no" is refused (PaddleFormers' ConfigConflict); else
            the trainer warns and evaluates every eval_steps (PaddleNLP).
        granularity_switches: recompute_granularity turns recompute on (PaddleFormers, which has no `recompute`);
            else `recompute` does and the granularity only says how much.
    """

    name: str
    expert_order: str
    master_grad_needs_amp: bool
    pp_always: Mapping[str, Any] = field(default_factory=dict)
    eval_batch: bool = False
    eval_needs_strategy: bool = False
    granularity_switches: bool = False


def sources(base: str, lines: str, **others: str) -> dict[str, str]:
    """A tool's SOURCES: "args" the TrainingArguments file at `base`, each `key first-last` of `lines` that file's
    lines, `others` files relative to the package (with their lines)."""
    args = base + "trainer/training_args.py"
    pairs = lines.split()
    out = {"args": args, **{key: f"{args}#L{span.replace('-', '-L')}" for key, span in zip(pairs[::2], pairs[1::2])}}
    out["launch"] = "https://www.paddlepaddle.org.cn/documentation/docs/en/api/paddle/distributed/launch_en.html"
    return out | {key: base + path for key, path in others.items()}


def degree(*, off: str = "off") -> Reader:
    """A trainer degree: a whole number >= 1, or -1 / 0 for the argument's default (`off` says what that means)."""
    return integer(1, also=(-1, 0), scale=lambda n: n if n > 0 else Nothing(f"{n}: {off}"),
                   describe=f"-1: {off}")


def at_most_one(why: str) -> Reader:
    """A degree that must stay <= 1: what the trainer asserts (expert tensor parallelism) or cannot run (`why`)."""
    def read(value: Any) -> Any:
        n = integer(1, also=(-1, 0)).read(value)
        if n > 1:
            raise ValueError(why)
        return Nothing(f"{n}: off")

    return Reader(f"-1 or 1; above 1 refused: {why}", read)


def granularity() -> Reader:
    def read(value: Any) -> Any:
        if value is None:
            return Nothing("null: not set")
        if not isinstance(value, str) or not value.strip():
            raise ValueError("expected a granularity such as \"full\"")
        return value.strip()

    return Reader('"full": every block; "full_attn", "core_attn", "selective", ...: no counterpart', read)
