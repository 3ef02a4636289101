"""One trial of `strategy tune`: a few training steps of a model under one strategy, timed and measured, on every rank
of the launcher (torchrun). Rank 0 writes OUT/trial.json:

    {"status": "ok" | "cut" | "oom" | "error", "step_seconds": median of the timed steps (each the slowest rank's),
     "steps": [every timed step's seconds], "warmup": n, "reference_seconds": the median of the reference workload's
     seconds (`probe.reference_seconds`, the slowest rank's) run after each timed step, "references": each of them,
     "memory": {"peak_bytes": the largest rank's, "per_rank": [...], "estimate_bytes": estimate_memory's total,
     "parts": this rank's measured parts}, "error": "...", "seconds": wall}

Steps: `--warmup` steps (the first measures memory: the activations saved for backward through saved-tensor hooks,
and the model states after the update, as `strategy.estimate_memory` counts them; on CUDA the allocator's peak is
taken as well), then timed steps until the median is known within ±`--tolerance` (its standard error, after at
least five and `--min-steps`), or `--max-steps`. When the median of the timed steps (two at least) is slower than
`--cut-seconds` the trial ends as "cut" (the tuner passes a multiple of its best step so far, at the probe's speed,
and `--probe-reference`: the steps are compared at that speed too, as the tuner's `corrected` takes them). Every
rank takes the same decisions: they read the step time the Meter gathers from all ranks.

`STRATEGY_TUNE_INJECT` (e.g. "oom@3,hang@5") makes trial number `STRATEGY_TUNE_TRIAL` fail on purpose: "oom" raises
torch.OutOfMemoryError in its first timed step on rank 0, "hang" sleeps there (the peers wait in their collectives),
"error" raises a RuntimeError, "slow" adds a second to each timed step on rank 0. The tuner's tests use it; nothing
else does.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m parallel.tune.trial \
        --strategy candidate.prototxt --model llama --seq-len 128 --global-batch 8 --out trial
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from strategy.tuning.tuner import corrected

from .probe import reference_seconds

INJECT_ENV, TRIAL_ENV = "STRATEGY_TUNE_INJECT", "STRATEGY_TUNE_TRIAL"
OOM_EXIT = 3  # the exit status of a rank that ran out of memory (the tuner reads trial.json or oom_rankR.json first)


def injected() -> str | None:
    """The failure this trial is to inject ("oom", "hang", "error", "slow"), or None."""
    spec, trial = os.environ.get(INJECT_ENV, ""), os.environ.get(TRIAL_ENV)
    for item in filter(None, (part.strip() for part in spec.split(","))):
        kind, _, at = item.partition("@")
        if kind not in ("oom", "hang", "error", "slow"):
            raise ValueError(f"{INJECT_ENV}: {item!r}: expected oom@K, hang@K, error@K or slow@K")
        if at == trial:
            return kind
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--strategy", required=True)
    p.add_argument("--model", required=True, help="a small model's type (llama, qwen3_moe, ...), a directory holding "
                   "config.json, or a config.json")
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--global-batch", type=int, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--min-steps", type=int, default=3)
    p.add_argument("--max-steps", type=int, default=20)
    p.add_argument("--tolerance", type=float, default=0.03)
    p.add_argument("--cut-seconds", type=float, default=0.0,
                   help="a median of the timed steps slower than this ends the trial (0: never)")
    p.add_argument("--probe-reference", type=float, default=0.0,
                   help="the probe's reference workload seconds: the steps are compared with --cut-seconds at the "
                   "probe's speed (0: as measured)")
    args = p.parse_args(argv)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    rank = int(os.environ.get("RANK", "0"))
    try:
        result = run(args)
    except torch.OutOfMemoryError as e:
        _write(args.out / f"oom_rank{rank}.json", {"status": "oom", "error": str(e).splitlines()[0] if str(e) else "OOM"})
        print(f"rank {rank}: out of memory: {e}", file=sys.stderr, flush=True)
        os._exit(OOM_EXIT)  # the peers wait in a collective: the launcher ends them
    except Exception as e:  # noqa: BLE001 - a trial's failure is its result
        if rank == 0:
            _write(args.out / "trial.json", {"status": "error", "error": f"{type(e).__name__}: {e}",
                                             "traceback": traceback.format_exc()[-4000:],
                                             "seconds": time.perf_counter() - started})
        raise
    if rank == 0:
        _write(args.out / "trial.json", {**result, "seconds": time.perf_counter() - started})
    import parallel

    parallel.destroy()
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The trial: memory on the first step, the other warm-up steps, then the timed ones; trial.json's fields."""
    failure = injected()
    training = _Training(args)
    memory = _memory(training)
    for k in range(1, args.warmup):
        training.step(k)
    reference_seconds(training.device)  # (warm, as the probe's is, before the first timed one)
    status, times, last, references = _timed_steps(training, args, failure)
    return {"status": status, "step_seconds": statistics.median(times), "steps": times, "warmup": args.warmup,
            "reference_seconds": statistics.median(references), "references": references,
            "world_size": training.hcg.world_size, "tflops_per_device": last["tflops_per_device"] if last else None,
            "memory": memory}


