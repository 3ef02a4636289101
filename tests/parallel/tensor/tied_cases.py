"""Rank-side: Hugging Face models whose LM head is tied to the embedding (tie_word_embeddings), under mp, pp (every
schedule: each end's rank a copy of the weight, or one rank both) and sharding."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

import parallel
import strategy
from parallel.pipeline import next_token_loss
from rank_helpers import ADAMW_EPS, PARITY_ATOL, PARITY_RTOL, close, count_collectives, data_mean, init, \
    make_strategy, match_one_process, train_beside_one_process

VOCAB, SEQ, ROWS, PAD = 128, 16, 2, 0
FUSED = (True, False, True)  # mp_async_allreduce, mp_fused_linear_param_grad_add: the head accumulates into main_grad
SYNC = {"sync_param": True, "sync_grad": True, "sync_moment": True, "sync_mode": "average"}


def tied_model(arch: str, *, pad: bool = False, tied: bool = True, layers: int = 2):
    """A tiny Llama or Qwen2, its head tied to the embedding; `pad`: a pad token (the embedding's padding_idx)."""
    import transformers

    config_cls, model_cls = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
                             "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM)}[arch]
    config = config_cls(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                        tie_word_embeddings=tied, pad_token_id=PAD if pad else None)
    torch.manual_seed(0)
    model = model_cls(config)
    assert (model.lm_head.weight is model.model.embed_tokens.weight) == tied
    return model


def _rows(step: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Fixed rows, a quarter of their tokens the pad token (the row a padding_idx lookup leaves without gradient)."""
    gen = torch.Generator().manual_seed(500 + step)
    ids = torch.randint(0, VOCAB, (count, SEQ), generator=gen)
    ids[torch.rand(count, SEQ, generator=gen) < 0.25] = PAD
    return ids, ids.clone()


def parity(world: int, arch: str, flags, *, pad: bool = False, mp_config: dict | None = None,
           main_grad: bool = True) -> dict:
    """3 AdamW steps clipped at 1.0 beside one process: losses, clipped norms and the whole state (both names of the
    tied weight, equal); the two uses hold one Parameter on each rank. Under the fused flag the head accumulates into
    `main_grad` (`add_main_grad`), or without one into the `.grad` the lookup's gradient is then added to."""
    hcg = init(make_strategy(world, flags=flags, **(mp_config or {})))
    reference = tied_model(arch, pad=pad)
    pad_row = reference.model.embed_tokens.weight[PAD].detach().clone()
    model = parallel.parallelize(copy.deepcopy(reference))
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert isinstance(model.lm_head, parallel.ColumnParallelLinear)
    if hcg.resolved.mp.fused_linear_param_grad_add and main_grad:
        parallel.add_main_grad(model)
    out = train_beside_one_process(hcg, model, reference, _rows, rows_per_rank=ROWS, lr=1e-3, split=False)
    full = parallel.full_state_dict(model)
    assert torch.equal(full["lm_head.weight"], full["model.embed_tokens.weight"])
    out["pad_row_moved"] = not torch.equal(full["lm_head.weight"][PAD], pad_row)  # by the head's gradient
    return out


def parallel_cross_entropy(world: int) -> dict:
    """The head left split (colwise: logits [.., V / mp]) and ParallelCrossEntropy: the loss and every gradient of the
    tied weight's block are one process's (padding row included)."""
    hcg = init(make_strategy(world))
    reference = tied_model("qwen2", pad=True)
    model = copy.deepcopy(reference)
    layer = "model.layers.*."
    plan = {"model.embed_tokens": "embedding_rowwise", "lm_head": "colwise",
            **{f"{layer}self_attn.{p}": "colwise" for p in ("q_proj", "k_proj", "v_proj")},
            f"{layer}self_attn.o_proj": "rowwise", f"{layer}mlp.gate_proj": "colwise", f"{layer}mlp.up_proj": "colwise",
            f"{layer}mlp.down_proj": "rowwise"}
    parallel.parallelize(model, plan)
    ids, _ = _rows(0, ROWS)
    logits = model.lm_head(model.model(input_ids=ids).last_hidden_state)
    loss = parallel.ParallelCrossEntropy()(logits[:, :-1], ids[:, 1:])
    loss.backward()
    ref_logits = reference.lm_head(reference.model(input_ids=ids).last_hidden_state)
    ref_loss = F.cross_entropy(ref_logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
    ref_loss.backward()
    close(loss, ref_loss, "loss", PARITY_RTOL, PARITY_ATOL)
    weight = model.model.embed_tokens.weight
    expected = reference.model.embed_tokens.weight.grad.chunk(hcg.mp_size)[hcg.mp_rank]
    close(weight.grad, expected, "the tied weight's gradient", PARITY_RTOL, PARITY_ATOL)
    return {"logits": list(logits.shape), "pad_row_grad": float(reference.model.embed_tokens.weight.grad[PAD].abs().sum())}


def collectives(world: int) -> dict:
    """One training step's collectives, the tied model's and the untied one's: tying adds none."""
    counts = {}
    for tied in (True, False):
        init(make_strategy(world, flags=FUSED))
        model = parallel.parallelize(tied_model("qwen2", tied=tied))
        opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3), max_grad_norm=1.0)
        ids, labels = _rows(0, ROWS)
        with count_collectives() as seen:
            model(input_ids=ids, labels=labels).loss.backward()
            opt.step()
        counts["tied" if tied else "untied"] = dict(seen)
        parallel.destroy()
    return counts


def bf16_masters(world: int) -> dict:
    """Pure bf16: one fp32 master for the tied weight, which both uses read back after each step; replicas agree."""
    s = make_strategy(world, flags=FUSED, **SYNC)
    s.amp = True
    s.amp_configs.use_pure_bf16 = True
    s.amp_configs.dtype = "bfloat16"
    init(s)
    model = parallel.cast_for_amp(parallel.parallelize(tied_model("llama")))
    parallel.add_main_grad(model)
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-2), max_grad_norm=1.0)
    weight = model.model.embed_tokens.weight
    losses = []
    ids, labels = _rows(0, ROWS)
    for _ in range(3):
        with parallel.autocast():
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss))
    parallel.check_replicas(model, grads=False)
    masters = opt._master
    return {"losses": losses, "tied": model.lm_head.weight is weight, "dtype": str(weight.dtype),
            "masters": len(masters), "low_precision": len({id(p) for p in model.parameters() if p.dtype == torch.bfloat16}),
            "master_is_weight": torch.equal(masters[weight].to(torch.bfloat16), weight)}


