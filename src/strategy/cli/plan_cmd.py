"""`plan`: from a model's config.json and a cluster to the strategies that fit, ranked, each writable as a file."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from .common import positive, subparser

__all__ = ["register"]

_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30,
          "tib": 2 ** 40}


def _bytes(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"expected a size such as 80GiB or 80GB, got {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


def register(sub: argparse._SubParsersAction) -> None:
    p = subparser(
        sub, "plan", "the strategies that fit a model on a cluster, ranked by predicted step time",
        "Search every dp, mp, pp, sharding (stage), sep, cp and ep a Hugging Face decoder's shapes allow on --gpus\n"
        "GPUs, with recompute on or off and every micro-batch size that makes --global-batch; keep those whose\n"
        "memory a rank (parameters, gradients, optimizer state, activations; the memory model of\n"
        "strategy.estimate_memory) fits --gpu-memory less --headroom, and rank them by a cost model (compute,\n"
        "each axis's communication, the pipeline bubble; its constants are flags, the defaults an H100 SXM node's).\n"
        "Prints the fastest --top, and the faster layouts cut for what a user can change (over memory by at most\n"
        "25%, a global batch the data ranks do not divide); --write DIR writes each as a strategy file that\n"
        "`strategy validate --world-size N` accepts.",
        "strategy plan --model config.json --gpus 64 --gpu-memory 80GiB --seq-len 4096 --global-batch 512",
    )
    p.add_argument("--model", required=True, metavar="CONFIG", help="a Hugging Face config.json (Llama, Mistral, "
                   "Qwen2, Qwen3, Mixtral, Qwen3-MoE)")
    p.add_argument("--gpus", type=positive, required=True, metavar="N", help="GPUs in all (the world size)")
    p.add_argument("--gpu-memory", type=_bytes, required=True, metavar="SIZE", help="memory of one GPU, e.g. 80GiB")
    p.add_argument("--gpus-per-node", type=positive, default=8, metavar="N", help="(default 8): mp stays in a node")
    p.add_argument("--seq-len", type=positive, required=True, metavar="S", help="tokens a sequence")
    p.add_argument("--global-batch", type=positive, required=True, metavar="SEQUENCES",
                   help="sequences of --seq-len tokens a step, as Megatron and PaddleNLP count it")
    p.add_argument("--top", type=positive, default=5, metavar="K", help="candidates to show (default 5)")
    p.add_argument("--headroom", type=float, default=0.1, metavar="F",
                   help="share of the GPU memory left free for the allocator, buffers and the framework (default 0.1)")
    p.add_argument("--peak-tflops", type=float, default=989.0, metavar="T",
                   help="dense bf16 TFLOP/s of one GPU (default 989: H100 SXM, NVIDIA's datasheet)")
    p.add_argument("--utilisation", type=float, default=0.4, metavar="F",
                   help="the share of peak a step achieves (default 0.4, a well-tuned large run's MFU)")
    p.add_argument("--intra-node-gbps", type=float, default=450.0, metavar="GB/s",
                   help="a GPU's bandwidth to a GPU of its node (default 450: NVLink 4, 900 GB/s both ways)")
    p.add_argument("--inter-node-gbps", type=float, default=50.0, metavar="GB/s",
                   help="a GPU's bandwidth to another node (default 50: one 400 Gb/s InfiniBand NDR port per GPU)")
    p.add_argument("--calibration", type=Path, metavar="FILE",
                   help="rank with a calibration `strategy tune` fitted (its calibration.json): its measured constants "
                        "replace the four above, and its coefficients weigh each term of the step time")
    p.add_argument("--write", type=Path, metavar="DIR", help="write each candidate as DIR/candidate-K.prototxt")
    p.add_argument("--json", action="store_true", help="one JSON document: candidates, cut, message")
    p.set_defaults(run=_plan)


def _plan(args: argparse.Namespace) -> int:
    from ..planning.search import CostModel, plan, print_progress

    cost = CostModel(peak_flops=args.peak_tflops * 1e12, utilisation=args.utilisation,
                     intra_node_bandwidth=args.intra_node_gbps * 1e9, inter_node_bandwidth=args.inter_node_gbps * 1e9)
    try:
        calibration = None
        if args.calibration:
            from ..planning.calibration import load_calibration

            calibration = load_calibration(args.calibration)
        result = plan(args.model, gpus=args.gpus, gpu_memory=args.gpu_memory, seq_len=args.seq_len,
                      global_batch=args.global_batch, gpus_per_node=args.gpus_per_node, top=args.top,
                      headroom=args.headroom, cost=cost, progress=print_progress if sys.stderr.isatty() else None,
                      calibration=calibration)
    except (OSError, ValueError) as e:
        print(f"strategy plan: {e}", file=sys.stderr)
        return 2
    if sys.stderr.isatty() and result.searched >= 20000:
        print(file=sys.stderr)
    if args.write:
        from ..atomic import write_atomic

        args.write.mkdir(parents=True, exist_ok=True)
        for k, c in enumerate(result.candidates, 1):
            write_atomic(args.write / f"candidate-{k}.prototxt", c.text.encode())
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
        return 0 if result.candidates else 1
    print(_table(result, args))
    return 0 if result.candidates else 1


def _table(result, args: argparse.Namespace) -> str:  # type: ignore[no-untyped-def]
    from ..planning.search import NEAR_MEMORY

    gib = 2 ** 30
    lines = [f"{result.message} (searched {result.searched:,} on {args.gpus} GPUs of {args.gpu_memory / gib:.0f} GiB, "
             f"{args.headroom:.0%} headroom; {args.global_batch} × {args.seq_len} tokens a step)"]
    if result.candidates:
        header = ["#", "dp", "mp", "pp", "shard", "stage", "sep", "cp", "ep", "recomp", "mbs×steps", "schedule",
                  "params", "grads", "optim", "activ", "total GiB", "step s", "tok/s/GPU"]
        rows = [header]
        for k, c in enumerate(result.candidates, 1):
            d, m = c.degrees, c.memory
            rows.append([str(k), *(str(d[a]) for a in ("dp", "mp", "pp", "sharding")), str(c.stage) if d["sharding"] > 1
                         else "-", str(d["sep"]), str(d["cp"]), str(d["ep"]), "on" if c.recompute else "off",
                         f"{c.micro_batch_size}×{c.accumulate_steps}", c.schedule if d["pp"] > 1 else "-",
                         *(f"{v / gib:.1f}" for v in (m.parameters, m.gradients, m.optimizer, m.activations, m.total)),
                         f"{c.step_seconds:.2f}", f"{c.tokens_per_second_per_gpu:,.0f}"])
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines += ["  " + "  ".join(cell.rjust(w) for cell, w in zip(r, widths)) for r in rows]
        if args.write:
            lines.append(f"wrote {len(result.candidates)} strategy files to {args.write}/ (candidate-1 is the fastest)")
    cut = [c for c in result.cut if "degrees" in c]
    if cut:
        than = "faster than #1" if result.candidates else "the fastest"
        lines.append(f"cut, {than} (over memory by at most {NEAR_MEMORY - 1:.0%}, or a global batch the data ranks "
                     "do not divide):")
        for c in cut:
            d = c["degrees"]
            stage = f" (stage {c['sharding_stage']})" if d["sharding"] > 1 else ""
            lines.append(f"  dp {d['dp']} mp {d['mp']} pp {d['pp']} sharding {d['sharding']}{stage} sep {d['sep']} cp "
                         f"{d['cp']} ep {d['ep']}, recompute {'on' if c['recompute'] else 'off'}, micro-batch "
                         f"{c['micro_batch_size']}, {c['tokens_per_second_per_gpu']:,.0f} tok/s/GPU: {c['why']}")
    shaped = [c for c in result.cut if "layouts" in c]
    if shaped:
        lines.append("left out by the model's shapes or the runtime:")
        lines += [f"  {c['layouts']:,} layout{'s' if c['layouts'] != 1 else ''}: {c['why']}" for c in shaped]
    return "\n".join(lines)
