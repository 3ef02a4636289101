"""Train a small GPT with tensor (and data) parallelism configured by a strategy file.

    torchrun --standalone --nproc-per-node 2 examples/train_gpt.py \
        --strategy examples/strategies/mp2_all_flags.prototxt --steps 200 --out out/demo

Byte-level language model on the Python language reference that ships with CPython (pydoc_data), so
nothing is downloaded. Every rank builds the same model from the same seed; the parallel layers keep
only their shards, so the loss curve matches a single process (mp_degree 1) for any flags.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from typing import Any
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import parallel
import strategy


@dataclass(frozen=True, kw_only=True)
class Config:
    vocab: int = 256  # bytes
    seq_len: int = 64
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    batch_size: int = 16  # sequences per step, across all data-parallel replicas
    lr: float = 3e-3
    clip: float = 1.0  # max global gradient norm (0 turns clipping off)
    warmup: int = 4  # steps of linear learning-rate warmup
    steps: int = 200
    seed: int = 0


# -- data ----------------------------------------------------------------------------------------------
def corpus() -> torch.Tensor:
    """The Python language reference (as bundled with CPython's pydoc) as a stream of byte tokens."""
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[k] for k in sorted(topics))
    return torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8).long()


def batch(data: torch.Tensor, step: int, cfg: Config, hcg: parallel.HybridGroup) -> tuple[torch.Tensor, torch.Tensor]:
    """This replica's share of the global batch for `step`, the same on every mp rank of a dp group.

    With need_broadcast_data on (the default), only the mp group's first rank reads it and
    `parallel.broadcast_data` hands it to the others; with it off, every rank must read the same batch itself.
    """
    if hcg.resolved.mp.need_broadcast_data and hcg.mp_rank != 0:
        return parallel.broadcast_data(torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long))
    return parallel.broadcast_data(*_read(data, step, cfg, hcg))


def _read(data: torch.Tensor, step: int, cfg: Config, hcg: parallel.HybridGroup) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(cfg.seed * 100_003 + step)
    starts = torch.randint(0, data.numel() - cfg.seq_len - 1, (cfg.batch_size,), generator=gen)
    per_replica = cfg.batch_size // hcg.data_size  # dp and sharding positions read different rows
    mine = starts[hcg.data_rank * per_replica : (hcg.data_rank + 1) * per_replica]
    window = torch.stack([data[s : s + cfg.seq_len + 1] for s in mine.tolist()])
    return window[:, :-1], window[:, 1:]


# -- model ---------------------------------------------------------------------------------------------
class Attention(nn.Module):
    """Causal self-attention with heads split across the mp group.

    The QKV projection is column-parallel with its rows laid out head by head ([q, k, v] of head 0,
    then head 1, ...), so each rank's contiguous block of rows holds whole heads; the output projection
    is row-parallel and sums the heads' contributions.
    """

    def __init__(self, cfg: Config, hcg: parallel.HybridGroup) -> None:
        super().__init__()
        if cfg.heads % hcg.mp_size:
            raise ValueError(f"heads={cfg.heads} is not divisible by mp_degree={hcg.mp_size}")
        self.local_heads, self.head_dim = cfg.heads // hcg.mp_size, cfg.d_model // cfg.heads
        self.hcg = hcg
        # Batch-first [b, s, h]: under sequence parallelism the sequence is dim 1.
        self.qkv = parallel.ColumnParallelLinear(cfg.d_model, 3 * cfg.d_model, gather_output=False, sequence_dim=1)
        self.out = parallel.RowParallelLinear(cfg.d_model, cfg.d_model, input_is_parallel=True, sequence_dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.qkv(x)  # the whole sequence, even when x holds this rank's block of it
        b, t, _ = qkv.shape
        q, k, v = qkv.view(b, t, self.local_heads, 3, self.head_dim).unbind(dim=3)
        # At sep_degree > 1, x is this rank's chunk of the sequence: Ulysses attends over the whole of it; at
        # cp_degree > 1 x is this rank's two chunks, and context parallelism attends over the whole (plain SDPA at 1).
        attend = parallel.cp_attention if self.hcg.cp_size > 1 else parallel.sep_attention
        y = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, hcg=self.hcg)
        return self.out(y.transpose(1, 2).reshape(b, t, self.local_heads * self.head_dim))


