"""Pipeline parallelism on torch.distributed.pipelining (gloo ranks): every schedule trains as one process."""

from __future__ import annotations

import pytest

from conftest import assert_parity
import torch

import pipeline_cases as cases
from rank_helpers import pp_text


@pytest.mark.parametrize(("text", "schedule", "stages"), [
    (pp_text(2), "Schedule1F1B", [[0], [1]]),
    (pp_text(2, schedule="FThenB"), "ScheduleGPipe", [[0], [1]]),
    (pp_text(2, virtual=2), "ScheduleInterleaved1F1B", [[0, 2], [1, 3]]),
    (pp_text(2, dualpipev=True), "ScheduleDualPipeV", [[0, 3], [1, 2]]),
    # A Paddle file that leaves accumulate_steps out: one micro-batch, fewer than 1F1B's stages, runs as GPipe.
    ("hybrid_configs { pp_degree: 2 }", "ScheduleGPipe", [[0], [1]]),
], ids=["1F1B", "FThenB", "interleaved", "DualPipeV", "1F1B_with_one_micro_batch"])
def test_llama_at_pp2_trains_as_one_process_on_every_schedule(pools, text, schedule, stages):
    results = pools(2).run(cases.llama_parity, text, 3, 1.0, timeout=240)
    assert_parity(results[0])
    assert [r["stages"] for r in results] == stages and results[0]["schedule"] == schedule
    # Each rank holds its stages' parameters under the whole model's names.
    assert "model.embed_tokens.weight" in results[stages.index([s for s in stages if 0 in s][0])]["names"]
    assert not any(n.startswith("model.layers.0.") for n in results[1]["names"])


def test_llama_at_pp4_1f1b_trains_as_one_process(pools):
    results = pools(4).run(cases.llama_parity, pp_text(4), 3, None, timeout=240)
    assert_parity(results[0])
    assert [r["stages"] for r in results] == [[0], [1], [2], [3]]


@pytest.mark.parametrize("text", [pp_text(2, mp=2), pp_text(2, dp=2), pp_text(2, sharding=2, stage=3)],
                         ids=["pp2_x_mp2", "dp2_x_pp2", "sharding2_x_pp2"])
def test_pipelines_compose_with_the_other_axes(pools, text):
    result = pools(4).run(cases.llama_parity, text, 3, 1.0, timeout=300)[0]
    assert_parity(result)


def test_the_demo_gpt_pipelined_trains_as_one_process(pools):
    result = pools(2).run(cases.demo_parity, pp_text(2, acc=2, mbs=2), 3, timeout=240)[0]
    assert result["losses"] == pytest.approx(result["ref_losses"], rel=1e-5)


@pytest.mark.parametrize(("name", "world"), [("pp2", 2), ("pp2_mp2", 4)])
def test_the_pipeline_example_strategies_train_the_demo_as_one_process(pools, name, world):
    from conftest import ROOT

    text = (ROOT / "examples" / "strategies" / f"{name}.prototxt").read_text()
    result = pools(world).run(cases.demo_parity, text, 3, 4, timeout=240)[0]
    assert result["losses"] == pytest.approx(result["ref_losses"], rel=1e-5)


def test_a_batch_the_pipeline_fields_do_not_give_is_refused_naming_them(pools):
    message = pools(2).run(cases.batch_error, pp_text(2, acc=4, mbs=1), 6)[0]
    assert message == ("the batch has 6 rows, but a pipeline step takes "
                       "pipeline_configs.micro_batch_size × accumulate_steps = 1 × 4 = 4 per data rank; give that many "
                       "rows, or change the two fields")


def test_layers_the_chunks_do_not_divide_are_refused_before_any_change(pools):
    message, whole = pools(2).run(cases.split_error, pp_text(2, virtual=2), 6)[0]
    assert message == ("LlamaForCausalLM.model.layers has 6 blocks, which 4 pipeline chunks "
                       "(pp_degree × virtual_pp_degree) do not divide; use a product among [1, 2, 3, 6]")
    assert whole


def test_a_tied_weight_under_sharding_on_a_v_is_refused_before_any_change(pools):
    """DualPipeV puts the first and last chunk on pp rank 0, each an FSDP2 root: they would each shard the one weight."""
    message, whole = pools(4).run(cases.split_error, pp_text(2, dualpipev=True, sharding=2, stage=2), 4, True)[0]
    assert message.startswith("hybrid_configs.sharding_degree 2 with a V placement (ScheduleDualPipeV) and a tied "
                              "weight (model.embed_tokens.weight is lm_head.weight)") and whole


