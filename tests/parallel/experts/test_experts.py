"""ep (expert parallelism) on gloo ranks: each rank holds its block of every MoE layer's experts, tokens travel by
all-to-all, and the training is one process's."""

from __future__ import annotations

import pytest

import expert_cases as cases
import split_sequence_cases as split


@pytest.mark.parametrize(("world", "text", "kind"), [
    (2, cases.ep_text(2), "qwen3_moe"),
    (4, cases.ep_text(4), "qwen3_moe"),
    (4, cases.ep_text(2, dp=4), "qwen3_moe"),
    (2, cases.ep_text(2), "mixtral"),
    (4, "hybrid_configs { dp_degree: 1 sharding_degree: 4 sharding_configs { stage: 3 } ep_degree: 2 }", "qwen3_moe"),
    (4, 'hybrid_configs { dp_degree: 2 sharding_degree: 2 ep_degree: 2 order: ["dp", "sharding", "moe_sharding", "pp", '
        '"sep", "cp", "ep", "mp"] }', "qwen3_moe"),
    # Paddle's MoE order (sharding outside dp): the experts' state sharded over moe_sharding, stage 3
    (4, "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } ep_degree: 2 moe_sharding_degree: 2 }",
     "qwen3_moe"),
    (4, "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } ep_degree: 2 moe_sharding_degree: 2 }",
     "mixtral"),
    # ep over the mp ranks: each routes half of the tokens they share (dp 2 beside: the experts' replicas)
    (4, "hybrid_configs { mp_degree: 2 ep_degree: 2 }", "qwen3_moe"),
    (4, "hybrid_configs { mp_degree: 2 ep_degree: 4 }", "mixtral"),
], ids=["qwen3_moe_ep2", "qwen3_moe_ep4", "qwen3_moe_ep2_dp4", "mixtral_ep2", "ep2_sharding4_stage3",
        "ep2_dp2_sharding2_stage1", "qwen3_moe_ep2_moe_sharding2_stage3", "mixtral_ep2_moe_sharding2_stage3",
        "qwen3_moe_ep2_mp2_dp2", "mixtral_ep4_mp2"])
