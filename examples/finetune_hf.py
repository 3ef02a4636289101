"""Fine-tune a Hugging Face causal LM with tensor parallelism from a strategy file: bring your own model.

    torchrun --standalone --nproc-per-node 2 examples/finetune_hf.py \
        --strategy examples/strategies/mp2_all_flags.prototxt --steps 100 --out out/finetune

Without --model it builds a small Llama from a config (random init; nothing is downloaded); with
--model DIR it loads a local checkpoint directory (save_pretrained output) and its tokenizer if it has one.
`parallel.parallelize` applies the strategy's plan, or the model's own Hugging Face plan, with every mp flag,
and the strategy's recompute; the loop follows its amp (autocast, loss scaling) and gradient merge, and clips at 1.0.
Writes the same outputs as train_gpt.py: the strategy as it ran, loss.png and summary.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from typing import Any
from pathlib import Path

import torch

import parallel
import strategy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_gpt import checkpoint_settings, corpus, effective_strategy, global_mean, start, write_outputs  # noqa: E402  (the same data and outputs)


def build_model(model_dir: Path | None, seq_len: int, model_type: str = "llama"):
    """A small model of `model_type` from a config ("llama"; the Mixture-of-Experts "qwen3_moe" and "mixtral", 8
    experts, top-2), or the checkpoint in `model_dir`; and a function from text to token ids."""
    import transformers

    if model_dir is not None:
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
            return model, lambda text: torch.tensor(tokenizer(text)["input_ids"])
        except (OSError, ValueError):  # no tokenizer saved: bytes, folded into the vocabulary
            vocab = model.config.vocab_size
            return model, lambda text: torch.tensor(list(text.encode("utf-8"))) % vocab
    common = dict(vocab_size=256, hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                  max_position_embeddings=seq_len, tie_word_embeddings=False)
    moe = dict(num_experts_per_tok=2, output_router_logits=True, router_aux_loss_coef=0.01)
    if model_type == "qwen3_moe":
        config: Any = transformers.Qwen3MoeConfig(num_experts=8, moe_intermediate_size=128, **moe, **common)
    elif model_type == "mixtral":
        config = transformers.MixtralConfig(num_local_experts=8, intermediate_size=128, **moe, **common)
    else:
        config = transformers.LlamaConfig(intermediate_size=688, **common)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    return model, lambda text: torch.tensor(list(text.encode("utf-8")))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--strategy", required=True, help="strategy file (prototxt, JSON, YAML or binary)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="a.b.c=V", help="override a field")
    p.add_argument("--model", type=Path, help="a local Hugging Face checkpoint directory (default: a small model)")
    p.add_argument("--model-type", choices=("llama", "qwen3_moe", "mixtral"), default="llama",
                   help="the small model built from a config without --model (qwen3_moe, mixtral: 8 experts, top-2)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=8, help="sequences per step, across all data-parallel replicas")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--out", type=Path, default=Path("out/finetune"))
    args = p.parse_args(argv)
    started = start(args)
    if started is None:
        return 1
    s, hcg = started
    model, encode = build_model(args.model, args.seq_len, args.model_type)
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
    lead = hcg.rank == 0
    if lead:
        print(strategy.explain(s, world_size=hcg.world_size), flush=True)
    data = encode(corpus_text())
    saving = checkpoint_settings(hcg.resolved.checkpoint, args.out)
    try:
        summary = train(model, opt, data, args, hcg, progress=lead, checkpoints=saving)
    except ValueError as e:  # a checkpoint that is not one, or does not fit
        print(e, file=sys.stderr)
        return 1
    if lead:
        summary["config"] = model.config.to_dict() | {"seq_len": args.seq_len, "batch_size": args.batch_size}
        write_outputs(args.out, summary, effective_strategy(s, hcg.resolved), title="finetune_hf")
        if not summary["losses"]:
            print(f"nothing to train: {summary['resumed_from']} is at step {args.steps} already")
        else:
            print(f"loss {summary['first_loss']:.3f} -> {summary['final_loss']:.3f} in steps {summary['first_step'] + 1}-"
                  f"{args.steps}, {summary['tokens_per_second']:,.0f} tokens/s; wrote {args.out}/; checkpoints: "
                  f"{saving.dir}")
    parallel.destroy()
    return 0


def corpus_text() -> str:
    return bytes(corpus().tolist()).decode("utf-8")


def train(model, opt, data: torch.Tensor, args, hcg: parallel.HybridGroup, *, progress: bool,
          checkpoints: strategy.CheckpointSettings | None = None) -> dict:
    """AdamW on random windows of the corpus; each dp replica its share, the mp group one batch (broadcast).

    `checkpoints` (default: the strategy's checkpoint_configs) as in train_gpt.py: a restarted run continues from the
    newest complete checkpoint; step k reads the windows seeded by k, so the step is the data position."""
    from tqdm import tqdm

    ckpt = parallel.Checkpointer(hcg, settings=checkpoints)
    first = ckpt.start(model, opt)
    per_replica = args.batch_size // hcg.data_size
    losses: list[float] = []
    bar = tqdm(total=args.steps - first, desc="finetune", unit="step", dynamic_ncols=True) if progress else None
    start = time.perf_counter()
    model.train()
    for step in range(first, args.steps):
        gen = torch.Generator().manual_seed(step)
        starts = torch.randint(0, data.numel() - args.seq_len - 1, (args.batch_size,), generator=gen)
        mine = starts[hcg.data_rank * per_replica: (hcg.data_rank + 1) * per_replica]
        ids = torch.stack([data[i: i + args.seq_len] for i in mine.tolist()])
        if hcg.pp_size > 1:  # the schedule over pipeline_configs.accumulate_steps micro-batches, then one step
            with parallel.autocast():
                loss = torch.tensor(model.train_batch((ids, ids), opt))
        else:
            # This rank's share of every row (its sep chunk, or its two cp chunks), targets shifted before the cut (the
            # whole rows at sep_degree and cp_degree 1).
            piece = parallel.split_sequence({"input_ids": ids}, hcg=hcg)
            with parallel.autocast():  # the strategy's amp
                loss = model(**piece).loss  # this rank's share; the forward broadcasts ids from mp rank 0 if asked
            opt.scale(loss).backward()
            opt.step()  # clips at 1.0 first
            opt.zero_grad()
        losses.append(global_mean(loss, hcg))
        if bar:
            done = step + 1 - first
            bar.set_postfix(loss=f"{losses[-1]:.3f}", tok_s=f"{args.batch_size * args.seq_len * done / (time.perf_counter() - start):,.0f}")
            bar.update()
        if ckpt.step(step + 1) is None and step + 1 == args.steps and ckpt.dir is not None \
                and not opt.pending_micro_steps:
            ckpt.save(step + 1)  # the last step, unless it ends inside a gradient merge
    ckpt.close()
    elapsed = time.perf_counter() - start
    if bar:
        bar.close()
    return {"steps": args.steps, "first_step": first,
            "resumed_from": str(ckpt.resumed_from) if ckpt.resumed_from else None,
            "first_loss": losses[0] if losses else None, "final_loss": losses[-1] if losses else None, "losses": losses,
            "seconds": elapsed, "tokens_per_second": args.batch_size * args.seq_len * len(losses) / elapsed,
            "world_size": hcg.world_size, "effective_mp": dataclasses.asdict(hcg.resolved.mp)}


if __name__ == "__main__":
    sys.exit(main())
