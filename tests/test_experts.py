"""ep (expert parallelism) on gloo ranks: each rank holds its block of every MoE layer's experts, tokens travel by
all-to-all, and the training is one process's."""

from __future__ import annotations

import pytest

import tp_expert_cases as cases


@pytest.mark.parametrize(("world", "text", "kind"), [
    (2, cases.ep_text(2), "qwen3_moe"),
    (4, cases.ep_text(4), "qwen3_moe"),
    (4, cases.ep_text(2, dp=4), "qwen3_moe"),
    (2, cases.ep_text(2), "mixtral"),
    (4, "hybrid_configs { dp_degree: 1 sharding_degree: 4 sharding_configs { stage: 3 } ep_degree: 2 }", "qwen3_moe"),
    (4, 'hybrid_configs { dp_degree: 2 sharding_degree: 2 ep_degree: 2 order: ["dp", "sharding", "moe_sharding", "pp", '
        '"sep", "cp", "ep", "mp"] }', "qwen3_moe"),  # FSDP2's hybrid sharding needs dp outside sharding
], ids=["qwen3_moe_ep2", "qwen3_moe_ep4", "qwen3_moe_ep2_dp4", "mixtral_ep2", "ep2_sharding4_stage3",
        "ep2_dp2_sharding2_stage1"])
def test_a_small_moe_with_uneven_routing_trains_as_one_process(pools, world, text, kind):
    result = pools(world).run(cases.parity, text, kind, timeout=240)[0]
    assert result["losses"] == pytest.approx(result["ref_losses"], rel=1e-5)
    assert result["norms"] == pytest.approx(result["ref_norms"], rel=1e-5)
    ep = int(text.split("ep_degree: ")[1].split()[0])
    assert result["local_experts"] == {8 // ep}


@pytest.mark.parametrize(("saved_at", "loaded_at"), [(2, 1), (2, 4)], ids=["ep2_to_1", "ep2_to_4"])
def test_a_checkpoint_moves_between_ep_degrees_exactly(pools, tmp_path, saved_at, loaded_at):
    import torch

    path = str(tmp_path / "ckpt")
    saved = pools(saved_at).run(cases.save_moe, cases.ep_text(saved_at), path, timeout=120)[0]
    loaded = pools(loaded_at).run(cases.load_moe, cases.ep_text(loaded_at), path, timeout=120)[0]
    assert loaded["resharded"] == f"dp {saved_at} -> {loaded_at}, ep {saved_at} -> {loaded_at}"
    assert loaded["full"].keys() == saved.keys()
    assert all(torch.equal(loaded["full"][k], v) for k, v in saved.items())
    assert loaded["expert_state_rows"] == {8 // loaded_at}  # Adam's state: this rank's block of experts only


def test_what_ep_cannot_split_is_refused_naming_what_to_do(pools):
    out = pools(2).run(cases.refusals, cases.ep_text(2))[0]
    assert out["plain"].startswith("hybrid_configs.ep_degree 2 splits experts, but Sequential has no module parallelize "
                                   "recognises as experts (3-D parameters gate_up_proj")
    assert out["five"] == ("model.layers.0.mlp.experts has 5 experts, which ep_degree 2 does not divide: each ep rank "
                          "holds an equal block of them; change ep_degree")
    assert pools(4).run(cases.ep_with_mp)[0] == (
        "hybrid_configs.ep_degree 2 with hybrid_configs.mp_degree 2: experts split over ep do not compose with mp here "
        "yet (ep runs beside dp, sharding, amp, gradient merge, recompute and checkpoints); set one of them to 1")


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
    import tp_cp_cases

    text = cases.ep_text(2, extra="recompute: true gradient_merge: true gradient_merge_configs { k_steps: 2 }")
    result = pools(2).run(tp_cp_cases.options_parity, text, 4, "qwen3_moe", timeout=240)[0]
    assert result["merge"] == 2 and result["recompute"] and result["wrapped"] == 2  # both decoder layers
    assert result["losses"] == pytest.approx(result["ref_losses"], rel=1e-5)


def test_bf16_autocast_under_ep_trains_as_one_process_up_to_bf16_rounding(pools):
    import tp_cp_cases

    amp = "amp: true amp_configs { use_pure_bf16: false dtype: 'bfloat16' }"
    single = pools(1).run(tp_cp_cases.amp_losses, "hybrid_configs { dp_degree: 1 } " + amp, 3, "qwen3_moe")[0]
    losses = pools(2).run(tp_cp_cases.amp_losses, cases.ep_text(2, extra=amp), 3, "qwen3_moe")[0]
    assert losses == pytest.approx(single, rel=2e-2)


def test_an_expert_block_unused_on_one_replica_is_still_averaged_over_its_replicas(pools):
    text = "hybrid_configs { dp_degree: 1 sharding_degree: 4 ep_degree: 2 }"  # dp 1: no dp zero-fill covers it
    results = pools(4).run(cases.own_experts_unused_on_one_replica, text, timeout=60)
    unused = [r for r in results if not r["had_grad"]]
    assert [(r["edp_rank"], r["ep_rank"]) for r in unused] == [(0, 1)]  # only there; its edp replica had one