def test_a_small_moe_with_uneven_routing_trains_as_one_process(pools, world, text, kind):
    result = pools(world).run(cases.parity, text, kind, timeout=240)[0]
    assert result["losses"] == pytest.approx(result["ref_losses"], rel=1e-5)
    assert result["norms"] == pytest.approx(result["ref_norms"], rel=1e-5)
    ep = int(text.split("ep_degree: ")[1].split()[0])
    moe_sharding = int(text.split("moe_sharding_degree: ")[1].split()[0]) if "moe_sharding_degree" in text else 1
    assert result["local_experts"] == {8 // ep}
    assert result["held_rows"] == {8 // ep // moe_sharding}  # FSDP2's shard of the block


MOE_SHARDED = "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } ep_degree: 2 moe_sharding_degree: 2 }"


@pytest.mark.parametrize(("saved_at", "saved_text", "loaded_at", "loaded_text", "resharded"), [
    (2, cases.ep_text(2), 1, cases.ep_text(1), "dp 2 -> 1, ep 2 -> 1"),
    (2, cases.ep_text(2), 4, cases.ep_text(4), "dp 2 -> 4, ep 2 -> 4"),
    (4, MOE_SHARDED, 1, cases.ep_text(1), "dp 2 -> 1, sharding 2 -> 1, ep 2 -> 1"),
    (2, cases.ep_text(2), 4, MOE_SHARDED, "sharding 1 -> 2"),
], ids=["ep2_to_1", "ep2_to_4", "moe_sharding2_to_1", "ep2_to_moe_sharding2"])
def test_a_checkpoint_moves_between_ep_degrees_exactly(pools, tmp_path, saved_at, saved_text, loaded_at, loaded_text,
                                                       resharded):
    import torch

    path = str(tmp_path / "ckpt")
    saved = pools(saved_at).run(cases.save_moe, saved_text, path, timeout=120)[0]
    loaded = pools(loaded_at).run(cases.load_moe, loaded_text, path, timeout=120)[0]
    assert loaded["resharded"] == resharded
    assert loaded["full"].keys() == saved.keys()
    assert all(torch.equal(loaded["full"][k], v) for k, v in saved.items())
    ep = int(loaded_text.split("ep_degree: ")[1].split()[0])
    held = 8 // ep // (2 if "moe_sharding" in loaded_text else 1)
    assert loaded["expert_state_rows"] == {held}  # Adam's state: this rank's rows of its block of experts only


def test_what_ep_cannot_split_is_refused_naming_what_to_do(pools):
    out = pools(2).run(cases.refusals, cases.ep_text(2))[0]
    assert out["plain"].startswith("hybrid_configs.ep_degree 2 splits experts, but Sequential has no module parallelize "
                                   "recognises as experts (3-D parameters gate_up_proj")
    assert out["five"] == ("model.layers.0.mlp.experts has 5 experts, which ep_degree 2 does not divide: each ep rank "
                          "holds an equal block of them; change ep_degree")
    assert pools(4).run(cases.ep_with_pp)[0] == (
        "hybrid_configs.ep_degree 2 with hybrid_configs.pp_degree 2: experts split over ep are not run inside pipeline "
        "stages here (ep runs beside dp, sharding and moe_sharding, mp, amp, gradient merge, recompute and "
        "checkpoints); set one of them to 1")


def test_the_ep_example_strategy_fine_tunes_a_qwen3_moe_as_data_parallelism_does(pools):
    """The same two data ranks with every expert on both (dp 2) or half on each (ep2.prototxt): the same losses. (Not
    one process on both rows: the router's aux loss is per batch, not a mean of per-row terms.)"""
    from conftest import ROOT

    replicated = pools(2).run(cases.finetune_losses, "hybrid_configs { dp_degree: 2 }", 3, "qwen3_moe")[0]
    path = str(ROOT / "examples" / "strategies" / "ep2.prototxt")
    assert pools(2).run(cases.finetune_losses, path, 3, "qwen3_moe")[0] == pytest.approx(replicated, rel=1e-5)


def test_a_rank_that_receives_no_tokens_still_joins_the_backward_of_a_module_of_ones_own(pools):
    """A module of one's own with the experts interface, every token routed to ep rank 0's block: rank 1 computes
    nothing, and its backward still answers rank 0's all-to-alls (it hung the gloo ranks before)."""
    results = pools(2).run(cases.own_experts_one_sided, cases.ep_text(2), timeout=60)
    assert [r["received_nothing"] for r in results] == [False, True]


def test_recompute_and_gradient_merge_under_ep_train_as_one_process(pools):
    text = cases.ep_text(2, extra="recompute: true gradient_merge: true gradient_merge_configs { k_steps: 2 }")
    result = pools(2).run(split.options_parity, text, 4, "qwen3_moe", timeout=240)[0]
    assert result["merge"] == 2 and result["recompute"] and result["wrapped"] == 2  # both decoder layers
    assert result["losses"] == pytest.approx(result["ref_losses"], rel=1e-5)


def test_bf16_autocast_under_ep_trains_as_one_process_up_to_bf16_rounding(pools):
    amp = "amp: true amp_configs { use_pure_bf16: false dtype: 'bfloat16' }"
    single = pools(1).run(split.amp_losses, "hybrid_configs { dp_degree: 1 } " + amp, 3, "qwen3_moe")[0]
    losses = pools(2).run(split.amp_losses, cases.ep_text(2, extra=amp), 3, "qwen3_moe")[0]
    assert losses == pytest.approx(single, rel=2e-2)


def test_an_expert_block_unused_on_one_replica_is_still_averaged_over_its_replicas(pools):
    text = "hybrid_configs { dp_degree: 1 sharding_degree: 4 ep_degree: 2 }"  # dp 1: no dp zero-fill covers it
    results = pools(4).run(cases.own_experts_unused_on_one_replica, text, timeout=60)
    unused = [r for r in results if not r["had_grad"]]
    assert [(r["edp_rank"], r["ep_rank"]) for r in unused] == [(0, 1)]  # only there; its edp replica had one
