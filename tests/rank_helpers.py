"""Helpers used inside spawned ranks: strategies by flags, quiet init, comparisons and op counting."""

from __future__ import annotations

import warnings

import torch

import parallel
import strategy
from parallel.introspect import OpCounter, count_collectives, graph_nodes  # noqa: F401  (re-exported for the cases)

FLAG_NAMES = ("mp_async_allreduce", "mp_skip_c_identity", "mp_fused_linear_param_grad_add")
RTOL, ATOL = 1e-5, 1e-6

# Parity after AdamW steps (a parallel model against one process on the same rows). The parallel run sums the same
# float32 terms in another order (reduce-scatters, cp's gathers, recompute, pipeline stages, another CPU's kernels),
# so a gradient g differs by Δg ≈ 1e-7 × the size of its summed terms, not of g, which may cancel to nearly 0: up to
# ~1e-9 here. Adam steps by lr·m/(√v + eps) ≈ lr·g/(|g| + eps), whose slope in g is at most lr/eps (where |g| ≲ eps):
# Δg moves a weight by up to lr·Δg/eps a step, 1e-7 at lr 1e-3 and eps 1e-5, so the suites' 2-4 steps stay within
# PARITY_ATOL. Below 1e-5 the bound outgrows it (whether some |g| falls within eps decides how far): measured over
# these suites, eps 1e-8 and 1e-6 each left a weight ~1e-6 off (3.8e-6 under virtual pp at 1e-6), eps 1e-5 at most
# 1.6e-7. Above eps a gradient steps ~lr by its sign, below it lr·g/eps, so a gradient off by a factor shows more,
# not less: a gradient merge that forgot to average (cp recompute case) moved 476 of a layer's 2048 weights by up to
# 2e-4 at eps 1e-5, one by 4e-6 at 1e-8. Another lr, more steps or a larger Δg scale the bound (model_cases' lr,
# expert_cases' EPS).
ADAMW_EPS = 1e-5
PARITY_RTOL, PARITY_ATOL = 1e-5, 1e-6


def tiny_llama(layers: int, *, vocab: int, seq: int):
    """A small Hugging Face Llama (h 32, 4 heads over 2 key/value heads, untied), the same weights on every rank."""
    import transformers

    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=seq,
                                      tie_word_embeddings=False)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def make_strategy(mp: int, dp: int = 1, flags: tuple[bool, bool, bool] = (False, False, False), **mp_config) -> strategy.DistributedStrategy:
    s = strategy.DistributedStrategy()
    s.hybrid_configs.dp_degree = dp
    s.hybrid_configs.mp_degree = mp
    for name, value in zip(FLAG_NAMES, flags):
        setattr(s.hybrid_configs.mp_configs, name, value)
    for name, value in mp_config.items():
        setattr(s.hybrid_configs.mp_configs, name, value)
    return s


def init(s: strategy.DistributedStrategy, policy: str = "strict") -> parallel.HybridGroup:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", strategy.StrategyWarning)
        return parallel.init(s, policy=policy)


def data_mean(value: torch.Tensor | float, hcg: parallel.HybridGroup) -> float:
    """The whole batch's loss from this rank's: sep (cp) shares summed, then the mean over the data ranks (dp ×
    sharding)."""
    import torch.distributed as dist

    t = torch.as_tensor(value, dtype=torch.float64).detach().clone()
    for axis in ("sep", "cp"):
        if getattr(hcg, f"{axis}_size") > 1:
            dist.all_reduce(t, group=hcg.group(axis))
    for axis in ("dp", "sharding"):
        if getattr(hcg, f"{axis}_size") > 1:
            dist.all_reduce(t, group=hcg.group(axis))
            t /= getattr(hcg, f"{axis}_size")
    return float(t)