class _Training:
    """The strategy's groups, the parallelised model and its optimizer; `step(k)` trains on global batch k (random
    tokens, seeded by k and the data rank), in micro-batches as the strategy says (a pipeline's schedule, or gradient
    merge)."""

    def __init__(self, args: argparse.Namespace) -> None:
        import parallel
        import strategy

        from .models import build

        self.hcg = hcg = parallel.init(args.strategy)
        resolved = hcg.resolved
        if args.global_batch % hcg.data_size:
            raise ValueError(f"the global batch {args.global_batch} does not divide over {hcg.data_size} data ranks")
        self.rows, self.seq_len = args.global_batch // hcg.data_size, args.seq_len
        model = build(args.model, args.seq_len)
        config, self.vocab = model.config.to_dict(), model.config.vocab_size
        self.model = parallel.parallelize(model)
        self.whole = self.model.module if hcg.pp_size > 1 else self.model
        parallel.cast_for_amp(self.whole)
        if resolved.mp.fused_linear_param_grad_add:
            parallel.add_main_grad(self.whole)
        self.opt = parallel.HybridParallelOptimizer(
            torch.optim.AdamW(self.model.parameters(), lr=1e-4, weight_decay=0.0), max_grad_norm=1.0)
        pipelined = hcg.pp_size > 1
        self.micro = resolved.pipeline.micro_batch_size if pipelined else self.rows // resolved.gradient_merge.k_steps
        self.estimate = strategy.estimate_memory(config, resolved, seq_len=args.seq_len, micro_batch_size=self.micro)
        self.device = next(self.whole.parameters()).device

    def step(self, k: int) -> None:
        import parallel

        hcg, opt = self.hcg, self.opt
        gen = torch.Generator().manual_seed(k * 1000 + hcg.data_rank)
        ids = torch.randint(0, self.vocab, (self.rows, self.seq_len), generator=gen)
        opt.zero_grad()  # the last step's gradients freed here, not after it: they are held until then
        if hcg.pp_size > 1:
            with parallel.autocast():
                self.model.train_batch((ids, ids), opt)
            return
        for part in ids.split(self.micro):  # gradient merge: the optimizer steps at the last of them
            piece = parallel.split_sequence({"input_ids": part, "labels": part}, hcg=hcg)
            with parallel.autocast():
                loss = self.model(**piece).loss
            opt.scale(loss).backward()
            opt.step()


def _memory(t: _Training) -> dict[str, Any]:
    """Step 0 under the saved-tensor count: every rank's model states and saved activations (on CUDA, the
    allocator's peak when larger), beside the estimate of the same."""
    from ..metrics.saved import saved_activations, state_bytes, storage_bytes
    from ..topology.dtensors import is_data_sharded

    if t.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(t.device)  # (the build's and the cast's peaks are not the step's)
    # Each parameter's gradient as backward leaves it (a pipeline frees them in its step); FSDP2's sharded ones are
    # counted after the step (what backward leaves there is its transient unsharded gradient).
    held: dict[int, int] = {}
    hooks = [p.register_post_accumulate_grad_hook(lambda p: held.__setitem__(id(p), storage_bytes([p.grad])))
             for p in t.whole.parameters() if p.requires_grad and not is_data_sharded(p)]
    try:
        with saved_activations(t.whole) as saved:
            t.step(0)
    finally:
        for hook in hooks:
            hook.remove()
    parts = {**state_bytes(t.whole, t.opt), "activations": saved.peak}
    parts["gradients"] = max(parts["gradients"], sum(held.values()))
    mine = float(sum(parts.values()))
    if t.device.type == "cuda":
        mine = max(mine, float(torch.cuda.max_memory_allocated(t.device)))
    per_rank = _gather_floats(mine)
    return {"peak_bytes": max(per_rank), "per_rank": per_rank, "estimate_bytes": _comparable(t.estimate, t.device),
            "estimate_total_bytes": t.estimate.total, "parts_rank0": parts}


