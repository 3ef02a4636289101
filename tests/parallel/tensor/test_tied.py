"""Tied embeddings (issue 43): under mp the vocabulary-split embedding and LM head share one Parameter on each rank;
under pp the first and last stage's ranks each hold a copy, kept one weight; training, clipping, amp, sharding and
checkpoints treat it as one weight, as one process does."""

from __future__ import annotations

import pytest

import tied_cases as cases
from rank_helpers import PARITY_ATOL, PARITY_RTOL
from rank_helpers import pp_text

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


# Under pp the first stage's rank holds the embedding, the last stage's the head, each a copy of the tied weight; a V
# (DualPipeV) puts both ends on pp rank 0, where they stay one Parameter.
PIPELINES = {
    "1f1b-llama": (2, pp_text(2), "llama"),
    "1f1b-qwen2-pad": (2, pp_text(2), "qwen2", {"pad": True}),  # the padding row: the head's gradient only
    "interleaved": (2, pp_text(2, virtual=2), "llama"),
    "dualpipev": (2, pp_text(2, dualpipev=True), "qwen2"),
    "mp2-pp2": (4, pp_text(2, mp=2), "qwen2"),
    "pp2-sharding2-stage2": (4, pp_text(2, sharding=2, stage=2), "llama"),
    "pp2-sharding2-stage1": (4, pp_text(2, sharding=2, stage=1), "qwen2"),
    "pp2-sharding2-stage3": (4, pp_text(2, sharding=2, stage=3), "qwen2"),
    "dp2-pp2-dp-comm-overlap": (4, pp_text(2, dp=2).replace("virtual_pp_degree: 1", "dp_comm_overlap: true"), "llama"),
    "pp4": (4, pp_text(4), "qwen2"),  # the embedding groups are pairs of the pp groups' ranks
    "1f1b-gradient-merge": (2, pp_text(2) + " gradient_merge: true gradient_merge_configs { k_steps: 2 avg: true }",
                            "llama"),
}


# `make test` runs one of each kind (a schedule with virtual stages, the V, mp, FSDP2 at stage 3, dp's overlap, pp 4,
# merge, padding); FSDP2's stages 1 and 2 inside a pipeline are the same check, under `make test-long`.
LONG_PIPELINES = {"pp2-sharding2-stage1", "pp2-sharding2-stage2"}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("variant", [v if v not in LONG_PIPELINES else pytest.param(v, marks=pytest.mark.long)
                                     for v in PIPELINES])
def test_a_tied_model_pipelined_trains_and_evaluates_as_one_process(pools, variant):
    """4 AdamW steps clipped at 1.0 (under gradient merge k 2, 2 updates): losses, the global norm before clipping (the
    tied weight counted once) and the whole state are one process's, both names of the tied weight equal; eval_batch's
    loss too."""
    world, text, arch, *options = PIPELINES[variant]
    outs = pools(world).run(cases.pp_parity, text, arch, timeout=280, **(options[0] if options else {}))
    out = outs[0]
    assert out["losses"] == pytest.approx(out["ref_losses"], rel=PARITY_RTOL)
    assert out["norms"] == pytest.approx(out["ref_norms"], rel=PARITY_RTOL)
    assert min(out["ref_norms"]) > 1.0  # the clip acted on every step
    assert out["eval"] == pytest.approx(out["ref_eval"], rel=PARITY_RTOL)
    if variant == "dualpipev":  # stage 0 and 3 on pp rank 0: one Parameter, no copies
        assert outs[0]["one_parameter"] and all(c is None for o in outs for c in o["copies"].values())
    else:
        end = max(s for o in outs for s in o["stages"])
        for o in outs:  # the first stage's rank, the last's, and those between (pp 4), which hold neither
            assert o["copies"] == ({"model.embed_tokens.weight": ("model.embed_tokens.weight", True)} if 0 in o["stages"]
                                   else {"lm_head.weight": ("model.embed_tokens.weight", False)} if end in o["stages"]
                                   else {})


def _equal(actual: dict, expected: dict, rtol: float = 0, atol: float = 0) -> None:
    assert actual.keys() == expected.keys()
    for name, value in expected.items():
        cases.close(actual[name], value, name, rtol, atol)


SAVED_ONCE = ["model.model.embed_tokens.weight", "optimizer.state.model.embed_tokens.weight.exp_avg",
              "optimizer.state.model.embed_tokens.weight.exp_avg_sq", "optimizer.state.model.embed_tokens.weight.step"]


