"""sep (Ulysses) sequence parallelism on gloo ranks: the same training as one process, half the activations."""

from __future__ import annotations

import pytest

import tp_sep_cases as cases


def _assert_parity(result: dict) -> None:
    assert result["losses"] == pytest.approx(result["ref_losses"], rel=1e-5)  # the shares sum to the loss
    assert result["norms"] == pytest.approx(result["ref_norms"], rel=1e-5)
    assert result["attention"] == "parallel_sep"


@pytest.mark.parametrize(("world", "text"), [
    (2, cases.sep_text(2)),
    (4, cases.sep_text(4)),
    (4, cases.sep_text(2, dp=2)),
    (4, cases.sep_text(2, mp=2)),
    (4, cases.sep_text(2, sharding=2, stage=3)),
], ids=["sep2", "sep4", "dp2_x_sep2", "mp2_x_sep2", "sharding2_x_sep2"])
def test_a_gqa_llama_with_uneven_prompt_labels_trains_as_one_process(pools, world, text):
    _assert_parity(pools(world).run(cases.llama_parity, text, timeout=240)[0])


@pytest.mark.parametrize("sep", [2, 4])
def test_a_plain_model_calling_sep_attention_matches_one_process(pools, sep):
    assert pools(sep).run(cases.plain_parity, cases.sep_text(sep))[0] == {"ok": True}


def test_each_sep2_rank_saves_about_half_the_activations_of_one_process(pools):
    one = pools(1).run(cases.saved_activations, cases.sep_text(1))[0]["saved"]
    half = pools(2).run(cases.saved_activations, cases.sep_text(2))[0]["saved"]
    assert 0.4 < half / one < 0.6


def test_a_length_or_heads_the_degrees_do_not_divide_is_a_clear_error(pools):
    out = pools(2).run(cases.split_errors, cases.sep_text(2))[0]
    assert out["length"] == ("the rows are 15 tokens long, which hybrid_configs.sep_degree 2 does not divide; make the "
                             "length a multiple of 2")
    assert out["heads"] == ("LlamaForCausalLM has 3 attention heads, which mp_degree × sep_degree = 1 × 2 = 2 does not "
                            "divide: each sep rank attends over heads / (mp × sep) of them; change the degrees")
    assert out["unchanged"]