class Block(nn.Module):
    def __init__(self, cfg: Config, hcg: parallel.HybridGroup) -> None:
        super().__init__()
        # The norms act on the residual stream: in the sequence-parallel region when that is on.
        self.ln1 = parallel.mark_sequence_parallel(nn.LayerNorm(cfg.d_model), hcg=hcg)
        self.ln2 = parallel.mark_sequence_parallel(nn.LayerNorm(cfg.d_model), hcg=hcg)
        self.attn = Attention(cfg, hcg)
        self.up = parallel.ColumnParallelLinear(cfg.d_model, 4 * cfg.d_model, gather_output=False, sequence_dim=1)
        self.down = parallel.RowParallelLinear(4 * cfg.d_model, cfg.d_model, input_is_parallel=True, sequence_dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, cfg: Config, hcg: parallel.HybridGroup) -> None:
        super().__init__()
        self.hcg = hcg
        self.tokens = parallel.VocabParallelEmbedding(cfg.vocab, cfg.d_model, sequence_dim=1)
        self.positions = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, hcg) for _ in range(cfg.layers))
        self.ln_f = parallel.mark_sequence_parallel(nn.LayerNorm(cfg.d_model), hcg=hcg)
        self.head = parallel.ColumnParallelLinear(cfg.d_model, cfg.vocab, bias=False, gather_output=False, sequence_dim=1)
        self.loss = parallel.ParallelCrossEntropy()

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """Token ids to the loss (or the logits without targets). A pipeline stage holds only some modules
        (torchtitan's convention): without the embeddings `x` is the previous stage's hidden state, blocks of other
        stages are None, and without the head the hidden state is the output."""
        if self.tokens is not None:
            # Under sequence parallelism the token embedding comes out as this rank's block of the sequence
            # (a reduce-scatter); the positions join it there. Otherwise both are whole and this is a no-op.
            # Under sep or cp, x is this rank's share of each row: its tokens' global positions.
            mine = parallel.sequence_positions(x.shape[1] * self.hcg.sep_size * self.hcg.cp_size, self.hcg, x.device)
            positions = parallel.scatter_to_sequence(self.positions(mine), sequence_dim=0, hcg=self.hcg)
            x = self.tokens(x) + positions
        for block in self.blocks:
            if block is not None:
                x = block(x)
        if self.head is None:
            return x
        logits = self.head(self.ln_f(x))
        return logits if targets is None else self.loss(logits, targets)


# -- training ------------------------------------------------------------------------------------------
def build(cfg: Config, hcg: parallel.HybridGroup) -> tuple[Any, parallel.HybridParallelOptimizer]:
    """The demo GPT (this rank's pipeline stages of it when pp_degree > 1) and its optimizer."""
    torch.manual_seed(cfg.seed)
    model: Any = GPT(cfg, hcg)
    if hcg.pp_size > 1:  # recompute, this rank's pipeline stages, sharding: parallelize's order (no TP plan: built in)
        model = parallel.parallelize(model, plan={}, hcg=hcg, loss_fn=model.loss)
    else:
        parallel.apply_recompute(model, hcg=hcg)  # recompute_configs.checkpoints (e.g. "blocks.*") when recompute is on
        parallel.apply_sharding(model, hcg=hcg)  # sharding_degree > 1: FSDP2 units over the blocks (ZeRO stage 1-3)
    parallel.cast_for_amp(model.module if hcg.pp_size > 1 else model, hcg=hcg)  # bf16/fp16 weights under use_pure_*
    if hcg.resolved.mp.fused_linear_param_grad_add:
        parallel.add_main_grad(model.module if hcg.pp_size > 1 else model)  # the fused flag accumulates here, in fp32
    # A pipeline's train_batch steps the optimizer itself: it clips there (max_grad_norm), as Paddle's optimizers do.
    clip = cfg.clip if hcg.pp_size > 1 and cfg.clip else None
    adamw = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    return model, parallel.HybridParallelOptimizer(adamw, max_grad_norm=clip)


