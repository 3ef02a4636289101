"""Fine-tune a Hugging Face causal LM with tensor parallelism from a strategy file: bring your own model.

    torchrun --standalone --nproc-per-node 2 examples/finetune_hf.py \
        --strategy examples/strategies/mp2_all_flags.prototxt --steps 100 --out out/finetune

Without --model it builds a small model from a config (--model-type: Llama, Qwen2 or Qwen3 with tied embeddings, or a
Mixture of Experts; random init, nothing is downloaded); with --model DIR it loads a local checkpoint directory
(save_pretrained output; a directory holding only config.json gives that model with random weights) and its tokenizer
when it has one that encodes text (UTF-8 bytes otherwise).
`parallel.parallelize` applies the strategy's plan, or the model's own Hugging Face plan, with every mp flag,
and the strategy's recompute; the loop follows its amp (autocast, loss scaling) and gradient merge, and clips at 1.0.
Writes the same outputs as train_gpt.py: the strategy as it ran, loss.png and summary.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import time
from typing import Callable
from pathlib import Path

import torch

import parallel
import strategy
from parallel.tune.models import MODEL_TYPES, small_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_gpt import (PEER_FAILURES, announce_resume, checkpoint_settings, corpus, effective_strategy, global_mean,  # noqa: E402
                       report_peer_failure, start, write_outputs)  # (the same data, messages and outputs)


WEIGHT_FILES = ("*.safetensors", "*.safetensors.index.json", "pytorch_model*.bin", "pytorch_model.bin.index.json")


def build_model(model_dir: Path | None, seq_len: int, model_type: str = "llama", *,
                report: Callable[[str], None] | None = None):
    """A small model of `model_type` from a config (MODEL_TYPES; the Mixture-of-Experts "qwen3_moe" and "mixtral" have 8
    experts, top-2), or the model in `model_dir`: its weights, or a random init from its config.json when it holds
    none; and a function from text to token ids: the directory's tokenizer when it encodes text into the model's
    vocabulary, UTF-8 bytes folded into the vocabulary otherwise. `report` hears which of each was taken."""
    import transformers

    say = report or (lambda line: None)
    if model_dir is None:
        config = small_config(model_type, seq_len)
        torch.manual_seed(0)
        return transformers.AutoModelForCausalLM.from_config(config), lambda text: torch.tensor(list(text.encode("utf-8")))
    if any(next(model_dir.glob(pattern), None) for pattern in WEIGHT_FILES):
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    else:
        config = transformers.AutoConfig.from_pretrained(model_dir)
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        say(f"model: {model_dir} holds no weights, only its config: {type(model).__name__} with random weights")
    encode, why = _tokenizer(model_dir, model.config.vocab_size)
    say(f"tokenizer: {why}")
    return model, encode


def _tokenizer(model_dir: Path, vocab: int) -> tuple[Callable[[str], torch.Tensor], str]:
    """The directory's tokenizer if it turns a sample of the corpus into ids below `vocab` (some load from a directory
    without tokenizer files and encode everything to nothing: Qwen2's), else bytes folded into the vocabulary."""
    import transformers

    def as_bytes(text: str) -> torch.Tensor:
        return torch.tensor(list(text.encode("utf-8"))) % vocab

    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    except (OSError, ValueError, TypeError) as e:  # no tokenizer files, or a class that needs them
        return as_bytes, f"UTF-8 bytes ({model_dir} has no tokenizer: {type(e).__name__})"
    sample = corpus_text()[:4096]
    ids = tokenizer(sample)["input_ids"]
    if len(ids) * 32 < len(sample):  # a real tokenizer makes about one id per 4 characters of English
        return as_bytes, (f"UTF-8 bytes ({model_dir}'s {type(tokenizer).__name__} has {len(tokenizer)} tokens and "
                          f"encodes {len(sample)} characters into {len(ids)} ids: no vocabulary files)")
    if max(ids) >= vocab:
        return as_bytes, (f"UTF-8 bytes ({model_dir}'s {type(tokenizer).__name__} makes ids up to {max(ids)}, beyond the "
                          f"model's vocab_size {vocab})")
    return (lambda text: torch.tensor(tokenizer(text)["input_ids"])), \
        f"{model_dir}'s {type(tokenizer).__name__} ({len(tokenizer):,} tokens)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--strategy", required=True, help="strategy file (prototxt, JSON, YAML or binary)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="a.b.c=V", help="override a field")
    p.add_argument("--model", type=Path, help="a local Hugging Face checkpoint directory (default: a small model)")
    p.add_argument("--model-type", choices=tuple(MODEL_TYPES), default="llama",
                   help="the small model built from a config without --model (qwen2, qwen3: the LM head tied to the "
                        "embedding; qwen3_moe, mixtral: 8 experts, top-2)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=8, help="sequences per step, across all data-parallel replicas")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--out", type=Path, default=Path("out/finetune"))
    p.add_argument("--traceback", action="store_true",
                   help="when a peer rank fails, print the whole traceback rather than one line")
    args = p.parse_args(argv)
    started = start(args)
    if started is None:
        return 1
    s, hcg = started
    lead = hcg.rank == 0
    model, encode = build_model(args.model, args.seq_len, args.model_type, report=print if lead else None)
    try:
        model = parallel.parallelize(model)  # with pp_degree > 1: this rank's pipeline stages of it
    except strategy.StrategyError as e:
        print(e, file=sys.stderr)
        return 1
    whole = model.module if hcg.pp_size > 1 else model  # the (pruned) Hugging Face model itself
    parallel.cast_for_amp(whole)  # bf16/fp16 weights under amp_configs.use_pure_*, with fp32 masters in the optimizer
    if hcg.resolved.mp.fused_linear_param_grad_add:
        parallel.add_main_grad(whole)
    # Clipped at 1.0 inside step() (Paddle's grad_clip), so a pipeline's train_batch clips too.
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0),
                                           max_grad_norm=1.0)
    if lead:
        print(strategy.explain(s, world_size=hcg.world_size), flush=True)
    data = encode(corpus_text())
    if data.numel() <= args.seq_len + 1:
        print(f"the corpus encodes into {data.numel()} tokens, too few for --seq-len {args.seq_len}", file=sys.stderr)
        return 1
    saving = checkpoint_settings(hcg.resolved.checkpoint, args.out)
    try:
        summary = train(model, opt, data, args, hcg, progress=lead, checkpoints=saving,
                        metrics_dir=args.out / hcg.resolved.metrics.dir)
    except ValueError as e:  # a checkpoint that is not one, or does not fit
        print(e, file=sys.stderr)
        return 1
    except PEER_FAILURES as e:
        if args.traceback:
            raise
        return report_peer_failure(e, hcg)
    if lead:
        summary["config"] = model.config.to_dict() | {"seq_len": args.seq_len, "batch_size": args.batch_size}
        write_outputs(args.out, summary, effective_strategy(s, hcg.resolved), title="finetune_hf",
                      metrics_dir=args.out / hcg.resolved.metrics.dir)
        if summary["metrics"]:
            print(parallel.metrics.line(summary["metrics"]))
        if not summary["losses"]:
            print(f"nothing to train: {summary['resumed_from']} is at step {args.steps} already")
        else:
            print(f"loss {summary['first_loss']:.3f} -> {summary['final_loss']:.3f} in steps {summary['first_step'] + 1}-"
                  f"{args.steps}, {summary['tokens_per_second']:,.0f} tokens/s; wrote {args.out}/; checkpoints: "
                  f"{saving.dir}")
    parallel.destroy()
    return 0


