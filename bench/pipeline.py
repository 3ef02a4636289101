"""Pipelines: a Llama's training step through PipelineModel.train_batch next to driving torch.distributed.pipelining
by hand on the same split (the same engine), and each schedule's measured bubble next to its theory.

The bubble is the idle share of a step on the busiest rank: 1 - (time in its forward / backward actions) / step time,
the actions timed by wrapping the stages' own forward_one_chunk / backward_one_chunk / backward_weight_one_chunk.
Theory for 1F1B and GPipe: (p - 1) / (m + p - 1) with p stages and m micro-batches; less for interleaved and
zero-bubble schedules. On CPU each action is a few ms, so gloo and Python overheads show in the measured share.

Run: .venv/bin/python bench/pipeline.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

import parallel  # noqa: E402
import strategy  # noqa: E402

PP, MICRO, SEQ, VOCAB = 2, 8, 64, 256
SCHEDULES = {"1F1B": ("1F1B", 1, False), "FThenB": ("FThenB", 1, False), "interleaved": ("1F1B", 2, False),
             "DualPipeV": ("1F1B", 1, True)}


def _llama():
    import transformers

    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=8,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ,
                                      tie_word_embeddings=False)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def _text(schedule: str, virtual: int, dualpipev: bool) -> str:
    return (f"hybrid_configs {{ dp_degree: 1 pp_degree: {PP} pp_configs {{ virtual_pp_degree: {virtual}"
            f"{' use_dualpipev: true' if dualpipev else ''} }} }} "
            f'pipeline_configs {{ micro_batch_size: 1 accumulate_steps: {MICRO} schedule_mode: "{schedule}" }}')


class _Busy:
    """Seconds this rank spends inside its stages' compute actions."""

    def __init__(self, stages) -> None:
        self.seconds = 0.0
        for stage in stages:
            for name in ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk"):
                if hasattr(stage, name):
                    setattr(stage, name, self._timed(getattr(stage, name)))

    def _timed(self, fn):
        def run(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
        return run


def _by_hand(model, hcg, n):
    """torch.distributed.pipelining driven directly on PipelineModel's own chunks: stages, schedule, AdamW."""
    from torch.distributed.pipelining import PipelineStage, schedules

    p = hcg.resolved.pipeline
    stages = [PipelineStage(chunk, s, model.num_stages, torch.device("cpu"), group=hcg.pp_group)
              for chunk, s in zip(model.chunks, model.stage_ids)]
    cls = getattr(schedules, p.schedule)

    def loss_fn(logits, labels):
        return F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten()) / n

    arg = stages[0] if issubclass(cls, schedules.PipelineScheduleSingle) else stages
    return cls(arg, n_microbatches=n, loss_fn=loss_fn, scale_grads=False), stages


def run(rank, world, device, name, rounds):
    schedule, virtual, dualpipev = SCHEDULES[name]
    hcg = parallel.init(strategy.loads(_text(schedule, virtual, dualpipev)))
    model = parallel.parallelize(_llama())
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-4))
    ids = torch.randint(0, VOCAB, (MICRO, SEQ), generator=torch.Generator().manual_seed(0))
    theirs, their_stages = _by_hand(model, hcg, MICRO)
    plain = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def ours():
        model.train_batch((ids, ids), opt)

    def by_hand():
        kwargs = {"target": ids} if model.last else {}
        theirs.step(*((ids,) if model.first else ()), **kwargs)
        plain.step()
        plain.zero_grad()

    times = harness.interleaved({"ours": ours, "by hand": by_hand}, harness.Timer(device), rounds)
    model._schedule_or_build()
    busy = _Busy(model._schedule._stages if hasattr(model._schedule, "_stages") else [model._schedule._stage])
    t0 = time.perf_counter()
    for _ in range(3):
        ours()
    wall = (time.perf_counter() - t0) / 3
    bubble = 1 - busy.seconds / 3 / wall
    return {"ours": harness.max_over_ranks(times["ours"]), "by hand": harness.max_over_ranks(times["by hand"]),
            "bubble": harness.max_over_ranks(bubble), "schedule": hcg.resolved.pipeline.schedule,
            "stages": model.num_stages}


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    rows, results = [], {}
    for name in SCHEDULES:
        r = results[name] = harness.run_ranks(PP, "cpu", run, name, args.rounds)
        # 1F1B / GPipe: (p - 1) / (m + p - 1); interleaved with v chunks a rank: (p - 1) / (v·m + p - 1).
        v = r["stages"] // PP
        theory = (PP - 1) / (v * MICRO + PP - 1) if name != "DualPipeV" else None
        rows.append([f"{name} ({r['schedule']})", f"{r['ours'] * 1e3:.0f}", f"{r['by hand'] * 1e3:.0f}",
                     f"{r['ours'] / r['by hand']:.3f}", f"{r['bubble']:.2f}",
                     f"{theory:.2f}" if theory is not None else "~0 (zero-bubble family)"])
    print(harness.table(
        f"Llama (h 128, 8 layers) at pp {PP}, {MICRO} micro-batches of 1 x {SEQ} tokens: step time (ms) and bubble",
        ["schedule", "train_batch ms", "by hand ms", "ratio", "measured bubble", "theory"], rows,
        "'by hand': the same chunks with PipelineStage and the torch schedule built directly and a plain AdamW. "
        "Both ranks share this machine's 2 cores."))
    harness.save("pipeline", "cpu", {"results": results}, args.json)


if __name__ == "__main__":
    main()