@pytest.mark.timeout(300)
def test_a_tied_model_saved_at_pp2_x_mp2_loads_in_one_process_bit_equal_and_steps_as_one_process(pools, tmp_path):
    """The tied weight and its Adam state once, under the embedding's name; loaded in one process the whole state is
    the saved one bit for bit, and the 4th step there is the pipeline's 4th step."""
    path = str(tmp_path / "ckpt")
    saved = pools(4).run(cases.pp_checkpoint, pp_text(2, mp=2), path, save_at=3, timeout=280)[0]
    assert saved["keys"] == SAVED_ONCE
    loaded = pools(1).run(cases.pp_checkpoint, cases.ONE_PROCESS, path, save_at=None, load=True, timeout=200)[0]
    _equal(loaded["loaded"], saved["saved"])
    _equal(loaded["after"], saved["after"], PARITY_RTOL, PARITY_ATOL)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("world", "text"), [(2, pp_text(2)), (4, pp_text(2, mp=2)),
                                             (4, pp_text(2, sharding=2, stage=2))],
                         ids=["pp2", "pp2-mp2", "pp2-sharding2"])
def test_a_tied_model_saved_in_one_process_resumes_at_pp2_as_one_process_continues(pools, tmp_path, world, text):
    """Both copies and the last stage's copy's Adam state come from the one weight saved: the 4th step at pp 2 (with
    mp 2, or sharding 2 whose data ranks take the same rows) is one process's 4th step."""
    path = str(tmp_path / "ckpt")
    one = pools(1).run(cases.pp_checkpoint, cases.ONE_PROCESS, path, save_at=3, timeout=200)[0]
    assert one["keys"] == SAVED_ONCE
    resumed = pools(world).run(cases.pp_checkpoint, text, path, save_at=None, load=True, timeout=280)[0]
    _equal(resumed["loaded"], one["saved"])
    _equal(resumed["after"], one["after"], PARITY_RTOL, PARITY_ATOL)


@pytest.mark.timeout(240)
def test_a_tied_model_at_sharding2_stage3_trains_as_one_process(pools):
    """The embedding and the head share one Parameter in one FSDP2 unit (the root), gathered and reduced once."""
    out = pools(2).run(cases.sharding_parity, 2, "qwen2", 3, timeout=200)[0]
    assert out["losses"] == pytest.approx(out["ref_losses"], rel=PARITY_RTOL)
    assert out["norms"] == pytest.approx(out["ref_norms"], rel=PARITY_RTOL)
    assert min(out["ref_norms"]) > 1.0
    assert out["units"] == ["FSDPQwen2ForCausalLM"]  # the root


@pytest.mark.timeout(200)
def test_pure_bf16_at_pp2_keeps_a_master_per_copy_and_check_replicas_compares_the_copies(pools):
    outs = pools(2).run(cases.pp_bf16_and_replicas, pp_text(2), timeout=180)
    for out in outs:
        assert out["masters"] == 1 and out["dtype"] == "torch.bfloat16"
        assert out["losses"][-1] < out["losses"][0]
        assert out["error"].startswith("model.embed_tokens.weight differs across the first and last stage's copies")


@pytest.mark.timeout(300)
def test_the_finetune_example_trains_its_tied_qwen2_at_mp2_x_pp2(pools):
    """examples/strategies/pp2_mp2.prototxt (interleaved, 2 chunks a rank) with the example's tied Qwen2."""
    from conftest import ROOT

    results = pools(4).run(cases.finetune_example, str(ROOT / "examples" / "strategies" / "pp2_mp2.prototxt"), 3,
                           timeout=280)
    first = results[0]
    assert [r["stages"] for r in results] == [[0, 2], [0, 2], [1, 3], [1, 3]]
    assert all(r["losses"] == first["losses"] for r in results) and first["losses"][-1] < first["losses"][0]


@pytest.mark.timeout(200)
def test_a_weight_tied_across_stages_costs_one_all_reduce_an_update(pools):
    """Under gradient merge k 2 (two train_batch calls, one update): the copies' gradients are summed once."""
    counts = pools(2).run(cases.pp_collectives, pp_text(2) + " gradient_merge: true gradient_merge_configs { k_steps: 2 }",
                          timeout=180)[0]
    tied, untied = counts["tied"], counts["untied"]
    assert tied.pop("all_reduce") == untied.pop("all_reduce") + 1 and tied == untied
