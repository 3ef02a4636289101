"""Rank-side cases of tensor_init_seed: the default streams seeded alike, each rank's model-parallel stream, dropout
on replicated and on split activations, recompute replaying both."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import parallel
import strategy
from rank_helpers import init

VOCAB, HIDDEN, ROWS, SEQ = 32, 16, 4, 8


def streams(text: str) -> dict:
    """Each rank seeds its own way first; then what the default and the model-parallel streams draw."""
    torch.manual_seed(1000 + torch.distributed.get_rank())
    hcg = init(strategy.loads(text))
    first = torch.rand(4)
    with parallel.model_parallel_rng():
        forked = torch.rand(4)
    after = torch.rand(4)
    return {"first": first, "forked": forked, "after": after, "mp_rank": hcg.mp_rank, "pp_rank": hcg.pp_rank,
            "pp_size": hcg.pp_size, "mp_seed": hcg.mp_rng.seed if hcg.mp_rng else None}


class _Model(nn.Module):
    """Dropout on replicated activations (after the embedding's all-reduce) and on split ones (the column layer's
    output, this rank's features, inside model_parallel_rng)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = parallel.VocabParallelEmbedding(VOCAB, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)
        self.up = parallel.ColumnParallelLinear(HIDDEN, 4 * HIDDEN, gather_output=False)
        self.down = parallel.RowParallelLinear(4 * HIDDEN, HIDDEN, input_is_parallel=True)
        self.head = parallel.ColumnParallelLinear(HIDDEN, VOCAB, gather_output=True)
        self.masks: list[torch.Tensor] = []

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = F.dropout(self.embed(ids), p=0.5, training=self.training)  # replicated: the shared stream
        h = F.gelu(self.up(self.norm(x)))
        with parallel.model_parallel_rng():  # split features: this rank's own stream
            kept = F.dropout(torch.ones_like(h), p=0.5, training=self.training)
        self.masks.append(kept.detach() != 0)
        return self.head(x + self.down(h * kept))


def train_with_dropout(text: str, steps: int = 3) -> dict:
    """A model with dropout on replicated and split activations, `steps` SGD steps with sync_param off; whether the
    replicas agree after (check_replicas), and this rank's first split-dropout mask."""
    torch.manual_seed(1000 + torch.distributed.get_rank())  # a script that seeds each rank its own way
    init(strategy.loads(text))
    model = _Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(0, VOCAB, (ROWS, SEQ), generator=torch.Generator().manual_seed(0))
    for _ in range(steps):
        logits = model(ids)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
    try:
        parallel.check_replicas(model, grads=False)
        agree = True
    except parallel.ReplicaMismatchError:
        agree = False
    return {"agree": agree, "mask": model.masks[0], "weights": {n: p.detach().clone() for n, p in model.named_parameters()}}


class _Recomputed(nn.Module):
    """A block whose forward draws split-feature dropout from the model-parallel stream."""

    def __init__(self) -> None:
        super().__init__()
        self.up = parallel.ColumnParallelLinear(HIDDEN, 4 * HIDDEN, gather_output=False)
        self.down = parallel.RowParallelLinear(4 * HIDDEN, HIDDEN, input_is_parallel=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        with parallel.model_parallel_rng():
            h = F.dropout(h, p=0.5, training=self.training)
        return self.down(F.dropout(F.gelu(h), p=0.3, training=self.training))


def recompute_gradients(text: str, recompute: bool) -> dict:
    """The gradients of one step of a block with dropout on both streams, recomputed or kept; and the streams' next
    draws (recompute must leave them where a plain step leaves them)."""
    hcg = init(strategy.loads(text))
    torch.manual_seed(3)
    block = nn.Sequential(_Recomputed())
    if recompute:
        assert parallel.apply_recompute(block, hcg=hcg, checkpoints=("0",)) == ["0"]
    x = torch.randn(ROWS, SEQ, HIDDEN, generator=torch.Generator().manual_seed(1), requires_grad=True)
    block(x).square().sum().backward()
    with parallel.model_parallel_rng():
        forked = torch.rand(3)
    return {"grads": {n: p.grad.clone() for n, p in block.named_parameters()}, "x": x.grad.clone(),
            "next": torch.rand(3), "forked": forked}


def hf_attention_dropout(text: str) -> dict:
    """A Hugging Face Llama with attention dropout, split over mp by parallelize: its attention draws from the
    model-parallel stream only (the default one is where it was after a forward), and 2 SGD steps keep the replicas
    equal without sync_param."""
    import transformers

    torch.manual_seed(1000 + torch.distributed.get_rank())
    hcg = init(strategy.loads(text))
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=SEQ, attention_dropout=0.5, tie_word_embeddings=False)
    model = parallel.parallelize(transformers.LlamaForCausalLM(config))
    model.train()
    ids = torch.randint(0, VOCAB, (ROWS, SEQ), generator=torch.Generator().manual_seed(0))
    default, forked = torch.get_rng_state(), hcg.mp_rng.state_dict()["cpu"] if hcg.mp_rng else None
    model(input_ids=ids, labels=ids).loss.backward()
    untouched = torch.equal(torch.get_rng_state(), default)
    advanced = forked is not None and not torch.equal(hcg.mp_rng.state_dict()["cpu"], forked)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.step()
        opt.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
    parallel.check_replicas(model, grads=False)  # raises on a mismatch
    return {"default_untouched": untouched, "forked_advanced": advanced}
