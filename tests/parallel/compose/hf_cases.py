"""Rank-side: Hugging Face models (built from small configs, random init) parallelised by their own plan."""

from __future__ import annotations

import copy

import torch

import parallel
import strategy
from hf_models import hf_model
from rank_helpers import close, init, make_strategy

VOCAB, SEQ, BATCH, STEPS = 128, 16, 2, 3
RTOL, ATOL = 1e-5, 1e-5


def _batch(step: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(300 + step))


def parity(world: int, arch: str, flags, heads: int = 4, kv_heads: int = 2, sync: bool = False, sp: dict | None = None) -> dict:
    """Loss, replicated parameters' gradients and all parameters after each optimizer step match one process."""
    extra = {"sync_param": True, "sync_grad": True, "sync_moment": True, "sync_mode": "average"} if sync else {}
    extra |= sp or {}
    hcg = init(make_strategy(world, flags=flags, **extra))
    reference = hf_model(arch, heads, kv_heads)
    model = parallel.parallelize(copy.deepcopy(reference))
    if hcg.resolved.mp.fused_linear_param_grad_add:
        parallel.add_main_grad(model)
    # SGD with momentum: the moments are state sync_moment acts on, and unlike Adam's first steps (about
    # lr * sign(grad)) the update does not magnify rounding in gradients that are nearly zero.
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
    opt = parallel.HybridParallelOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    losses = []
    ids = _batch(0)  # one batch, so the loss must fall
    for step in range(STEPS):
        ref_loss = reference(input_ids=ids, labels=ids).loss
        ref_loss.backward()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        close(loss, ref_loss, f"step {step} loss", RTOL, ATOL)
        opt.clip_grad_norm_(1e9)  # finishes the gradients (sums sequence-parallel norms) without clipping
        for name, p in model.named_parameters():
            if not parallel.is_sharded(p):
                grad = p.main_grad if getattr(p, "main_grad", None) is not None else p.grad
                close(grad, reference.get_parameter(name).grad, f"step {step} grad of replicated {name}", RTOL, ATOL)
        opt.step()
        opt.zero_grad()
        ref_opt.step()
        ref_opt.zero_grad()
        for name, p in model.named_parameters():
            full = reference.get_parameter(name)
            dim = getattr(p, "mp_shard_dim", None)
            expected = full if dim is None else full.chunk(hcg.mp_size, dim=dim)[hcg.mp_rank]
            close(p, expected, f"step {step} parameter {name}", RTOL, ATOL)
        losses.append(float(loss))
    kinds = sorted({type(m).__name__ for m in model.modules() if type(m).__module__.startswith("parallel.")})
    return {"losses": losses, "layers": kinds}


def plan_error(world: int, plan) -> tuple[str, bool]:
    """The error a bad plan gives, and whether the model was left untouched."""
    init(make_strategy(world))
    model = hf_model("llama")
    before = [type(m) for m in model.modules()]
    try:
        parallel.parallelize(model, plan)
    except Exception as e:  # noqa: BLE001 - the test checks the type and the message
        return f"{type(e).__name__}: {e}", [type(m) for m in model.modules()] == before
    raise AssertionError("no error")


def plan_from_strategy(world: int) -> list[str]:
    rules = "".join(f'tp_plan {{ pattern: "model.layers.*.mlp.{name}" style: {style} }} '
                    for name, style in [("up_proj", "COLWISE"), ("gate_proj", "COLWISE"), ("down_proj", "ROWWISE")])
    init(strategy.loads(f"hybrid_configs {{ mp_degree: {world} mp_configs {{ {rules}}} }}"))
    model = parallel.parallelize(hf_model("llama"))
    return sorted(name for name, m in model.named_modules() if isinstance(m, (parallel.ColumnParallelLinear, parallel.RowParallelLinear)))


def broadcast_inputs(world: int) -> list[float]:
    """With need_broadcast_data on, a rank's different batch is replaced by the first rank's."""
    init(make_strategy(world))
    model = parallel.parallelize(hf_model("llama"))
    ids = _batch(torch.distributed.get_rank())  # every rank loads a different batch
    with torch.no_grad():
        return [float(model(input_ids=ids, labels=ids).loss)]


def recompute_with_a_padding_mask(path: str) -> dict:
    """Paddle's llama_tp2_sp.prototxt with sequence parallelism, a batch with padding (so transformers makes a mask):
    recomputing every decoder layer gives the same loss and gradients as keeping the activations (the replay runs
    without the key/value cache, which it would otherwise extend a second time)."""
    results = {}
    for on in (False, True):
        init(strategy.load(path, overrides=["hybrid_configs.mp_configs.sequence_parallel=true", f"recompute={str(on).lower()}"]))
        model = parallel.parallelize(hf_model("llama"))
        ids = _batch(0)
        mask = torch.ones_like(ids)
        mask[0, :3] = 0  # left padding in the first row
        loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
        loss.backward()
        results[on] = (float(loss), {n: p.grad.clone() for n, p in model.named_parameters()})
        parallel.destroy()
    for name, g in results[False][1].items():
        close(results[True][1][name], g, f"grad {name}", rtol=1e-5, atol=1e-7)
    return {"losses": [results[False][0], results[True][0]]}


def paddle_llama_strategy_recomputes_every_decoder_layer(path: str) -> dict:
    """Paddle's llama_tp2_sp.prototxt (`recompute: true`, no names) with sequence parallelism: every decoder layer
    is recomputed, as Paddle means, and a step trains."""
    hcg = init(strategy.load(path, overrides=["hybrid_configs.mp_configs.sequence_parallel=true"]))
    model = parallel.parallelize(hf_model("llama"))
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3))
    ids = _batch(0)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    recomputed = sorted(n for n, m in model.named_modules() if getattr(m, "_parallel_recompute", False))
    return {"recomputed": recomputed, "sp": hcg.resolved.mp.sequence_parallel, "loss": float(loss)}
