"""sep (Ulysses) sequence parallelism on gloo ranks: the same training as one process, half the activations."""

from __future__ import annotations

import pytest

from conftest import assert_parity

import sep_cases as cases
import split_sequence_cases as split
import example_cases as examples


@pytest.mark.parametrize(("world", "text"), [
    (2, cases.sep_text(2)),
    (4, cases.sep_text(4)),
    (4, cases.sep_text(2, dp=2)),
    (4, cases.sep_text(2, mp=2)),
    (4, cases.sep_text(2, sharding=2, stage=3)),
], ids=["sep2", "sep4", "dp2_x_sep2", "mp2_x_sep2", "sharding2_x_sep2"])
def test_a_gqa_llama_with_uneven_prompt_labels_trains_as_one_process(pools, world, text):
    assert_parity(pools(world).run(split.llama_parity, text, timeout=240)[0], attention="parallel_sep")


@pytest.mark.parametrize("sep", [2, 4])
def test_a_plain_model_calling_sep_attention_matches_one_process(pools, sep):
    assert pools(sep).run(split.plain_parity, cases.sep_text(sep))[0] == {"ok": True}


@pytest.mark.parametrize(("world", "text"), [(2, cases.sep_text(2)), (4, cases.sep_text(2, mp=2))],
                         ids=["sep2", "mp2_x_sep2"])
def test_parallelize_trains_a_model_of_ones_own_attending_through_sep_attention_as_one_process(pools, world, text):
    result = pools(world).run(cases.own_parity, text)[0]
    assert result["losses"] == pytest.approx(result["ref_losses"], rel=1e-5)


def test_a_model_of_ones_own_that_never_calls_sep_attention_is_refused_at_its_first_forward(pools):
    out = pools(2).run(split.own_without_sep_attention, cases.sep_text(2))[0]
    assert out == {"field": "hybrid_configs.sep_degree", "error": (
        "hybrid_configs.sep_degree > 1 gives each rank a chunk of every row, but Own's forward never called "
        "parallel.sep_attention, so its attention saw only this rank's chunk: it is neither a Hugging Face model whose "
        "attention parallelize switches (through transformers' AttentionInterface) nor a model that attends through "
        "parallel.sep_attention; call parallel.sep_attention(q, k, v) where it attends (a drop-in for "
        "F.scaled_dot_product_attention), or set sep_degree: 1")}


def test_a_first_forward_that_raises_leaves_no_check_behind():
    """The check's list of sep_attention calls is current only during a checked forward, even one that raised."""
    from types import SimpleNamespace

    import torch
    from torch import nn

    import parallel
    from parallel.sep.attention import CALLS
    from parallel.sep.required import require_sep_attention

    one = SimpleNamespace(sep_size=1)  # at sep_degree 1 sep_attention is SDPA and reads only the degree

    class Attend(nn.Module):
        def forward(self, q: torch.Tensor, fail: bool = False) -> torch.Tensor:
            if fail:
                raise RuntimeError("out of memory")
            return parallel.sep_attention(q, q, q, hcg=one)

    model = Attend()
    require_sep_attention(model)
    q = torch.zeros(1, 2, 4, 8)
    with pytest.raises(RuntimeError, match="out of memory"):
        model(q, fail=True)
    model(q)  # attends through sep_attention: the check passes and goes
    assert CALLS.get() is None
    assert not model._forward_hooks and not model._forward_pre_hooks


def test_pp_with_sep_is_refused_naming_both_before_any_change(pools):
    out = pools(4).run(split.pp_with_sep_refused)[0]
    assert out == {"field": "hybrid_configs.sep_degree", "unchanged": True, "error": (
        "hybrid_configs.pp_degree 2 with hybrid_configs.sep_degree 2: the pipeline does not carry sep's global positions "
        "and shifted labels between stages yet; set one of them to 1")}


def test_each_sep2_rank_saves_about_half_the_activations_of_one_process(pools):
    one = pools(1).run(split.saved_activations, cases.sep_text(1))[0]["saved"]
    half = pools(2).run(split.saved_activations, cases.sep_text(2))[0]["saved"]
    assert 0.4 < half / one < 0.6


def test_a_length_or_heads_the_degrees_do_not_divide_is_a_clear_error(pools):
    out = pools(2).run(cases.split_errors, cases.sep_text(2))[0]
    assert out["length"] == ("the rows are 15 tokens long, which hybrid_configs.sep_degree 2 does not divide; make the "
                             "length a multiple of 2")
    assert out["heads"] == ("LlamaForCausalLM has 3 attention heads, which mp_degree × sep_degree = 1 × 2 = 2 does not "
                            "divide: each sep rank attends over heads / (mp × sep) of them; change the degrees")
    assert out["unchanged"]


def test_the_demo_through_sep_attention_trains_as_one_process(pools):
    single = pools(1).run(examples.demo_losses, cases.sep_text(1), 4)[0]
    assert pools(2).run(examples.demo_losses, cases.sep_text(2), 4)[0] == pytest.approx(single, rel=1e-5)


def test_the_sep_example_strategy_fine_tunes_as_one_process(pools):
    from conftest import ROOT

    single = pools(1).run(examples.finetune_losses, cases.sep_text(1), 3)
    path = ROOT / "examples" / "strategies" / "sep2.prototxt"
    assert pools(2).run(examples.finetune_losses, str(path), 3)[0] == pytest.approx(single[0], rel=1e-5)


@pytest.mark.parametrize(("saved_at", "loaded_at"), [(2, 1), (1, 2)], ids=["sep2_to_1", "sep1_to_2"])
def test_a_checkpoint_moves_between_sep_degrees_exactly(pools, tmp_path, saved_at, loaded_at):
    import torch

    path = str(tmp_path / "ckpt")
    saved = pools(saved_at).run(split.save_llama, cases.sep_text(saved_at), path, timeout=120)[0]
    loaded = pools(loaded_at).run(split.load_llama, cases.sep_text(loaded_at), path, timeout=120)[0]
    assert loaded["resharded"] == f"sep {saved_at} -> {loaded_at}"
    assert loaded["full"].keys() == saved.keys()
    assert all(torch.equal(loaded["full"][k], v) for k, v in saved.items())