def _timed_steps(t: _Training, args: argparse.Namespace,
                 failure: str | None) -> tuple[str, list[float], Any, list[float]]:
    """Timed steps until stable, the cap, or a cut: (status, each step's slowest rank's seconds, the last record, the
    reference workload's seconds after each step)."""
    import parallel

    meter = parallel.Meter(t.hcg, t.model, tokens_per_step=args.global_batch * args.seq_len, seq_len=args.seq_len,
                           echo=lambda line: None, interval=1)
    times: list[float] = []
    references: list[float] = []
    status = "ok"
    try:
        for k in range(args.warmup, args.warmup + args.max_steps):
            with meter.step(k):
                if failure == "slow" and t.hcg.rank == 0:
                    time.sleep(1.0)
                elif failure and k == args.warmup and t.hcg.rank == 0:
                    _fail(failure)
                t.step(k)
            assert meter.last is not None
            times.append(meter.last["step_seconds"]["max"])
            references.append(max(_gather_floats(reference_seconds(t.device))))
            so_far = {"step_seconds": statistics.median(times), "reference_seconds": statistics.median(references)}
            if args.cut_seconds and len(times) >= 2 and (corrected(so_far, args.probe_reference) or 0) > args.cut_seconds:
                status = "cut"  # (two steps: one slow step is noise as often as not)
                break
            if len(times) >= max(5, args.min_steps) and _stable(times, args.tolerance):
                break
    finally:
        meter.close()
    return status, times, meter.last, references


def _comparable(estimate: Any, device: torch.device) -> float:
    """The estimate of what was measured, for the largest stage: on CUDA the allocator's peak, everything; on a CPU
    the model states and the saved activations, without FSDP2's transient buffers (`_TRANSIENT`)."""
    if device.type == "cuda":
        return float(estimate.total)
    return max(s.total - sum(v for k, v in s.items.items() if k in _TRANSIENT) for s in estimate.stages)


# FSDP2's buffers that live only inside a step, which a count of parameters, gradients, optimizer state and saved
# activations does not see: the weights it gathers, and the whole gradients it keeps between micro-steps.
_TRANSIENT = ("gathered weights (FSDP2)", "gathered experts (FSDP2)", "unsharded gradients (FSDP2)")


def _stable(times: list[float], tolerance: float) -> bool:
    """The median is known within ±`tolerance`: its standard error, 1.2533 σ / √n for n steps of relative spread σ (the
    standard deviation of their logarithms), is at most `tolerance`. Why not "the median stopped moving": on this VM a
    step's time spread 6-12%, and one run each of five steps put two Llama layouts 8-10% apart in the wrong order 23%
    and 16% of the time, of twenty steps 0% and 8% (bench/trial_steps.py: two recordings of eight runs each)."""
    logs = [math.log(t) for t in times if t > 0]
    return len(logs) >= 2 and 1.2533 * statistics.stdev(logs) / math.sqrt(len(logs)) <= tolerance


def _fail(kind: str) -> None:
    if kind == "oom":
        raise torch.OutOfMemoryError(f"injected by {INJECT_ENV} (trial {os.environ.get(TRIAL_ENV)})")
    if kind == "hang":
        while True:
            time.sleep(3600)
    raise RuntimeError(f"injected by {INJECT_ENV} (trial {os.environ.get(TRIAL_ENV)})")


def _gather_floats(value: float) -> list[float]:
    """`value` of every rank, by rank."""
    if not dist.is_initialized():
        return [value]
    out = [torch.zeros(1, dtype=torch.float64) for _ in range(dist.get_world_size())]
    dist.all_gather(out, torch.tensor([value], dtype=torch.float64))
    return [float(t) for t in out]


def _write(path: Path, record: dict[str, Any]) -> None:
    from strategy.atomic import write_atomic

    write_atomic(path, (json.dumps(record, indent=1) + "\n").encode())


if __name__ == "__main__":
    sys.exit(main())
