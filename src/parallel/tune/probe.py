"""The device probe of `strategy tune`: what one rank of this machine does while all ranks run at once, measured
where the trials will run (under the same launcher), so the plan's cost model starts from this machine's constants
and not an H100's. Rank 0 writes OUT/probe.json and the model's OUT/config.json:

    {"device": "cpu (2 cores)" | "NVIDIA H100 80GB HBM3", "world_size": n, "torch": "2.13.0",
     "matmul_flops": the model's MLP matmul (an expert's, in an MoE model) in bf16, per rank (FLOP/s),
     "bandwidth": an all-reduce's bytes a second per rank, counted as the plan counts them (2 (n - 1) / n of the bytes),
     "collective_seconds": a small all-reduce's seconds (4 KiB: the latency every collective pays, whatever its size),
     "memory_bandwidth": bytes a second an elementwise update moves (the optimizer step's kind of work),
     "layer_seconds": one decoder layer's forward and backward on a single token (what a call costs regardless of
     its size: dispatch, launches), "memory_bytes": a rank's usable memory (the GPU's; on a CPU the machine's over its
     local ranks), "reference_seconds": the reference workload (`reference_seconds`) that each trial runs too}
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist


LATENCY_CALLS = 20


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_ranks))
    if "RANK" in os.environ and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    from .models import config_of

    config = config_of(args.model, args.seq_len)
    found = probe(config, local_ranks)
    if not dist.is_initialized() or dist.get_rank() == 0:
        from strategy.atomic import write_atomic

        args.out.mkdir(parents=True, exist_ok=True)
        write_atomic(args.out / "config.json", (json.dumps(config.to_dict(), indent=1, default=str) + "\n").encode())
        write_atomic(args.out / "probe.json", (json.dumps(found, indent=1) + "\n").encode())
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


def probe(config: Any, local_ranks: int) -> dict[str, Any]:
    """Every figure of probe.json, each the slowest rank's (all ranks measure at once, as they train)."""
    cuda = torch.cuda.is_available()
    device = torch.device("cuda") if cuda else torch.device("cpu")
    dtype = torch.bfloat16
    h = config.hidden_size
    i = (getattr(config, "moe_intermediate_size", None) or getattr(config, "intermediate_size", None)
         or 4 * config.hidden_size)  # an MoE model's MLP matmuls are its experts'
    x = torch.randn(512, h, dtype=dtype, device=device)
    w = torch.randn(h, i, dtype=dtype, device=device)
    matmul = _slowest(_time(lambda: x @ w, cuda)) or 1e-9
    world = dist.get_world_size() if dist.is_initialized() else 1
    bandwidth = latency = None
    if world > 1:
        buf = torch.randn(2 ** 20, dtype=dtype, device=device)  # 2 MiB
        seconds = _slowest(_time(lambda: dist.all_reduce(buf), cuda))
        bandwidth = 2 * (world - 1) / world * buf.numel() * buf.element_size() / seconds
        small = torch.randn(2048, dtype=dtype, device=device)  # 4 KiB: what a collective costs whatever its size

        def calls() -> None:  # (back to back, as a step issues them: one call's timing is the ranks' skew)
            for _ in range(LATENCY_CALLS):
                dist.all_reduce(small)
        latency = _slowest(_time(calls, cuda)) / LATENCY_CALLS
    big = torch.zeros(2 ** 22, dtype=torch.float32, device=device)  # 16 MiB, read and written
    moved = _slowest(_time(lambda: big.add_(1.0), cuda))
    return {
        "device": torch.cuda.get_device_name(device) if cuda else f"cpu ({os.cpu_count()} cores)",
        "world_size": world, "torch": torch.__version__,
        "matmul_flops": 2 * x.shape[0] * h * i / matmul,
        "bandwidth": bandwidth,
        "collective_seconds": latency,
        "memory_bandwidth": 2 * big.numel() * big.element_size() / moved,
        "layer_seconds": _slowest(_layer_seconds(config, device, cuda)),
        "memory_bytes": _memory_bytes(device, local_ranks),
        "reference_seconds": _reference(device),
    }


def _reference(device: torch.device, repeat: int = 7) -> float:
    """The reference workload's seconds as a trial takes them: the median over runs of the slowest rank's."""
    reference_seconds(device)
    return statistics.median(_slowest(reference_seconds(device)) for _ in range(repeat))


_REFERENCE: dict[torch.device, tuple[torch.Tensor, torch.nn.Module, torch.Tensor]] = {}


def reference_seconds(device: torch.device) -> float:
    """A fixed workload's seconds on this rank: some matmuls and a small network's forward and backward (dispatch,
    as the small calls of a step). Run by the probe and after each timed step of a trial, all ranks at once: a trial's
    step time is compared with the others' at the probe's speed (`strategy.tuning.tuner.corrected`), so a machine
    that slows down or speeds up over a tune (a shared VM, a CPU's or GPU's clocks) reorders the layouts less."""
    if device not in _REFERENCE:
        g = torch.Generator().manual_seed(0)
        small = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(8)]).to(device)
        _REFERENCE[device] = (torch.randn(256, 256, generator=g).to(device), small,
                              torch.randn(4, 32, generator=g).to(device))
    a, net, x = _REFERENCE[device]
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(40):
        a @ a
    for _ in range(20):
        net(x).sum().backward()
    if cuda:
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def _time(fn: Callable[[], Any], cuda: bool, repeat: int = 7) -> float:
    """The median seconds of `fn`, after a warm-up, all ranks starting together."""
    fn()
    if dist.is_initialized():
        dist.barrier()
    times = []
    for _ in range(repeat):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _slowest(seconds: float) -> float:
    if not dist.is_initialized():
        return seconds
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def _layer_seconds(config: Any, device: torch.device, cuda: bool) -> float:
    """One decoder layer of the model, forward and backward on one token of one row: the cost of a call itself."""
    import transformers

    small = transformers.AutoConfig.for_model(**{**config.to_dict(), "num_hidden_layers": 1})
    model = transformers.AutoModelForCausalLM.from_config(small).to(device)
    layer = model.model.layers[0]
    rotary = model.model.rotary_emb
    x = torch.randn(1, 1, config.hidden_size, device=device, requires_grad=True)
    positions = torch.zeros(1, 1, dtype=torch.long, device=device)

    def one() -> None:
        out = layer(x, position_embeddings=rotary(x, positions), attention_mask=None, position_ids=positions)
        (out[0] if isinstance(out, tuple) else out).sum().backward()

    return _time(one, cuda)


def _memory_bytes(device: torch.device, local_ranks: int) -> float:
    if device.type == "cuda":
        return float(torch.cuda.get_device_properties(device).total_memory)
    pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    return float(pages * size / max(1, local_ranks))


if __name__ == "__main__":
    sys.exit(main())