@pytest.fixture(scope="module")
def saved_at_pp2(pools, tmp_path_factory):
    path = tmp_path_factory.mktemp("pp") / "ckpt"
    full = pools(2).run(cases.save_pipelined, pp_text(2), str(path), timeout=240)[0]
    return path, full


@pytest.mark.parametrize(("world", "text", "resharded"), [
    (1, "hybrid_configs { dp_degree: 1 }", "pp 2 -> 1"),
    (4, pp_text(4), "pp 2 -> 4"),
    (4, pp_text(2, mp=2), "mp 1 -> 2"),
], ids=["one_process", "pp4", "pp2_x_mp2"])
def test_a_checkpoint_saved_at_pp2_loads_at_other_pipeline_degrees_exactly(pools, saved_at_pp2, world, text, resharded):
    path, saved = saved_at_pp2
    loaded = pools(world).run(cases.load_pipelined, text, str(path), timeout=240)[0]
    assert loaded["full"].keys() == saved.keys() and loaded["resharded"] == resharded
    for key, value in saved.items():
        assert torch.equal(loaded["full"][key], value), key


def test_paddles_4d_strategy_file_fine_tunes_a_llama_on_8_ranks(pools):
    from conftest import ROOT

    path = ROOT.parent / "shared" / "fixtures" / "paddle-hybrid" / "llama_4d.prototxt"
    results = pools(8).run(cases.paddle_4d_fine_tunes, str(path), 3, timeout=300)
    first = results[0]
    assert first["degrees"] == {"dp": 1, "pp": 2, "sharding": 2, "sep": 1, "cp": 1, "mp": 2}
    assert (first["stage"], first["amp"]) == (1, "bfloat16")
    assert [r["stages"] for r in results] == [[0], [0], [0], [0], [1], [1], [1], [1]]  # pp outside sharding and mp
    assert first["units"] == ["model.layers.0", "model.layers.1"]  # recompute: true, every decoder layer of the stage
    assert all(r["losses"] == first["losses"] for r in results) and first["losses"][-1] < first["losses"][0]


@pytest.mark.parametrize("switch", ["pp_configs { enable_dynamic_shape: true }",
                                    "pp_configs { clear_every_step_cache: true }", "p2p_cache_shape: false"],
                         ids=["enable_dynamic_shape", "clear_every_step_cache", "p2p_cache_shape_false"])
def test_batches_that_change_length_train_as_one_process_under_each_switch(pools, switch):
    text = pp_text(2)
    if switch.startswith("pp_configs"):
        text = text.replace("pp_configs {", switch[:-1], 1)
    else:
        text = text.replace("pipeline_configs {", f"pipeline_configs {{ {switch}", 1)
    result = pools(2).run(cases.llama_parity, text, 3, 1.0, 4, (16, 24, 8), timeout=240)[0]
    assert_parity(result)


def test_under_the_defaults_a_batch_of_another_length_is_refused_on_every_rank_naming_the_switches(pools):
    messages = pools(2).run(cases.batch_error, pp_text(2), 4, (16, 24))
    assert messages[0] == messages[1]
    assert messages[0].startswith("this step's batch has shape [4, 24], the pipeline's stages were built for [4, 16] "
                                  "(pipeline_configs.p2p_cache_shape keeps the first step's shapes)")
    assert "pp_configs.enable_dynamic_shape: true" in messages[0] and "clear_every_step_cache: true" in messages[0]


def test_delay_scale_loss_leaves_each_loss_whole_and_steps_on_the_mean_gradient_as_one_process(pools):
    """pp_configs.delay_scale_loss (PaddleFormers writes it under every pipeline): each micro-batch's backward runs on
    its whole loss and step() divides the summed gradients by accumulate_steps before clipping; the losses, the
    clipped norms (4× without the division) and the weights equal one process's."""
    text = pp_text(2).replace("pp_configs {", "pp_configs { delay_scale_loss: true", 1)
    assert_parity(pools(2).run(cases.llama_parity, text, 3, 1.0, timeout=240)[0])


def test_dp2_x_pp2_with_the_dp_average_overlapped_trains_as_one_process(pools):
    text = pp_text(2, dp=2).replace("pp_configs {", "pp_configs { dp_comm_overlap: true", 1)
    results = pools(4).run(cases.llama_parity, text, 3, 1.0, timeout=240)
    assert_parity(results[0])
    assert all(r["overlapped"] > 0 for r in results)  # buckets started before the step, during the schedule