def save_and_load(world: int, path: str) -> dict:
    """Saved at mp 2 (the tied weight and its Adam state once, under the embedding's name), loaded at dp 2 (mp 1):
    the next step there equals the next step at mp 2; a checkpoint holding both names (as saved before) loads too."""
    from torch.distributed.checkpoint import FileSystemReader

    from parallel.checkpoint import save_load

    ids, labels = _rows(0, ROWS)

    def step(model, opt) -> None:
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()

    def fresh():
        model = parallel.parallelize(tied_model("qwen2", pad=True))
        return model, parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3), max_grad_norm=1.0)

    init(make_strategy(world, flags=FUSED))
    model, opt = fresh()
    step(model, opt)
    parallel.save(path, model, opt, step=1)
    step(model, opt)
    expected = parallel.full_state_dict(model)
    parallel.destroy()
    keys = sorted(k for k in FileSystemReader(path).read_metadata().state_dict_metadata if "embed" in k or "lm_head" in k)

    init(make_strategy(1, dp=world))
    model, opt = fresh()
    parallel.load(path, model, opt)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    step(model, opt)  # the same rows on both dp ranks: their average is the mp 2 run's gradient
    resumed = parallel.full_state_dict(model)
    assert resumed.keys() == expected.keys()
    for name, value in expected.items():
        close(resumed[name], value, name, PARITY_RTOL, PARITY_ATOL)
    older = path + ".both_names"
    original = save_load._aliases
    save_load._aliases = lambda model: {}  # the format before: both names written
    try:
        parallel.save(older, model, opt, step=2)
    finally:
        save_load._aliases = original
    model, opt = fresh()
    parallel.load(older, model, opt)
    close(parallel.full_state_dict(model)["lm_head.weight"], resumed["lm_head.weight"], "older format", 0, 0)
    return {"keys": keys}


def refusal(world: int, plan: dict[str, str] | str, bias: bool) -> tuple[str, bool]:
    """A tied weight two uses would split differently: the error, and whether the model was left untouched."""
    init(make_strategy(world))
    model = tied_model("llama")
    if bias:
        head = nn.Linear(64, VOCAB, bias=True)
        head.weight = model.model.embed_tokens.weight
        model.lm_head = head
    before = [type(m) for m in model.modules()]
    try:
        parallel.parallelize(model, plan)
    except strategy.StrategyError as e:
        return str(e), [type(m) for m in model.modules()] == before
    raise AssertionError("no error")