def warmup(opt: parallel.HybridParallelOptimizer, cfg: Config) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning rate rises linearly over the first cfg.warmup steps, then stays (the same schedule whatever
    --steps says, so a run resumed with more steps goes on as one that had them from the start)."""
    return torch.optim.lr_scheduler.LambdaLR(opt.optimizer, lambda done: min(1.0, (done + 1) / cfg.warmup))


def train(cfg: Config, hcg: parallel.HybridGroup, *, progress: bool = False, trace_dir: Path | None = None,
          checkpoints: strategy.CheckpointSettings | None = None, check_replicas: int = 0,
          metrics_dir: Path | None = None) -> dict:
    """Train until cfg.steps; returns the summary (losses are the global-batch mean, identical on every rank).

    `checkpoints` (default: the strategy's checkpoint_configs): where to save, how often, and where to start from;
    with resume "auto" a run restarted (by torchrun --max-restarts, or by hand) continues from the newest complete
    checkpoint in its dir. Step k always reads the same batch (the step is the data position), so the continuation
    is exact; the last step is saved too. The learning rate warms up linearly over the first steps (a scheduler the
    checkpoint carries). A `parallel.Meter` times every step and logs at the strategy's metrics_configs.log_interval
    (into `metrics_dir`, when given).
    """
    model, opt = build(cfg, hcg)
    scheduler = warmup(opt, cfg)
    ckpt = parallel.Checkpointer(hcg, settings=checkpoints)
    first = ckpt.start(model, opt, scheduler=scheduler)
    if progress:
        announce_resume(ckpt, first)
    data = corpus()
    tokens_per_step = cfg.batch_size * cfg.seq_len
    losses: list[float] = []
    norms: list[float] = []
    replicas = ""  # the last replica check that passed, shown in the progress bar
    bar = _progress(cfg.steps - first) if progress else None
    profiler = parallel.metrics.Profiler(trace_dir) if trace_dir else None
    phases = ("data", "pipeline") if hcg.pp_size > 1 else parallel.metrics.PHASES  # a pipeline's step is one call
    meter = parallel.Meter(hcg, model, tokens_per_step=tokens_per_step, seq_len=cfg.seq_len, out=metrics_dir,
                           phases=phases, attention=(cfg.layers, cfg.heads, cfg.d_model // cfg.heads), optimizer=opt,
                           echo=bar.write if bar else print)
    start = time.perf_counter()
    try:
        for step in range(first, cfg.steps):
            with meter.step(step + 1):
                with meter.phase("data"):
                    ids, targets = sequence_share(*batch(data, step, cfg, hcg), hcg)
                if hcg.pp_size > 1:  # the schedule's micro-batches, one optimizer step (clipped), this data rank's mean loss
                    with meter.phase("pipeline"), parallel.autocast(hcg=hcg):
                        loss = torch.tensor(model.train_batch((ids, targets), opt))
                    if opt.last_grad_norm is not None:
                        norms.append(float(opt.last_grad_norm))
                    if check_replicas and (step + 1) % check_replicas == 0:
                        replicas = f"ok@{step + 1}" if parallel.check_replicas(model) else "none"
                else:
                    with meter.phase("forward"), parallel.autocast(hcg=hcg):  # the strategy's amp, or nothing
                        # Under sep or cp: this rank's share of the rows' mean (every rank holds as many tokens).
                        loss = model(ids, targets) / (hcg.sep_size * hcg.cp_size)
                    with meter.phase("backward"):
                        opt.scale(loss).backward()  # times the loss scale under fp16; the loss itself otherwise
                    with meter.phase("optimizer"):
                        if cfg.clip and not opt.accumulating:  # under gradient merge, the k-th step clips the merge
                            norms.append(float(opt.clip_grad_norm_(cfg.clip)))  # the whole model's norm, every rank's
                        if check_replicas and (step + 1) % check_replicas == 0:  # raises if any replica differs
                            replicas = f"ok@{step + 1}" if parallel.check_replicas(model) else "none"
                        opt.step()
                        opt.zero_grad()
                losses.append(global_mean(loss, hcg))
                meter.loss(losses[-1])
            scheduler.step()
            if profiler:
                profiler.step()
            if bar:
                elapsed = time.perf_counter() - start
                shown = {"grad_norm": f"{norms[-1]:.2f}"} if norms else {}
                if replicas:
                    shown["replicas"] = replicas
                bar.set_postfix(loss=f"{losses[-1]:.3f}", **shown, tok_s=f"{tokens_per_step * (step + 1 - first) / elapsed:,.0f}")
                bar.update()
            saved = ckpt.step(step + 1)
            if step + 1 == cfg.steps and saved is None and ckpt.dir is not None and not opt.pending_micro_steps:
                ckpt.save(step + 1)  # the last step, unless it ends inside a gradient merge
    finally:  # closed on a failure too: a message after it starts on a line of its own
        meter.close()
        if bar:
            bar.close()
    ckpt.close()  # the last background save, committed
    elapsed = time.perf_counter() - start
    if profiler:
        profiler.stop()
    return {
        "steps": cfg.steps,
        "first_step": first,
        "resumed_from": str(ckpt.resumed_from) if ckpt.resumed_from else None,
        "final_loss": losses[-1] if losses else None,
        "first_loss": losses[0] if losses else None,
        "tokens_per_second": tokens_per_step * len(losses) / elapsed if losses else 0.0,
        "seconds": elapsed,
        "world_size": hcg.world_size,
        "losses": losses,
        "grad_norms": norms,
        "config": asdict(cfg),
        "effective_mp": asdict(hcg.resolved.mp),
        "metrics": meter.last,
    }


def checkpoint_settings(settings: strategy.CheckpointSettings, out: Path) -> strategy.CheckpointSettings:
    """The strategy's checkpoint_configs with its dir under --out when relative (as torchtitan keeps checkpoint.folder
    under its dump folder), `--out/checkpoints` when the strategy names none."""
    where = Path(settings.dir or "checkpoints")
    return settings._replace(dir=str(where if where.is_absolute() else out / where))


def _progress(total: int):
    from tqdm import tqdm

    return tqdm(total=total, desc="train", unit="step", dynamic_ncols=True)


# A collective that failed because a peer died (or timed out): the job is over for this rank, torchrun restarts it.
PEER_FAILURES = (parallel.CollectiveError, dist.DistError)


def report_peer_failure(e: BaseException, hcg: parallel.HybridGroup) -> int:
    """One line on stderr for a rank whose peer failed (its traceback says nothing the message does not), exit 1."""
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    print(f"rank {hcg.rank} (pid {os.getpid()}) stops: {first} [torchrun restarts the job if --max-restarts allows; "
          "--traceback shows where]", file=sys.stderr, flush=True)
    return 1


def announce_resume(ckpt: parallel.Checkpointer, first: int) -> None:
    """Say, before the first step, that the run continues from a checkpoint (after a restart or a --resume)."""
    if ckpt.resumed_from is not None:
        print(f"resuming from {ckpt.resumed_from} (step {first})", flush=True)


def effective_strategy(s: strategy.DistributedStrategy, resolved: strategy.Resolved) -> strategy.DistributedStrategy:
    """The strategy as it ran: degrees resolved (dp inferred), mp flags as gated."""
    out = strategy.DistributedStrategy()
    out.CopyFrom(s)
    hybrid = out.hybrid_configs
    for axis, degree in resolved.degrees.items():  # dp inferred
        setattr(hybrid, f"{axis}_degree", degree)
    for field in strategy.MpConfig.DESCRIPTOR.fields:
        setting = field.name.removeprefix("mp_")
        if hasattr(resolved.mp, setting):  # the options the runtime implements, as gated
            setattr(hybrid.mp_configs, field.name, getattr(resolved.mp, setting))
    return out


def start(args: argparse.Namespace) -> tuple[strategy.DistributedStrategy, parallel.HybridGroup] | None:
    """Threads per rank, the strategy (with --set overrides) and parallel.init; None after printing why not."""
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
    try:
        s = strategy.load(args.strategy, overrides=args.overrides)
        if s.checkpoint_configs.every_steps and not s.checkpoint_configs.dir:
            s.checkpoint_configs.dir = "checkpoints"  # --save-every without a dir: under --out, as by default
        hcg = parallel.init(s)
    except strategy.StrategyError as e:
        print(e, file=sys.stderr)
        return None
    if args.batch_size % hcg.data_size:
        print(f"--batch-size {args.batch_size} is not divisible by the {hcg.data_size} data ranks "
              f"(dp_degree {hcg.dp_size} × sharding_degree {hcg.sharding_size})", file=sys.stderr)
        return None
    if args.seq_len % hcg.sep_size:
        print(f"--seq-len {args.seq_len} is not divisible by sep_degree {hcg.sep_size}", file=sys.stderr)
        return None
    if args.seq_len % (2 * hcg.cp_size):
        print(f"--seq-len {args.seq_len} is not divisible by 2 × cp_degree {hcg.cp_size}", file=sys.stderr)
        return None
    p = hcg.resolved.pipeline if hcg.pp_size > 1 else None
    if p is not None and args.batch_size != hcg.data_size * p.micro_batch_size * p.accumulate_steps:
        print(f"--batch-size {args.batch_size} must be the {hcg.data_size} data ranks × pipeline_configs.micro_batch_size "
              f"{p.micro_batch_size} × accumulate_steps {p.accumulate_steps} under pp_degree {hcg.pp_size}", file=sys.stderr)
        return None
    return s, hcg


def sequence_share(ids: torch.Tensor, targets: torch.Tensor, hcg: parallel.HybridGroup) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's share of every row: its sep chunk, or its two cp chunks (targets were shifted before: none is lost
    at a cut); the whole rows otherwise."""
    if hcg.sep_size == 1 and hcg.cp_size == 1:
        return ids, targets
    mine = parallel.sequence_positions(ids.shape[1], hcg)
    return ids[:, mine], targets[:, mine]


