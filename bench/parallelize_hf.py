"""One training step of a small Hugging Face Llama at mp 2: ours (`parallelize` + flags) next to torch's
`parallelize_module` with the same plan (DTensor) and transformers' own tensor parallelism (tp_plan="auto").

Run: .venv/bin/python bench/parallelize_hf.py [--device cuda]
"""

from __future__ import annotations

import copy
import dataclasses
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

import parallel  # noqa: E402

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB, SEQ, BATCH = 512, 4, 8, 4, 1376, 1024, 256, 2


def config():
    import transformers

    return transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
                                    num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=SEQ,
                                    tie_word_embeddings=False)


def with_flags(hcg, on: bool):
    mp = dataclasses.replace(hcg.resolved.mp, async_allreduce=on, skip_c_identity=on, fused_linear_param_grad_add=on)
    return dataclasses.replace(hcg, resolved=dataclasses.replace(hcg.resolved, mp=mp))


def step_of(model, ids, optimizer):
    def step():
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return step


def ours(base, hcg, flags: bool, ids):
    g = with_flags(hcg, flags)
    model = parallel.parallelize(copy.deepcopy(base), hcg=g)
    if flags:
        parallel.add_main_grad(model)
    return step_of(model, ids, parallel.HybridParallelOptimizer(torch.optim.SGD(model.parameters(), lr=0.0), hcg=g))


def torch_dtensor(base, hcg, ids, device):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    model = copy.deepcopy(base)
    mesh = init_device_mesh(device, (hcg.mp_size,))
    plan = {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
            "lm_head": ColwiseParallel(output_layouts=Replicate())}
    for i in range(LAYERS):
        for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
            plan[f"model.layers.{i}.{name}"] = ColwiseParallel()
        for name in ("self_attn.o_proj", "mlp.down_proj"):
            plan[f"model.layers.{i}.{name}"] = RowwiseParallel()
    parallelize_module(model, mesh, plan)
    return step_of(model, ids, torch.optim.SGD(model.parameters(), lr=0.0))


def transformers_tp(base, checkpoint: str, ids, device):
    import transformers
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device, (2,))
    model = transformers.LlamaForCausalLM.from_pretrained(checkpoint, tp_plan="auto", device_mesh=mesh, torch_dtype=torch.float32)
    return step_of(model, ids, torch.optim.SGD(model.parameters(), lr=0.0))


def run(rank, world, device, rounds, checkpoint):
    import transformers

    hcg, _, dev, timer = harness.setup(rank, world, device)
    torch.manual_seed(0)
    base = transformers.LlamaForCausalLM(config()).to(dev)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(1)).to(dev)
    variants = {"ours: parallelize, no flags": ours(base, hcg, False, ids),
                "ours: parallelize, all three flags": ours(base, hcg, True, ids),
                "torch DTensor parallelize_module": torch_dtensor(base, hcg, ids, device)}
    notes = {}
    try:
        variants["transformers tp_plan=\"auto\""] = transformers_tp(base, checkpoint, ids, device)
    except Exception as e:  # noqa: BLE001 - reported in the table's note
        notes["transformers"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    times = harness.interleaved(variants, timer, rounds)
    return {"seconds": {k: harness.max_over_ranks(v) for k, v in times.items()}, "notes": notes}


def main() -> None:
    import transformers

    args = harness.parse_args(__doc__.split("\n")[0])
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        transformers.LlamaForCausalLM(config()).save_pretrained(tmp)  # transformers' TP loads from a checkpoint
        result = harness.run_ranks(2, args.device, run, args.rounds, tmp)
    sec = result["seconds"]
    dt = sec["torch DTensor parallelize_module"]
    hf = sec.get('transformers tp_plan="auto"')
    rows = [[name, t * 1e3, t / dt, t / hf if hf else "-"] for name, t in sec.items()]
    note = "; ".join(f"{k} did not run: {v}" for k, v in result["notes"].items())
    print(harness.table(f"Llama h={HIDDEN} layers={LAYERS} heads={HEADS}/{KV_HEADS} seq={SEQ} batch={BATCH}, mp=2: one training step",
                        ["variant", "ms/step", "vs DTensor", "vs transformers"], rows, note))
    harness.save("parallelize_hf", args.device, {"rounds": args.rounds, **result}, args.json)


if __name__ == "__main__":
    main()