def pp_parity(text: str, arch: str = "llama", *, steps: int = 4, clip: float | None = 1.0, layers: int = 4,
              pad: bool = False) -> dict:
    """train_batch beside one process running the same micro-batches (AdamW, clipped at `clip`; under gradient merge
    the reference steps every k-th batch, on their mean): losses, clipped norms and the whole state (both names of the
    tied weight, equal); then eval_batch's loss on a new batch. Where this rank holds one end, its copy is marked; where
    it holds both, the two uses are one Parameter."""
    from parallel.topology.tied_mark import tied_copy

    hcg = init(strategy.loads(text))
    p = hcg.resolved.pipeline
    reference = tied_model(arch, layers=layers, pad=pad)
    model = parallel.parallelize(copy.deepcopy(reference))
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3, eps=ADAMW_EPS),
                                           max_grad_norm=clip)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-3, eps=ADAMW_EPS)
    rows = p.micro_batch_size * p.accumulate_steps
    merge = hcg.resolved.gradient_merge.k_steps
    out: dict = {"losses": [], "ref_losses": [], "norms": [], "ref_norms": []}

    def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        ids = _rows(step, rows * hcg.data_size)[0]
        return ids, ids[hcg.data_rank * rows:(hcg.data_rank + 1) * rows]

    def ref_loss(ids: torch.Tensor, backward: bool) -> float:
        total = 0.0
        for chunk in ids.chunk(p.accumulate_steps * hcg.data_size):  # every data rank's micro-batches, averaged
            loss = next_token_loss(reference(input_ids=chunk).logits, chunk) / (p.accumulate_steps * hcg.data_size)
            if backward:
                (loss / merge).backward()
            total += float(loss.detach())
        return total

    for step in range(steps):
        ids, mine = batch(step)
        out["losses"].append(data_mean(model.train_batch((mine, mine), opt), hcg))
        out["ref_losses"].append(ref_loss(ids, True))
        if (step + 1) % merge:
            continue  # gradient merge: the update comes on the k-th batch
        if clip:
            out["norms"].append(float(opt.last_grad_norm))
            out["ref_norms"].append(float(torch.nn.utils.clip_grad_norm_(reference.parameters(), clip)))
        ref_opt.step()
        ref_opt.zero_grad()
    full = match_one_process(model, reference)
    assert torch.equal(full["lm_head.weight"], full["model.embed_tokens.weight"])
    parallel.check_replicas(model, grads=False)
    ids, mine = batch(steps)
    with torch.no_grad():
        out["eval"], out["ref_eval"] = data_mean(model.eval_batch((mine, mine)), hcg), ref_loss(ids, False)
    copies = {n: tied_copy(q) for n, q in model.named_parameters(remove_duplicate=False) if "embed" in n or "lm_head" in n}
    out["copies"] = {n: (c.key, c.primary) if c else None for n, c in copies.items()}
    out["stages"] = list(model.stage_ids)
    out["one_parameter"] = model.first and model.last and model.lm_head.weight is model.model.embed_tokens.weight
    return out


ONE_PROCESS = "hybrid_configs { dp_degree: 1 }"


def pp_checkpoint(text: str, path: str, *, save_at: int | None, load: bool = False, steps: int = 4) -> dict:
    """`steps` AdamW steps (clipped at 1.0) of a tied Qwen2 at `text`, one process (dp 1) or a pipeline, on 4 rows a
    step as 4 micro-batches: saved after step `save_at`, or first loaded from `path` (`load`: the steps from the
    checkpoint's on). Returns the gathered state after the save or the load, and after the last step."""
    hcg = init(strategy.loads(text))
    model = parallel.parallelize(tied_model("qwen2", pad=True))
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3, eps=ADAMW_EPS),
                                           max_grad_norm=1.0)
    out: dict = {}
    first = 0
    if load:
        first = parallel.load(path, model, opt).step
        out["loaded"] = parallel.full_state_dict(model)
    for step in range(first, steps):
        ids = _rows(step, 4)[0]
        if hcg.pp_size > 1:
            model.train_batch((ids, ids), opt)
        else:  # the pipeline's micro-batches, their losses averaged
            for chunk in ids.chunk(4):
                (next_token_loss(model(input_ids=chunk).logits, chunk) / 4).backward()
            opt.step()
            opt.zero_grad()
        if step + 1 == save_at:
            parallel.save(path, model, opt, step=save_at)
            out["saved"] = parallel.full_state_dict(model)
    out["after"] = parallel.full_state_dict(model)
    if save_at is not None:
        from torch.distributed.checkpoint import FileSystemReader

        out["keys"] = sorted(k for k in FileSystemReader(path).read_metadata().state_dict_metadata
                             if "embed" in k or "lm_head" in k)
    return out