@functools.cache
def corpus_text() -> str:
    """The corpus as text (read once: the tokenizer check samples it, then the run encodes it)."""
    return bytes(corpus().tolist()).decode("utf-8")


def train(model, opt, data: torch.Tensor, args, hcg: parallel.HybridGroup, *, progress: bool,
          checkpoints: strategy.CheckpointSettings | None = None, metrics_dir: Path | None = None) -> dict:
    """AdamW on random windows of the corpus; each dp replica its share, the mp group one batch (broadcast).

    `checkpoints` (default: the strategy's checkpoint_configs) as in train_gpt.py: a restarted run continues from the
    newest complete checkpoint; step k reads the windows seeded by k, so the step is the data position. A
    `parallel.Meter` times every step and logs at the strategy's metrics_configs.log_interval (into `metrics_dir`)."""
    from tqdm import tqdm

    ckpt = parallel.Checkpointer(hcg, settings=checkpoints)
    first = ckpt.start(model, opt)
    if progress:
        announce_resume(ckpt, first)
    per_replica = args.batch_size // hcg.data_size
    losses: list[float] = []
    bar = tqdm(total=args.steps - first, desc="finetune", unit="step", dynamic_ncols=True) if progress else None
    phases = ("data", "pipeline") if hcg.pp_size > 1 else parallel.metrics.PHASES  # a pipeline's step is one call
    meter = parallel.Meter(hcg, model, tokens_per_step=args.batch_size * args.seq_len, seq_len=args.seq_len,
                           out=metrics_dir, phases=phases, optimizer=opt, echo=bar.write if bar else print,
                           prediction=_predicted(model, hcg, args.seq_len, per_replica))
    start = time.perf_counter()
    model.train()
    try:
        for step in range(first, args.steps):
            with meter.step(step + 1):
                with meter.phase("data"):
                    gen = torch.Generator().manual_seed(step)
                    starts = torch.randint(0, data.numel() - args.seq_len - 1, (args.batch_size,), generator=gen)
                    mine = starts[hcg.data_rank * per_replica: (hcg.data_rank + 1) * per_replica]
                    ids = torch.stack([data[i: i + args.seq_len] for i in mine.tolist()])
                if hcg.pp_size > 1:  # the schedule over pipeline_configs.accumulate_steps micro-batches, then one step
                    with meter.phase("pipeline"), parallel.autocast():
                        loss = torch.tensor(model.train_batch((ids, ids), opt))
                else:
                    # This rank's share of every row (its sep chunk, or its two cp chunks), targets shifted before the
                    # cut (the whole rows at sep_degree and cp_degree 1).
                    with meter.phase("data"):
                        piece = parallel.split_sequence({"input_ids": ids}, hcg=hcg)
                    with meter.phase("forward"), parallel.autocast():  # the strategy's amp
                        loss = model(**piece).loss  # this rank's share; the forward broadcasts ids from mp rank 0
                    with meter.phase("backward"):
                        opt.scale(loss).backward()
                    with meter.phase("optimizer"):
                        opt.step()  # clips at 1.0 first
                        opt.zero_grad()
                losses.append(global_mean(loss, hcg))
                meter.loss(losses[-1])
            if bar:
                done = step + 1 - first
                bar.set_postfix(loss=f"{losses[-1]:.3f}", tok_s=f"{args.batch_size * args.seq_len * done / (time.perf_counter() - start):,.0f}")
                bar.update()
            if ckpt.step(step + 1) is None and step + 1 == args.steps and ckpt.dir is not None \
                    and not opt.pending_micro_steps:
                ckpt.save(step + 1)  # the last step, unless it ends inside a gradient merge
    finally:  # closed on a failure too: a message after it starts on a line of its own
        meter.close()
        if bar:
            bar.close()
    ckpt.close()
    elapsed = time.perf_counter() - start
    return {"steps": args.steps, "first_step": first,
            "resumed_from": str(ckpt.resumed_from) if ckpt.resumed_from else None,
            "first_loss": losses[0] if losses else None, "final_loss": losses[-1] if losses else None, "losses": losses,
            "seconds": elapsed, "tokens_per_second": args.batch_size * args.seq_len * len(losses) / elapsed,
            "world_size": hcg.world_size, "effective_mp": dataclasses.asdict(hcg.resolved.mp), "metrics": meter.last}


def _predicted(model, hcg: parallel.HybridGroup, seq_len: int, per_replica: int) -> dict[str, float]:
    """The memory model's bytes per rank for this run (`strategy.estimate_memory`: weights, gradients, AdamW state and
    the activations a micro-batch keeps), logged beside the measured peak; {} for a model it cannot count. On a GPU
    the peak is the allocator's; on a CPU the whole process's resident set, interpreter and libraries included."""
    micro = hcg.resolved.pipeline.micro_batch_size if hcg.pp_size > 1 else per_replica
    try:
        estimate = strategy.estimate_memory(model.config.to_dict(), hcg.resolved, seq_len=seq_len, micro_batch_size=micro)
    except ValueError:
        return {}
    return {"memory_bytes": float(estimate.total)}


if __name__ == "__main__":
    sys.exit(main())
