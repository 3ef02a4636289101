"""Tied embeddings under tensor parallelism (issue 43, mp > 1): the vocabulary-split embedding and LM head share one
Parameter on each rank, and training, clipping, amp and checkpoints treat it as one weight, as one process does."""

from __future__ import annotations

import pytest

import tp_tied_cases as cases
from rank_helpers import PARITY_RTOL

PLAIN = (False, False, False)
VARIANTS = {
    "llama": dict(arch="llama", flags=PLAIN),
    "llama-fused-sync": dict(arch="llama", flags=cases.FUSED, mp_config=cases.SYNC),
    "qwen2": dict(arch="qwen2", flags=PLAIN),
    "qwen2-fused": dict(arch="qwen2", flags=cases.FUSED),
    "qwen2-fused-without-main-grad": dict(arch="qwen2", flags=cases.FUSED, main_grad=False),
    "qwen2-pad": dict(arch="qwen2", flags=PLAIN, pad=True),
    "qwen2-pad-fused-sequence-parallel": dict(arch="qwen2", flags=cases.FUSED, pad=True,
                                              mp_config={"sequence_parallel": True}),
}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_tied_model_at_mp2_trains_as_one_process(pools, variant):
    """3 AdamW steps clipped at 1.0: the losses, the global norm before clipping and the whole state (both names of the
    tied weight, equal) are one process's; with a pad token the padding row still learns through the head."""
    out = pools(2).run(cases.parity, 2, timeout=200, **VARIANTS[variant])[0]
    assert out["losses"] == pytest.approx(out["ref_losses"], rel=PARITY_RTOL)
    assert out["norms"] == pytest.approx(out["ref_norms"], rel=PARITY_RTOL)
    assert min(out["ref_norms"]) > 1.0  # the clip acted on every step
    assert out["pad_row_moved"]


@pytest.mark.timeout(120)
def test_parallel_cross_entropy_over_a_split_tied_head_is_one_processs_loss(pools):
    out = pools(2).run(cases.parallel_cross_entropy, 2)[0]
    assert out["logits"] == [cases.ROWS, cases.SEQ, cases.VOCAB // 2]
    assert out["pad_row_grad"] > 0  # the head's gradient on the padding row, which the shard matched


@pytest.mark.timeout(120)
def test_tying_adds_no_collective(pools):
    counts = pools(2).run(cases.collectives, 2)[0]
    assert counts["tied"] == counts["untied"]


@pytest.mark.timeout(120)
def test_pure_bf16_keeps_one_master_for_the_tied_weight(pools):
    out = pools(2).run(cases.bf16_masters, 2)[0]
    assert out["tied"] and out["dtype"] == "torch.bfloat16" and out["master_is_weight"]
    assert out["masters"] == out["low_precision"]
    assert out["losses"][-1] < out["losses"][0]


@pytest.mark.timeout(180)
def test_a_checkpoint_holds_the_tied_weight_once_and_resumes_at_another_layout(pools, tmp_path):
    out = pools(2).run(cases.save_and_load, 2, str(tmp_path / "ckpt"), timeout=160)[0]
    assert out["keys"] == ["model.model.embed_tokens.weight", "optimizer.state.model.embed_tokens.weight.exp_avg",
                           "optimizer.state.model.embed_tokens.weight.exp_avg_sq",
                           "optimizer.state.model.embed_tokens.weight.step"]


AUTO = "auto"
HEAD_ROWS = {"model.embed_tokens": "embedding_rowwise", "lm_head": "rowwise"}
EMBEDDING_ONLY = {"model.embed_tokens": "embedding_rowwise"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("plan", "bias", "expected"), [
    (AUTO, True, "lm_head.weight is shared with model.embed_tokens.weight (tied weights), and Linear under rule "
                 "'lm_head' -> colwise_gather_output has a bias"),
    (HEAD_ROWS, False, "Linear under rule 'lm_head' -> rowwise does not split it by vocabulary rows"),
    (EMBEDDING_ONLY, False, "lm_head.weight is shared with model.embed_tokens.weight (tied weights), and Linear matches "
                            "no rule (it would stay whole while another use is split)"),
], ids=["biased-head", "head-split-by-rows", "head-left-whole"])
def test_a_tied_weight_its_uses_would_split_differently_is_refused_by_name(pools, plan, bias, expected):
    message, untouched = pools(2).run(cases.refusal, 2, plan, bias)[0]
    assert expected in message and "untie them (e.g. tie_word_embeddings=False) or replicate both" in message
    assert untouched
