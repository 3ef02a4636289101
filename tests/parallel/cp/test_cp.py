"""cp (context parallelism) on gloo ranks: load-balanced chunks, attention over the whole sequence, the same training
as one process with fewer activations, composed with dp, mp, sharding, amp, gradient merge, recompute, checkpoints."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conftest import assert_parity
import torch

import parallel
import strategy
import split_sequence_cases as split
import example_cases as examples


def cp_text(cp: int, *, dp: int = 1, mp: int = 1, sharding: int = 1, stage: int = 3, extra: str = "") -> str:
    text = f"{extra} hybrid_configs {{ dp_degree: {dp} mp_degree: {mp} cp_degree: {cp} sharding_degree: {sharding}"
    return text + (f" sharding_configs {{ stage: {stage} }} }}" if sharding > 1 else " }")


def _hcg(cp: int, rank: int) -> SimpleNamespace:
    return SimpleNamespace(cp_size=cp, cp_rank=rank, sep_size=1, sep_rank=0)


def test_the_split_gives_each_cp_rank_chunks_r_and_2cp_minus_1_minus_r():
    ids = torch.arange(16).unsqueeze(0)
    shares = [parallel.split_sequence({"input_ids": ids}, hcg=_hcg(2, r)) for r in range(2)]
    assert shares[0]["position_ids"].tolist() == [[0, 1, 2, 3, 12, 13, 14, 15]]
    assert shares[1]["position_ids"].tolist() == [[4, 5, 6, 7, 8, 9, 10, 11]]
    assert shares[0]["input_ids"].tolist() == shares[0]["position_ids"].tolist()
    # targets shifted before the cut: position 3's target is token 4 (on the other rank), the row's end has none
    assert shares[0]["shift_labels"].tolist() == [[1, 2, 3, 4, 13, 14, 15, -100]]
    assert int(shares[1]["num_items_in_batch"]) == 15


@pytest.mark.parametrize(("cp", "length"), [(2, 16), (4, 64), (4, 8), (3, 36)])
def test_the_split_is_balanced_every_cp_rank_attends_over_as_many_key_positions(cp, length):
    """Under a causal mask the query at position p attends over p + 1 keys: the ranks' sums agree within 1."""
    ids = torch.zeros(1, length, dtype=torch.long)
    work = [int((parallel.split_sequence({"input_ids": ids}, hcg=_hcg(cp, r))["position_ids"] + 1).sum())
            for r in range(cp)]
    assert max(work) - min(work) <= 1, work
    covered = torch.cat([parallel.split_sequence({"input_ids": ids}, hcg=_hcg(cp, r))["position_ids"][0]
                         for r in range(cp)])
    assert sorted(covered.tolist()) == list(range(length))


def test_a_length_2cp_does_not_divide_is_an_error_naming_both():
    with pytest.raises(strategy.StrategyError) as e:
        parallel.split_sequence({"input_ids": torch.zeros(1, 14, dtype=torch.long)}, hcg=_hcg(2, 0))
    assert str(e.value) == ("the rows are 14 tokens long, which hybrid_configs.cp_degree 2 does not cut into 2 × "
                            "cp_degree = 4 equal chunks (cp rank r holds chunks r and 3 − r); make the length a "
                            "multiple of 4")
    assert e.value.field == "hybrid_configs.cp_degree"


@pytest.mark.parametrize(("world", "text"), [
    (2, cp_text(2)),
    (4, cp_text(4)),
    (4, cp_text(2, dp=2)),
    (4, cp_text(2, mp=2)),
    (4, cp_text(2, sharding=2, stage=3)),
], ids=["cp2", "cp4", "dp2_x_cp2", "mp2_x_cp2", "sharding2_x_cp2"])
def test_a_gqa_llama_with_uneven_prompt_labels_trains_as_one_process(pools, world, text):
    assert_parity(pools(world).run(split.llama_parity, text, timeout=240)[0], attention="parallel_cp")


def test_a_llama_with_3_heads_and_1_kv_head_that_sep_cannot_split_trains_under_cp2(pools):
    assert_parity(pools(2).run(split.llama_parity, cp_text(2), heads=3, kv_heads=1, timeout=240)[0], attention="parallel_cp")


@pytest.mark.parametrize(("cp", "causal"), [(2, True), (4, True), (2, False)], ids=["cp2", "cp4", "cp2_not_causal"])
def test_a_plain_model_calling_cp_attention_matches_one_process(pools, cp, causal):
    assert pools(cp).run(split.plain_parity, cp_text(cp), causal)[0] == {"ok": True}


def test_recompute_and_gradient_merge_under_cp_train_as_one_process(pools):
    text = cp_text(2, extra="recompute: true gradient_merge: true gradient_merge_configs { k_steps: 2 }")
    result = pools(2).run(split.options_parity, text, timeout=240)[0]
    assert result["merge"] == 2 and result["recompute"] and result["wrapped"] == 2  # both decoder layers
    assert result["losses"] == pytest.approx(result["ref_losses"], rel=1e-5)


