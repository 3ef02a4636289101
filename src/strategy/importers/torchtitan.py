"""torchtitan's TOML train configs (`train_configs/*.toml`): its rules, each citing torchtitan's source.

Sources, at the commit the shared fixtures come from: `torchtitan/config/job_config.py` (every key, its default and
meaning), `torchtitan/distributed/parallel_dims.py` (world = dp_replicate · dp_shard · cp · tp · pp, dp_shard -1 the
ranks left, ep borrowed from the data ranks), `torchtitan/models/llama3/infra/parallelize.py` (FSDP2 with
param_dtype = mixed_precision_param, reshard_after_forward "default" = not under pp; the TP plan is sequence parallel:
norms in SequenceParallel), `torchtitan/distributed/pipeline_parallel.py` (micro-batches = local_batch_size /
pipeline_parallel_microbatch_size; multi-stage schedules run 2 stages per rank) and torch.distributed.pipelining's
schedule names (`get_schedule_class`, case-insensitive).
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import Location, StrategyError
from .common import CLIP, OFFLOAD_SWITCH, SELECTIVE, Leaf, NoCounterpart, Nothing, Rule, Tool, choice, integer, text, truth

__all__ = ["TOOL"]

_COMMIT = "238fa9953e4aec2a62582121564273d7cbb1e9f1"
_SRC = f"https://github.com/pytorch/torchtitan/blob/{_COMMIT}/torchtitan/"
SOURCES = {
    "job": _SRC + "config/job_config.py",
    "checkpoint": _SRC + "components/checkpoint.py",
    "dims": _SRC + "distributed/parallel_dims.py",
    "parallelize": _SRC + "models/llama3/infra/parallelize.py",
    "pipeline": _SRC + "distributed/pipeline_parallel.py",
    "schedules": "https://docs.pytorch.org/docs/stable/distributed.pipelining.html#torch.distributed.pipelining"
                 ".schedules.get_schedule_class",
}

_SCHEDULES = {
    "1F1B": "1F1B", "GPipe": "GPipe", "Interleaved1F1B": "Interleaved1F1B",
    "InterleavedZeroBubble": "InterleavedZeroBubble", "ZBVZeroBubble": "ZBVZeroBubble", "DualPipeV": "DualPipeV",
    "LoopedBFS": "LoopedBFS",
    "PipelineScheduleSingle": NoCounterpart("a schedule read from pipeline_parallel_schedule_csv"),
    "PipelineScheduleMulti": NoCounterpart("a schedule read from pipeline_parallel_schedule_csv"),
}
_NOT_HERE = {
    "job": "the job's folders and description", "profiling": "profiling is the training script's (--trace)",
    "metrics": "the rest of logging is parallel.Meter's (metrics_configs: the interval, TensorBoard, the peak FLOP/s)", "model": "the model and its tokenizer are the script's",
    "optimizer": "the optimizer is your torch optimizer", "lr_scheduler": "the schedule is your torch scheduler",
    "checkpoint": "the rest of checkpointing is the Checkpointer's (parallel.Checkpointer)",
    "validation": "validation is the script's",
    "comm": "process-group timeouts are parallel.init(timeout=...)", "memory_estimation": "no memory estimator run",
    "fault_tolerance": "torchft has no counterpart", "experimental": "torchtitan's extension hooks",
    "debug": "seeds and determinism are the script's (torch.manual_seed)",
    "compile": "torch.compile is applied to the model by the script",
    "quantize": "float8 / MX training is not implemented", "float8": "float8 training is not implemented",
}

RULES = (
    Rule(key="training.local_batch_size", means="micro", read=integer(), cite="job"),
    Rule(key="training.global_batch_size", means="global", read=integer(1, also=(-1,)), cite="job"),
    Rule(key="training.max_norm", reason=CLIP,
         cite="job"),
    Rule(key="training.enable_cpu_offload", means="offload", read=OFFLOAD_SWITCH, cite="job"),
    Rule(key="training.dtype", means="amp", cite="job", read=choice({
        "float32": Nothing("float32, the strategy's default"),
        "bfloat16": NoCounterpart("bf16 weights and optimizer state without fp32 masters are not implemented "
                                  "(amp_configs.use_optimizer_fp16)")})),
    Rule(key="training.mixed_precision_param", means="amp", cite="parallelize", read=choice({
        "bfloat16": ("bfloat16", "fsdp"), "float32": Nothing("float32: no mixed precision")},
        describe='"bfloat16": pure bf16 under FSDP (sharding_degree or cp_degree > 1), autocast under plain DDP '
                 'or one device, nothing otherwise; "float32": nothing to set')),
    Rule(key="training.mixed_precision_reduce", cite="job",
         reason="FSDP2 reduces in the dtype its sharding mixed precision picks"),
    Rule(key="training.*", reason="the data, the sequence length and the steps are the training script's", cite="job"),
    Rule(key="parallelism.data_parallel_replicate_degree", means="replicate", read=integer(), cite="dims"),
    Rule(key="parallelism.data_parallel_shard_degree", means="shard", read=integer(1, also=(-1,)), cite="dims"),
    Rule(key="parallelism.fsdp_reshard_after_forward", means="reshard", cite="parallelize",
         read=choice({"default": "default", "always": "always", "never": "never"},
                     describe='"always": stage 3; "never": stage 2; "default": 2 under pp, else 3')),
    Rule(key="parallelism.tensor_parallel_degree", means=("tp", "sequence_parallel"), cite="parallelize",
         read=integer(scale=lambda n: {"tp": n, "sequence_parallel": True} if n > 1 else {"tp": n},
                      describe="and, above 1, mp_configs.sequence_parallel: torchtitan's TP plan is sequence "
                               "parallel (norms in SequenceParallel)")),
    Rule(key="parallelism.disable_loss_parallel", cite="parallelize",
         reason="the loss is the model's: ParallelCrossEntropy computes it on vocab-sharded logits"),
    Rule(key="parallelism.enable_async_tensor_parallel", cite="job",
         reason="torch.compile's micro-pipelined TP has no counterpart (mp_async_allreduce overlaps differently)"),
    Rule(key="parallelism.pipeline_parallel_degree", means="pp", read=integer(), cite="dims"),
    Rule(key="parallelism.pipeline_parallel_schedule", means="schedule", cite="schedules",
         read=choice(_SCHEDULES, describe="torch.distributed.pipelining's name (case-insensitive)")),
    Rule(key="parallelism.pipeline_parallel_microbatch_size", means="pp_micro", read=integer(), cite="pipeline"),
    Rule(key="parallelism.pipeline_parallel_layers_per_stage", means="layers_per_stage", read=integer(),
         cite="pipeline"),
    Rule(key="parallelism.pipeline_parallel_schedule_csv", cite="job",
         reason="a schedule read from a CSV file has no counterpart"),
    Rule(key="parallelism.module_fqns_per_model_part", cite="job",
         reason="how the model is cut into stages is the model's pipeline split, not the strategy"),
    Rule(key="parallelism.pipeline_parallel_*_stage_less_layers", cite="job",
         reason="how the model is cut into stages is the model's pipeline split, not the strategy"),
    Rule(key="parallelism.pipeline_parallel_expert_parallel_overlap", cite="job",
         reason="DualPipeV's expert-parallel overlap has no counterpart"),
    Rule(key="parallelism.context_parallel_degree", means="cp", read=integer(), cite="dims"),
    Rule(key="parallelism.context_parallel_*", reason="ring attention's load balancer and rotation are the cp "
                                                     "runtime's own", cite="job"),
    Rule(key="parallelism.expert_parallel_degree", means="ep", read=integer(), cite="dims"),
    Rule(key="parallelism.expert_tensor_parallel_degree", means="etp", read=integer(), cite="dims"),
    Rule(key="parallelism.expert_parallel_comm_backend", reason="DeepEP kernels have no counterpart", cite="job"),
    Rule(key="activation_checkpoint.mode", means="recompute", cite="job", read=choice({
        "full": True, "none": False, "selective": NoCounterpart(SELECTIVE),
        "memory_budget": NoCounterpart("the compiler's memory-budget recomputation has no counterpart")})),
    Rule(key="activation_checkpoint.*", reason="options of torchtitan's selective or budgeted checkpointing",
         cite="job"),
    Rule(key="checkpoint.enable", means="ckpt_enable", read=truth(True, False), cite="checkpoint"),
    Rule(key="checkpoint.folder", means="ckpt_dir", cite="checkpoint",
         read=text(describe="the directory (torchtitan keeps it under job.dump_folder; here it is relative to the "
                            "working directory, or to the example scripts' --out)")),
    Rule(key="checkpoint.interval", means="ckpt_every", read=integer(), cite="checkpoint"),
    Rule(key="checkpoint.keep_latest_k", means="ckpt_keep", read=integer(0), cite="checkpoint"),
    Rule(key="checkpoint.async_mode", means="ckpt_async", cite="checkpoint", read=choice({
        "disabled": False, "async": True,
        "async_with_pinned_mem": True}, describe='"async" and "async_with_pinned_mem": background saves (DCP '
                                                  'async_save); "disabled": foreground')),
    Rule(key="metrics.log_freq", means="log_interval", read=integer(), cite="job"),
    Rule(key="metrics.enable_tensorboard", means="tensorboard", read=truth(True, False), cite="job"),
    *(Rule(key=f"{section}.*", reason=why, cite="job") for section, why in _NOT_HERE.items()),
)

DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("parallelism.data_parallel_shard_degree", -1),
    ("parallelism.fsdp_reshard_after_forward", "default"),
    ("training.mixed_precision_param", "bfloat16"),
    ("parallelism.pipeline_parallel_schedule", "1F1B"),
    ("parallelism.pipeline_parallel_microbatch_size", 1),
    ("training.local_batch_size", 8),
)

_TABLE = re.compile(r"\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*=")


def _parts(dotted: str) -> list[str]:
    return [p.strip().strip("\"'") for p in re.findall(r"\"[^\"]*\"|'[^']*'|[^.]+", dotted)]


def _positions(text: str, source: str) -> dict[str, Location]:
    """Where each `key = value` sits, by dotted key (a reader's approximation: tables and dotted keys)."""
    where: dict[str, Location] = {}
    table: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if m := _TABLE.match(line):
            table = _parts(m.group(1))
        elif m := _KEY.match(line):
            column = len(line) - len(line.lstrip()) + 1
            where.setdefault(".".join(table + _parts(m.group(1))), Location(source, number, column))
    return where


def _walk(value: dict[str, Any], prefix: str, where: dict[str, Location], source: str) -> list[Leaf]:
    leaves = []
    for key, item in value.items():
        dotted = f"{prefix}.{key}" if prefix else key
        if isinstance(item, dict) and item:
            leaves += _walk(item, dotted, where, source)
        else:
            leaves.append(Leaf(dotted, item, where.get(dotted, Location(source))))
    return leaves


def _leaves(text: str, source: str) -> list[Leaf]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise StrategyError("reading TOML needs Python 3.11 or the tomli package", source=source) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(e)) or "invalid TOML"
        raise StrategyError(f"invalid TOML: {message}", source=source, line=int(m.group(1)) if m else None,
                            column=int(m.group(2)) if m else None) from None
    return _walk(data, "", _positions(text, source), source)


TOOL = Tool(kind="torchtitan", name="torchtitan", sources=SOURCES, rules=RULES, leaves=_leaves, defaults=DEFAULTS,
            fsdp_by_default=True, fsdp_spans_cp=True)  # parallelize.py: FSDP2 over the dp_shard × cp mesh
