"""Megatron-LM launcher scripts (`pretrain_gpt.sh` and the like): the flags' rules, each citing Megatron's source.

Sources, at the commit the shared fixtures come from: `megatron/training/arguments.py` (every flag; world = tp · pp ·
cp · dp; the global batch defaults to micro × dp; `--recompute-activations` is selective recomputation; sequence
parallelism is turned off at tp 1), `megatron/core/model_parallel_config.py` (the parallel degrees, expert parallelism
carved out of the data ranks), `megatron/core/num_microbatches_calculator.py` (micro-batches per step = global /
(micro × dp)), `megatron/core/optimizer/__init__.py` (the fp16 loss scaler: 2^32 to start, ×2 after
--loss-scale-window clean steps, ÷2 on overflow once --hysteresis is spent), the distributed optimizer guide
https://docs.nvidia.com/megatron-core/developer-guide/latest/api-guide/dist_optimizer.html (ZeRO-1 over dp) and
torchrun's options (the script's world size is its --nproc_per_node × --nnodes). The script is read, not run (see
`launcher`): every branch counts, and a flag given twice keeps its last value.
"""

from __future__ import annotations

from collections.abc import Callable

from .common import (CLIP, SCALE_FLOOR, SELECTIVE, Leaf, NoCounterpart, Reader, Rule, Tool, choice, const, integer,
                     number, text)
from .launcher import flags

__all__ = ["TOOL"]

_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
_SRC = f"https://github.com/NVIDIA/Megatron-LM/blob/{_COMMIT}/megatron/"
SOURCES = {
    "args": _SRC + "training/arguments.py",
    "parallel": _SRC + "core/model_parallel_config.py",
    "microbatches": _SRC + "core/num_microbatches_calculator.py",
    "scaler": _SRC + "core/optimizer/__init__.py",
    "distopt": "https://docs.nvidia.com/megatron-core/developer-guide/latest/api-guide/dist_optimizer.html",
    "torchrun": "https://docs.pytorch.org/docs/stable/elastic/run.html",
    "nsys": "https://docs.nvidia.com/nsight-systems/UserGuide/index.html#cli-profile-command-switch-options",
}

_MODEL = "the model's architecture, built by the model's code"
_TRAINING = "the training loop's (data, schedule, logging, checkpoints)"
_TUNING = "communication and kernel tuning with no counterpart (the runtime overlaps on its own)"
_SPLIT = "how the layers are cut into stages is the model's pipeline split, not the strategy"

def _launched(at_launch: Callable[[str], bool], words: str) -> Reader:
    """A torchrun count: a whole number, or a word torchrun resolves only at launch (`at_launch`), which has no
    counterpart here (--world-size says it)."""
    whole = integer()

    def read(value: object) -> object:
        if isinstance(value, str) and at_launch(value.strip().lower()):
            return NoCounterpart("torchrun decides it at launch; --world-size gives the world size here")
        return whole.read(value)

    return Reader(f"a whole number; {words} (no counterpart)", read)