def test_bf16_autocast_under_cp_trains_as_one_process_up_to_bf16_rounding(pools):
    amp = "amp: true amp_configs { use_pure_bf16: false dtype: 'bfloat16' }"
    single = pools(1).run(split.amp_losses, cp_text(1, extra=amp))[0]
    losses = pools(2).run(split.amp_losses, cp_text(2, extra=amp))[0]
    assert losses == pytest.approx(single, rel=2e-2)  # bf16 rounds the chunks' attention and projections apart


def test_a_model_of_ones_own_that_never_calls_cp_attention_is_refused_at_its_first_forward(pools):
    out = pools(2).run(split.own_without_sep_attention, cp_text(2))[0]
    assert out == {"field": "hybrid_configs.cp_degree", "error": (
        "hybrid_configs.cp_degree > 1 gives each rank two chunks of every row, but Own's forward never called "
        "parallel.cp_attention, so its attention saw only this rank's chunks: it is neither a Hugging Face model whose "
        "attention parallelize switches (through transformers' AttentionInterface) nor a model that attends through "
        "parallel.cp_attention; call parallel.cp_attention(q, k, v) where it attends (a drop-in for "
        "F.scaled_dot_product_attention), or set cp_degree: 1")}


def test_pp_with_cp_is_refused_naming_both_before_any_change(pools):
    text = "hybrid_configs { pp_degree: 2 cp_degree: 2 } pipeline_configs { accumulate_steps: 2 }"
    out = pools(4).run(split.pp_with_sep_refused, text)[0]
    assert out == {"field": "hybrid_configs.cp_degree", "unchanged": True, "error": (
        "hybrid_configs.pp_degree 2 with hybrid_configs.cp_degree 2: the pipeline does not carry cp's global positions "
        "and shifted labels between stages yet; set one of them to 1")}


def test_each_cp2_rank_saves_at_most_0_6_of_the_activations_of_one_process(pools):
    one = pools(1).run(split.saved_activations, cp_text(1))[0]["saved"]
    half = pools(2).run(split.saved_activations, cp_text(2))[0]["saved"]
    assert half / one <= 0.6


@pytest.mark.parametrize(("saved_at", "loaded_at"), [(2, 1), (1, 2)], ids=["cp2_to_1", "cp1_to_2"])
def test_a_checkpoint_moves_between_cp_degrees_exactly(pools, tmp_path, saved_at, loaded_at):
    path = str(tmp_path / "ckpt")
    saved = pools(saved_at).run(split.save_llama, cp_text(saved_at), path, timeout=120)[0]
    loaded = pools(loaded_at).run(split.load_llama, cp_text(loaded_at), path, timeout=120)[0]
    assert loaded["resharded"] == f"cp {saved_at} -> {loaded_at}"
    assert all(torch.equal(loaded["full"][k], v) for k, v in saved.items()) and loaded["full"].keys() == saved.keys()


def test_the_demo_through_cp_attention_trains_as_one_process(pools):
    single = pools(1).run(examples.demo_losses, cp_text(1), 4)[0]
    assert pools(2).run(examples.demo_losses, cp_text(2), 4)[0] == pytest.approx(single, rel=1e-5)


def test_the_cp_example_strategy_fine_tunes_as_one_process(pools):
    from conftest import ROOT

    single = pools(1).run(examples.finetune_losses, cp_text(1), 3)
    path = ROOT / "examples" / "strategies" / "cp2.prototxt"
    assert pools(2).run(examples.finetune_losses, str(path), 3)[0] == pytest.approx(single[0], rel=1e-5)


@pytest.mark.parametrize("kernel", ["cpu_prefix_attention", "lower_right_attention", "masked_prefix_attention"])
@pytest.mark.parametrize(("past", "kv_heads", "dtype"), [(0, 2, torch.float32), (2, 2, torch.float32),
                                                          (3, 1, torch.float32), (2, 4, torch.bfloat16)])
def test_each_prefix_kernel_is_causal_sdpa_aligned_to_the_lower_right(kernel, past, kv_heads, dtype):
    """A chunk's queries over the keys up to their own: the CPU flash blocks merged by log-sum-exp (what runs on CPU),
    the CUDA kernels' lower-right bias (run here through its CPU fallback) and the mask, against SDPA on the whole
    causal sequence: outputs and gradients."""
    import warnings

    from parallel.cp import attention

    torch.manual_seed(past)
    chunk, d = 8, 16
    q = torch.randn(2, 4, (past + 1) * chunk, d, dtype=dtype, requires_grad=True)
    k, v = (torch.randn(2, kv_heads, (past + 1) * chunk, d, dtype=dtype, requires_grad=True) for _ in range(2))
    whole = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3, enable_gqa=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the causal bias on CPU warns that it falls back from the CUDA kernels
        mine = getattr(attention, kernel)(q[:, :, -chunk:], k, v, 0.3)
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-6}
    torch.testing.assert_close(mine, whole[:, :, -chunk:], **tol)
    grad = torch.randn_like(mine)
    got = torch.autograd.grad(mine, (q, k, v), grad)
    want = torch.autograd.grad(whole[:, :, -chunk:], (q, k, v), grad)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **tol)
