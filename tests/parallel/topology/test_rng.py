"""tensor_init_seed as Paddle's dygraph fleet reads it at mp_degree > 1: every rank's default generators seeded with
it, a model-parallel stream per rank (seed + 1 + mp_rank · pp_degree + pp_rank) behind parallel.model_parallel_rng(),
dropout on replicated activations alike on every mp rank, recompute replaying both streams."""

from __future__ import annotations

import pytest
import torch

import strategy
import rng_cases as cases
from parallel.topology.rng import ModelParallelRNG

MP2 = "hybrid_configs { mp_degree: 2 } tensor_parallel_configs { tensor_init_seed: 42 }"
MP2_PP2 = "hybrid_configs { mp_degree: 2 pp_degree: 2 } tensor_parallel_configs { tensor_init_seed: 42 }"


def _draws(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(4, generator=g), torch.rand(4, generator=g)


@pytest.mark.parametrize(("world", "text"), [(2, MP2), (4, MP2_PP2)], ids=["mp2", "mp2_pp2"])
def test_the_seed_sets_every_ranks_default_stream_and_its_own_model_parallel_stream(pools, world, text):
    first, after = _draws(42)
    for r in pools(world).run(cases.streams, text):
        assert torch.equal(r["first"], first) and torch.equal(r["after"], after)  # the block left it where it was
        own = 42 + 1 + r["mp_rank"] * r["pp_size"] + r["pp_rank"]
        assert r["mp_seed"] == own and torch.equal(r["forked"], _draws(own)[0])


def test_without_a_seed_the_scripts_seeds_stay_and_the_ranks_agree_on_the_model_parallel_base(pools):
    results = pools(2).run(cases.streams, "hybrid_configs { mp_degree: 2 }")
    for rank, r in enumerate(results):
        assert torch.equal(r["first"], _draws(1000 + rank)[0])  # what the script seeded
    assert results[1]["mp_seed"] - results[0]["mp_seed"] == 1  # one base, + 1 + mp_rank
    assert not torch.equal(results[0]["forked"], results[1]["forked"])


def test_at_mp_degree_1_nothing_is_seeded_and_the_fork_changes_nothing(pools):
    r = pools(1).run(cases.streams, "tensor_parallel_configs { tensor_init_seed: 42 }")[0]
    assert r["mp_seed"] is None
    g = torch.Generator().manual_seed(1000)
    assert [torch.equal(r[k], torch.rand(4, generator=g)) for k in ("first", "forked", "after")] == [True] * 3


def test_dropout_on_replicated_activations_keeps_the_replicas_equal_without_sync_param(pools):
    seeded = pools(2).run(cases.train_with_dropout, MP2)
    assert all(r["agree"] for r in seeded)  # check_replicas passed after 3 steps
    assert not torch.equal(seeded[0]["mask"], seeded[1]["mask"])  # split features: each rank its own mask
    unseeded = pools(2).run(cases.train_with_dropout, "hybrid_configs { mp_degree: 2 }")
    assert not any(r["agree"] for r in unseeded)  # the ranks' own seeds: the replicas drift apart


def test_recompute_replays_the_model_parallel_stream_and_leaves_both_streams_where_a_plain_step_does(pools):
    kept = pools(2).run(cases.recompute_gradients, MP2, False)
    redone = pools(2).run(cases.recompute_gradients, "recompute: true " + MP2, True)
    for a, b in zip(kept, redone):
        assert torch.equal(a["x"], b["x"]) and torch.equal(a["next"], b["next"]) and torch.equal(a["forked"], b["forked"])
        for name, grad in a["grads"].items():
            assert torch.equal(grad, b["grads"][name]), name


def test_the_stream_saves_and_restores_its_state():
    rng = ModelParallelRNG(7)
    with rng.fork():
        torch.rand(5)
    saved = rng.state_dict()
    with rng.fork():
        want = torch.rand(3)
    other = ModelParallelRNG(0)
    other.load_state_dict(saved)
    with other.fork():
        assert torch.equal(torch.rand(3), want)


def test_explain_calls_the_seed_in_effect_at_mp_2_and_of_no_effect_at_1():
    at2 = strategy.resolve(strategy.loads(MP2), world_size=2)
    assert at2.tensor_init_seed == 42 and not any("tensor_init_seed" in n for n in at2.notes)
    at1 = strategy.resolve(strategy.loads("tensor_parallel_configs { tensor_init_seed: 42 }"), world_size=2)
    assert at1.tensor_init_seed == -1
    assert "tensor_parallel_configs.tensor_init_seed is set but has no effect: hybrid_configs.mp_degree is 1." in at1.notes


def test_a_hugging_face_models_split_heads_drop_attention_from_the_model_parallel_stream(pools):
    for r in pools(2).run(cases.hf_attention_dropout, MP2):
        assert r["default_untouched"] and r["forked_advanced"]