RULES = (
    Rule(key="tensor-model-parallel-size", means="tp", read=integer(), cite="parallel"),
    Rule(key="pipeline-model-parallel-size", means="pp", read=integer(), cite="parallel"),
    Rule(key="context-parallel-size", means="cp", read=integer(), cite="parallel"),
    Rule(key="expert-model-parallel-size", means="ep", read=integer(), cite="parallel"),
    Rule(key="expert-tensor-parallel-size", means="etp", read=integer(), cite="parallel"),
    Rule(key="model-parallel-size", reason="Megatron's old spelling, refused by arguments.py: use "
                                           "--tensor-model-parallel-size", cite="args"),
    Rule(key="num-layers-per-virtual-pipeline-stage", means="layers_per_virtual", read=integer(), cite="args"),
    Rule(key="num-virtual-stages-per-pipeline-rank", means="virtual", read=integer(), cite="args"),
    Rule(key="virtual-pipeline-model-parallel-size", means="virtual", read=integer(), cite="parallel"),
    Rule(key="num-layers", means="num_layers", read=integer(), cite="args"),
    Rule(key="sequence-parallel", means="sequence_parallel", read=const(True), cite="args"),
    Rule(key="use-distributed-optimizer", means="zero_stage", read=const(1, describe="stage 1"), cite="distopt",
         reason="Megatron's distributed optimizer shards the optimizer state over the data ranks: ZeRO stage 1"),
    Rule(key="use-torch-fsdp2", means="data_mode", read=const("shard", describe="sharded, stage 3"), cite="args"),
    Rule(key="use-megatron-fsdp", means="data_mode", read=const("shard", describe="sharded"), cite="args"),
    Rule(key="use-custom-fsdp", means="data_mode", read=const("shard", describe="sharded"), cite="args"),
    Rule(key="data-parallel-sharding-strategy", means="fsdp_stage", cite="args", read=choice(
        {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3})),
    Rule(key="micro-batch-size", means="micro", read=integer(), cite="microbatches"),
    Rule(key="global-batch-size", means="global", read=integer(), cite="microbatches"),
    Rule(key="rampup-batch-size", cite="microbatches",
         reason="batch-size ramp-up has no counterpart; the accumulation comes from --global-batch-size"),
    Rule(key="step-batch-size-schedule", cite="args",
         reason="a batch-size schedule has no counterpart; the accumulation comes from --global-batch-size"),
    Rule(key="bf16", means="amp", read=const(("bfloat16", "pure"), describe="bf16 weights, fp32 masters"),
         cite="args"),
    Rule(key="fp16", means="amp", read=const(("float16", "pure"), describe="fp16 weights, fp32 masters, Megatron's "
                                                                         "loss scaler"), cite="args"),
    Rule(key="loss-scale", means="static_scale", read=number(), cite="args"),
    Rule(key="initial-loss-scale", means="init_scale", read=number(), cite="args"),
    Rule(key="loss-scale-window", means="scale_window", read=integer(), cite="args"),
    Rule(key="hysteresis", means="hysteresis", read=integer(), cite="args"),
    Rule(key="min-loss-scale", reason=SCALE_FLOOR,
         cite="args"),
    Rule(key="log-interval", means="log_interval", read=integer(), cite="args"),
    Rule(key="timing-log-level", means="timers", cite="args",
         read=integer(0, scale=lambda n: n > 0, describe="0: the run's time only; 1, 2: each phase's too")),
    Rule(key="tensorboard-dir", means="tensorboard", read=const(True, describe="TensorBoard events (their folder is "
                                                                                "metrics_configs.dir's)"), cite="args"),
    Rule(key="save", means="ckpt_dir", read=text(describe="the directory checkpoints are saved into"), cite="args"),
    Rule(key="save-interval", means="ckpt_every", read=integer(), cite="args"),
    Rule(key="async-save", means="ckpt_async", read=const(True, describe="background saves (DCP async_save)"),
         cite="args"),
    Rule(key="recompute-granularity", means="recompute", cite="args",
         read=choice({"full": True, "selective": NoCounterpart(SELECTIVE)})),
    Rule(key="recompute-activations", reason=SELECTIVE + " (Megatron reads this flag as --recompute-granularity "
                                                          "selective)", cite="args"),
    Rule(key="recompute-method", cite="args", reason="recompute recomputes every block; Megatron's uniform / block "
                                                     "methods group or limit the layers"),
    Rule(key="recompute-num-layers", cite="args", reason="recompute recomputes every block; Megatron's uniform / block "
                                                         "methods group or limit the layers"),
    Rule(key="recompute-modules", reason=SELECTIVE, cite="args"),
    Rule(key="clip-grad", reason=CLIP,
         cite="args"),
    Rule(key="fp8*", reason="fp8 training (Transformer Engine) is not implemented", cite="args"),
    Rule(key="fp4*", reason="fp4 training (Transformer Engine) is not implemented", cite="args"),
    Rule(key="first-last-layers-bf16", reason="fp8 training (Transformer Engine) is not implemented", cite="args"),
    *(Rule(key=key, reason="precision tuning of Megatron's own kernels and buffers has no counterpart", cite="args")
      for key in ("grad-reduce-in-bf16", "accumulate-allreduce-grads-in-fp32", "attention-softmax-in-fp32",
                  "fp16-lm-cross-entropy", "main-grads-dtype", "main-params-dtype", "exp-avg-dtype",
                  "exp-avg-sq-dtype", "use-precision-aware-optimizer", "output-logit-dtype")),
    *(Rule(key=key, reason=_SPLIT, cite="args") for key in (
        "pipeline-model-parallel-layout", "decoder-first-pipeline-num-layers", "decoder-last-pipeline-num-layers",
        "account-for-*-in-pipeline-split", "microbatch-group-size-per-virtual-pipeline-stage")),
    *(Rule(key=key, reason=_TUNING, cite="args") for key in (
        "overlap-grad-reduce", "overlap-param-gather*", "no-overlap-p2p-communication", "overlap-p2p-communication",
        "no-align-*", "align-*", "ddp-*", "tp-comm-*", "defer-embedding-wgrad-compute", "delay-wgrad-compute",
        "overlap-moe-expert-parallel-comm", "use-nccl-ub", "nccl-*", "cp-comm-type", "hierarchical-context-parallel-*",
        "outer-dp-sharding-strategy", "num-distributed-optimizer-instances", "gradient-accumulation-fusion",
        "no-gradient-accumulation-fusion", "cross-entropy-*", "*-fusion", "no-*-fusion", "create-all-gather-group",
        "distributed-backend", "distributed-timeout-minutes", "use-flash-attn", "attention-backend",
        "use-distributed-optimizer-*", "no-gradient-reduce-div-fusion", "data-parallel-random-init",
        "empty-unused-memory-level", "manual-gc*", "cuda-graph*", "enable-cuda-graph", "external-cuda-graph",
        "deterministic-mode", "fsdp-*", "init-model-with-meta-device")),
    *(Rule(key=key, reason=_MODEL, cite="args") for key in (
        "num-attention-heads", "hidden-size", "ffn-hidden-size", "kv-channels", "seq-length", "decoder-seq-length",
        "encoder-seq-length", "max-position-embeddings", "position-embedding-type", "rotary-*", "no-rope-fusion",
        "swiglu", "squared-relu", "normalization", "norm-epsilon", "layernorm-epsilon", "group-query-attention",
        "num-query-groups", "untie-embeddings-and-output-weights", "disable-bias-linear", "add-bias-linear",
        "add-qkv-bias", "apply-layernorm-1p", "apply-residual-connection-post-layernorm", "init-method-*",
        "attention-dropout", "hidden-dropout", "use-mcore-models", "use-legacy-models", "transformer-impl", "spec",
        "no-masked-softmax-fusion", "no-bias-*", "no-position-embedding", "moe-*", "num-experts", "expert-*",
        "multi-latent-attention", "q-lora-rank", "kv-lora-rank", "qk-*", "v-head-dim", "mtp-*", "vocab-size",
        "make-vocab-size-divisible-by", "hybrid-*", "mamba-*", "heterogeneous-layers-config-path", "qk-layernorm",
        "num-layers-at-*", "encoder-num-layers", "decoder-num-layers", "window-size", "softmax-scale",
        "use-rotary-position-embeddings", "no-persist-layer-norm", "openai-gelu", "onnx-safe", "bert-no-binary-head",
        "freeze-*", "attention-softmax-*")),
    *(Rule(key=key, reason=_TRAINING, cite="args") for key in (
        "train-iters", "train-samples", "exit-*", "eval-*", "log-*", "save", "save-*", "load", "load-*", "ckpt-*",
        "tensorboard-*", "wandb-*", "profile", "profile-*", "no-load-*", "no-save-*", "finetune", "seed",
        "data-*", "split", "tokenizer-*", "mock-data", "num-workers", "no-mmap-bin-files", "vocab-file", "merge-file",
        "no-create-attention-mask-in-dataloader", "tiktoken-*", "calculate-per-token-loss", "timing-log-*",
        "lr", "lr-*", "min-lr", "decoupled-*", "weight-decay", "weight-decay-*", "start-weight-decay",
        "end-weight-decay", "adam-*", "sgd-momentum", "optimizer", "optimizer-*", "use-checkpoint-*", "async-save",
        "dist-ckpt-*", "auto-detect-ckpt-format", "use-dist-ckpt", "skip-train", "test-*", "valid-*", "train-data-*",
        "reset-*", "eod-mask-loss", "dataloader-type", "record-memory-history", "memory-snapshot-path", "straggler-*",
        "no-check-*", "override-opt_param-scheduler", "use-checkpoint-opt_param-scheduler", "full-validation",
        "object-storage-cache-path", "per-split-data-args-path", "no-shared-storage", "rerun-mode",
        "check-for-nan-in-loss-and-grad", "check-for-*", "log", "wandb", "logging-*")),
    *(Rule(key=key, reason="nsys profile's (the profiler the script runs under)", cite="nsys") for key in (
        "sample", "cpuctxsw", "trace", "trace-fork-before-exec", "capture-range", "capture-range-end",
        "cuda-graph-trace", "cuda-memory-usage", "cudabacktrace", "python-sampling*", "gpu-metrics-*", "nic-metrics",
        "force-overwrite", "stats", "export", "delay", "duration", "kill", "wait")),
    Rule(key="nproc?per?node", means="node_procs", cite="torchrun", read=_launched(
        lambda word: word in ("auto", "gpu", "cpu", "xpu"), '"auto", "gpu", "cpu", "xpu": counted at launch')),
    Rule(key="nnodes", means="num_machines", cite="torchrun", read=_launched(
        lambda word: ":" in word, "MIN:MAX: an elastic range, known at launch")),
    *(Rule(key=key, reason="torchrun's: where the processes start and meet", cite="torchrun") for key in (
        "node?rank", "master?addr", "master?port", "rdzv?*", "standalone", "max?restarts", "monitor?interval",
        "redirects", "tee", "log?dir", "role", "local?addr")),
)

_BARE = frozenset(r.key for r in RULES if r.read is not None and r.read.bare)  # flags that take no value


def _leaves(text: str, source: str) -> list[Leaf]:
    return [Leaf(f.name, f.value, f.where) for f in flags(text, source, bare=_BARE.__contains__)]


TOOL = Tool(
    kind="megatron", name="Megatron-LM", sources=SOURCES, rules=RULES, leaves=_leaves,
    scaler={"init_loss_scaling": 4294967296.0, "incr_every_n_steps": 1000, "decr_every_n_nan_or_inf": 2,
            "incr_ratio": 2.0, "decr_ratio": 0.5},
    sequence_parallel_at_tp1="Megatron itself turns sequence parallelism off at tp 1",
)
