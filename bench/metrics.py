"""What parallel.Meter costs: the demo GPT at mp 2, ten steps at a time, without a meter, with one logging every 10
steps (metrics_configs' default: one all_gather of a fixed-size vector each log), and with the optimizer's timer on
too; step time side by side in one run, and the collectives ten steps issue in each.

Run: .venv/bin/python bench/metrics.py
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import harness  # noqa: E402

import parallel  # noqa: E402
import strategy  # noqa: E402
from parallel.introspect import count_collectives  # noqa: E402

VARIANTS = {
    "no meter": None,
    "Meter, log every 10": "",
    "Meter + enable_optimizer_timer": "enable_optimizer_timer: true",
}
STEPS = 10


def variant(rank, world, text: str | None, out: str):
    gpt = importlib.import_module("train_gpt")
    s = strategy.loads(f"hybrid_configs {{ mp_degree: {world} {text or ''} }}")
    hcg = dataclasses.replace(parallel.current(), resolved=strategy.resolve(s, world_size=world))
    cfg = gpt.Config(d_model=256, layers=4, heads=8, seq_len=128, batch_size=16, steps=1)
    model, opt = gpt.build(cfg, hcg)
    ids, targets = gpt.batch(gpt.corpus(), 0, cfg, hcg)
    meter = None if text is None else parallel.Meter(
        hcg, model, tokens_per_step=cfg.batch_size * cfg.seq_len, seq_len=cfg.seq_len, out=out, optimizer=opt,
        attention=(cfg.layers, cfg.heads, cfg.d_model // cfg.heads), echo=lambda line: None)
    k = [0]

    def one():
        loss = model(ids, targets)
        loss.backward()
        opt.step()
        opt.zero_grad()

    def timed():
        k[0] += 1
        with meter.step(k[0]):  # type: ignore[union-attr]
            with meter.phase("forward"):  # type: ignore[union-attr]
                loss = model(ids, targets)
            with meter.phase("backward"):  # type: ignore[union-attr]
                loss.backward()
            with meter.phase("optimizer"):  # type: ignore[union-attr]
                opt.step()
                opt.zero_grad()

    step = one if meter is None else timed

    def ten():
        for _ in range(STEPS):
            step()
    return ten


def run(rank, world, device, rounds):
    _, _, _, timer = harness.setup(rank, world, device)
    with tempfile.TemporaryDirectory() as out:
        built = {name: variant(rank, world, text, out) for name, text in VARIANTS.items()}
        collectives = {}
        for name, ten in built.items():
            with count_collectives() as counts:
                ten()
            collectives[name] = dict(counts)
        times = harness.interleaved(built, timer, rounds)
    return {"seconds_per_step": {k: harness.max_over_ranks(v) / STEPS for k, v in times.items()},
            "collectives_per_10_steps": collectives}


def main() -> None:
    args = harness.parse_args(__doc__.split("\n")[0])
    r = harness.run_ranks(2, "cpu", run, args.rounds)
    base = r["seconds_per_step"]["no meter"]
    rows = [[name, r["seconds_per_step"][name] * 1e3, f"{r['seconds_per_step'][name] / base - 1:+.1%}",
             ", ".join(f"{op} {n}" for op, n in sorted(r["collectives_per_10_steps"][name].items()))]
            for name in VARIANTS]
    print(harness.table("demo GPT d=256 layers=4 seq=128 batch=16, mp=2: step time and collectives, 10 steps a sample",
                        ["variant", "ms/step", "vs no meter", "collectives in 10 steps"], rows))
    harness.save("metrics", "cpu", {"rounds": args.rounds, **r}, args.json)


if __name__ == "__main__":
    main()