def sharding_parity(world: int, arch: str, stage: int) -> dict:
    """3 AdamW steps clipped at 1.0 at sharding_degree `world` (stage `stage`) beside one process: the embedding and the
    head in one FSDP2 unit (the root), one Parameter; losses, clipped norms and the whole state."""
    s = make_strategy(1)
    s.hybrid_configs.sharding_degree = world
    s.hybrid_configs.sharding_configs.stage = stage
    hcg = init(s)
    reference = tied_model(arch)
    model = parallel.parallelize(copy.deepcopy(reference))
    from torch.distributed.fsdp import FSDPModule

    weight = model.lm_head.weight
    assert weight is model.model.embed_tokens.weight
    units = [m for m in model.modules() if isinstance(m, FSDPModule)
             and any(fp.sharded_param is weight for fp in m._get_fsdp_state()._fsdp_param_group.fsdp_params)]
    out = train_beside_one_process(hcg, model, reference, _rows, rows_per_rank=ROWS, lr=1e-3, split=False)
    out["units"] = [type(m).__name__ for m in units]
    return out


def pp_bf16_and_replicas(text: str) -> dict:
    """Pure bf16 at pp: each end's rank one fp32 master for its copy, the copies equal after 3 steps (check_replicas
    compares them); then the last stage's copy nudged: check_replicas names the weight, on both ends."""
    s = strategy.loads(text)
    s.amp = True
    s.amp_configs.use_pure_bf16 = True
    s.amp_configs.dtype = "bfloat16"
    init(s)
    model = parallel.parallelize(tied_model("llama", layers=2))
    model = parallel.cast_for_amp(model)
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-2), max_grad_norm=1.0)
    ids = _rows(0, 4)[0]
    losses = [model.train_batch((ids, ids), opt) for _ in range(3)]
    compared = parallel.check_replicas(model, grads=False)
    (name, weight), = [(n, q) for n, q in model.named_parameters() if "embed" in n or "lm_head" in n]
    masters = [m for q, m in opt._master.items() if q is weight]
    if not model.first:
        with torch.no_grad():
            weight[0, 0] += 1
    try:
        parallel.check_replicas(model, grads=False)
    except parallel.ReplicaMismatchError as e:
        return {"losses": losses, "compared": compared, "masters": len(masters), "dtype": str(weight.dtype),
                "error": str(e)}
    raise AssertionError("no mismatch found")


def finetune_example(path: str, steps: int) -> dict:
    """examples/finetune_hf.py's tied Qwen2 (--model-type qwen2) and loop under the example strategy at `path`: this
    rank's stages, the losses, and the copies of the tied weight equal after the steps (check_replicas)."""
    import argparse
    import importlib
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "examples"))
    finetune = importlib.import_module("finetune_hf")
    hcg = init(strategy.load(path))
    model, _ = finetune.build_model(None, SEQ, "qwen2")
    assert model.lm_head.weight is model.model.embed_tokens.weight
    model = parallel.parallelize(model)
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3), max_grad_norm=1.0)
    rows = hcg.resolved.pipeline.micro_batch_size * hcg.resolved.pipeline.accumulate_steps * hcg.data_size
    args = argparse.Namespace(steps=steps, batch_size=rows, seq_len=SEQ)
    data = torch.randint(0, 256, (4096,), generator=torch.Generator().manual_seed(0))
    summary = finetune.train(model, opt, data, args, hcg, progress=False)
    return {"losses": summary["losses"], "stages": list(model.stage_ids), "compared": parallel.check_replicas(model)}


def pp_collectives(text: str) -> dict:
    """The collectives of two train_batch calls at `text` (a pipeline under gradient merge k 2: one update), a tied
    model's and an untied one's (send/recv between stages are not collectives)."""
    counts = {}
    for tied in (True, False):
        init(strategy.loads(text))
        model = parallel.parallelize(tied_model("llama", tied=tied))
        opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3), max_grad_norm=1.0)
        ids = _rows(0, 4)[0]
        with count_collectives() as seen:
            for _ in range(2):
                model.train_batch((ids, ids), opt)
        counts["tied" if tied else "untied"] = dict(seen)
        parallel.destroy()
    return counts