def prompt_rows(step: int, count: int, *, vocab: int, seq: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows and labels whose prompt (-100) ends at a different place in each row (2 + row + step tokens): the
    targets fall unevenly across chunks, ranks and micro-batches."""
    g = torch.Generator().manual_seed(seed + step)
    ids = torch.randint(0, vocab, (count, seq), generator=g)
    labels = ids.clone()
    for r in range(count):
        labels[r, : 2 + r + step] = -100
    return ids, labels


def close(actual: torch.Tensor, expected: torch.Tensor, what: str, rtol: float = RTOL, atol: float = ATOL) -> None:
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


def match_one_process(model, reference, *, atol: float = PARITY_ATOL) -> dict[str, torch.Tensor]:
    """`model`'s gathered state dict against `reference`'s: the same names, the same values (PARITY_RTOL, `atol`: see
    ADAMW_EPS), else AssertionError naming the entry; returns the gathered state dict."""
    full, expected = parallel.full_state_dict(model), reference.state_dict()
    assert full.keys() == expected.keys(), sorted(set(expected) ^ set(full))
    for name, value in expected.items():
        close(full[name], value, name, rtol=PARITY_RTOL, atol=atol)
    return full


def shard(t: torch.Tensor, dim: int, hcg: parallel.HybridGroup) -> torch.Tensor:
    return t.chunk(hcg.mp_size, dim=dim)[hcg.mp_rank]


class RecordedWait:
    """Wraps a collective's work handle so a test sees when the backward waits on it."""

    def __init__(self, work, events: list[str]) -> None:
        self.work, self.events = work, events

    def wait(self):
        self.events.append("wait")
        return self.work.wait()


def train_beside_one_process(hcg: parallel.HybridGroup, model, reference, rows, *, rows_per_rank: int, lr: float,
                             steps: int = 3, clip: float | None = 1.0, eps: float = ADAMW_EPS, split: bool = True,
                             match: bool = True) -> dict:
    """AdamW steps of `model` (parallelised) and of `reference` (one process) on the same batches: each data rank
    its `rows_per_rank` rows of `rows(step, count)` (ids, labels), fed as `split_sequence` pieces (`split`) or whole;
    the reference's loss the mean over the data ranks of each one's. After the steps the parameters must be the
    reference's (match_one_process, else AssertionError; `match` False leaves that to the caller); returns each step's loss and gradient norm, both sides."""
    opt = parallel.HybridParallelOptimizer(torch.optim.AdamW(model.parameters(), lr=lr, eps=eps), max_grad_norm=clip)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=lr, eps=eps)
    out: dict[str, list[float]] = {"losses": [], "ref_losses": [], "norms": [], "ref_norms": []}
    n = rows_per_rank
    for step in range(steps):
        ids, labels = rows(step, n * hcg.data_size)
        mine = {"input_ids": ids[hcg.data_rank * n:(hcg.data_rank + 1) * n],
                "labels": labels[hcg.data_rank * n:(hcg.data_rank + 1) * n]}
        share = model(**(parallel.split_sequence(mine) if split else mine)).loss
        share.backward()
        opt.step()
        opt.zero_grad()
        out["losses"].append(data_mean(share, hcg))
        out["norms"].append(float(opt.last_grad_norm) if clip else 0.0)
        ref = sum(reference(input_ids=ids[r * n:(r + 1) * n], labels=labels[r * n:(r + 1) * n]).loss
                  for r in range(hcg.data_size)) / hcg.data_size
        ref.backward()
        out["ref_losses"].append(float(ref))
        out["ref_norms"].append(float(torch.nn.utils.clip_grad_norm_(reference.parameters(), clip)) if clip else 0.0)
        ref_opt.step()
        ref_opt.zero_grad()
    if match:
        match_one_process(model, reference)
    parallel.check_replicas(model, grads=False)
    return out


def pp_text(pp: int, *, schedule: str = "1F1B", virtual: int = 1, dualpipev: bool = False, acc: int = 4,
            mbs: int = 1, dp: int = 1, mp: int = 1, sharding: int = 1, stage: int = 1) -> str:
    """A pipeline strategy (the pipeline tests', and the tied-weight ones under pp): pp stages of `schedule` over `acc`
    micro-batches of `mbs`, with the other degrees given."""
    pp_configs = f"virtual_pp_degree: {virtual}" + (" use_dualpipev: true" if dualpipev else "")
    text = (f"hybrid_configs {{ dp_degree: {dp} mp_degree: {mp} pp_degree: {pp} sharding_degree: {sharding} "
            f"pp_configs {{ {pp_configs} }}")
    text += f" sharding_configs {{ stage: {stage} }} }}" if sharding > 1 else " }"
    return text + f' pipeline_configs {{ micro_batch_size: {mbs} accumulate_steps: {acc} schedule_mode: "{schedule}" }}'


def load_quietly(path: str, model, opt):
    """parallel.load without its resharding warnings (the cases assert what it returns): the LoadInfo."""
    import warnings

    import parallel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return parallel.load(path, model, opt)