def global_mean(loss: torch.Tensor, hcg: parallel.HybridGroup) -> float:
    """The loss of the global batch: the sum of the sep (cp) shares, then the mean over the data ranks, dp × sharding
    (the same on every rank)."""
    mean = loss.detach().float().clone()
    for group, size in ((hcg.sep_group, hcg.sep_size), (hcg.cp_group, hcg.cp_size)):
        if size > 1:
            dist.all_reduce(mean, group=group)
    for group, size in ((hcg.dp_group, hcg.dp_size), (hcg.sharding_group, hcg.sharding_size)):
        if size > 1:
            dist.all_reduce(mean, group=group)
            mean /= size
    return float(mean)


def write_outputs(out: Path, summary: dict, effective: strategy.DistributedStrategy, *, title: str = "train_gpt",
                  metrics_dir: Path | None = None) -> None:
    """The strategy as it ran and summary.json first (atomically), then loss.png and (from `metrics_dir`'s records)
    metrics.png: a run that trained is never lost to a plotting library that is missing or fails (a warning says so)."""
    from strategy.atomic import write_atomic

    out.mkdir(parents=True, exist_ok=True)
    strategy.dump(effective, out / "strategy.prototxt")
    write_atomic(out / "summary.json", (json.dumps(summary, indent=2) + "\n").encode())
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        warnings.warn(f"loss.png not drawn ({e}); summary.json has the losses. pip install matplotlib to draw it",
                      stacklevel=2)
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    first = summary.get("first_step") or 0  # a resumed run's losses are those of steps first + 1, ...
    ax.plot(range(first + 1, first + len(summary["losses"]) + 1), summary["losses"])
    if first:
        ax.axvline(first + 0.5, linestyle=":", color="gray", label=f"resumed after step {first}")
    ax.axhline(math.log(256), linestyle="--", color="gray", label="uniform over bytes (ln 256)")
    ax.set(xlabel="step", ylabel="cross entropy (nats/byte)", title=f"{title}, {summary['world_size']} ranks")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "loss.png", dpi=120)
    plt.close(fig)
    if metrics_dir is not None:
        parallel.metrics.plot_metrics(metrics_dir, out / "metrics.png")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--strategy", required=True, help="strategy file (prototxt, JSON, YAML or binary)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="a.b.c=V", help="override a field")
    p.add_argument("--steps", type=int, default=Config.steps)
    p.add_argument("--batch-size", type=int, default=Config.batch_size)
    p.add_argument("--seq-len", type=int, default=Config.seq_len)
    p.add_argument("--layers", type=int, default=Config.layers, help="blocks (pipeline chunks must divide them)")
    p.add_argument("--out", type=Path, default=Path("out"))
    p.add_argument("--trace", action="store_true", help="write a Chrome/Perfetto trace of steps 2-4 into --out")
    p.add_argument("--save-every", type=int, metavar="N",
                   help="checkpoint every N steps (and always at the end): checkpoint_configs.every_steps")
    p.add_argument("--resume", metavar="DIR",
                   help='continue from this checkpoint (any layout), or "auto" / "never": checkpoint_configs.resume')
    p.add_argument("--clip", type=float, default=Config.clip, help="max global gradient norm, 0 for none (default 1.0)")
    p.add_argument("--check-replicas", type=int, default=0, metavar="N",
                   help="every N steps, check that replicated parameters agree across ranks")
    p.add_argument("--traceback", action="store_true",
                   help="when a peer rank fails, print the whole traceback rather than one line")
    args = p.parse_args(argv)
    if args.save_every is not None:
        args.overrides.append(f"checkpoint_configs.every_steps={args.save_every}")
    if args.resume is not None:
        args.overrides.append(f"checkpoint_configs.resume={args.resume}")
    started = start(args)
    if started is None:
        return 1
    s, hcg = started
    cfg = Config(steps=args.steps, batch_size=args.batch_size, seq_len=args.seq_len, clip=args.clip, layers=args.layers)
    lead = hcg.rank == 0
    if lead:
        print(strategy.explain(s, world_size=hcg.world_size), flush=True)
    if args.trace:
        args.out.mkdir(parents=True, exist_ok=True)
    try:
        summary = train(cfg, hcg, progress=lead, trace_dir=args.out if args.trace else None,
                        checkpoints=checkpoint_settings(hcg.resolved.checkpoint, args.out),
                        check_replicas=args.check_replicas, metrics_dir=args.out / hcg.resolved.metrics.dir)
    except ValueError as e:  # a checkpoint that is not one, or does not fit
        print(e, file=sys.stderr)
        return 1
    except PEER_FAILURES as e:
        if args.traceback:
            raise
        return report_peer_failure(e, hcg)
    if lead:
        write_outputs(args.out, summary, effective_strategy(s, hcg.resolved),
                      metrics_dir=args.out / hcg.resolved.metrics.dir)
        if summary["metrics"]:
            print(parallel.metrics.line(summary["metrics"]))
        where = f"; checkpoints: {checkpoint_settings(hcg.resolved.checkpoint, args.out).dir}"
        if not summary["losses"]:
            print(f"nothing to train: {summary['resumed_from']} is at step {cfg.steps} already{where}")
        else:
            print(f"loss {summary['first_loss']:.3f} -> {summary['final_loss']:.3f} in steps {summary['first_step'] + 1}-"
                  f"{cfg.steps}, {summary['tokens_per_second']:,.0f} tokens/s; wrote {args.out}/{where}")
    parallel.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
