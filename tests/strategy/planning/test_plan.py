"""`strategy plan` and strategy.plan: published Llama-2 configs on 8 and 64 GPUs of 80 GB at 4,096 tokens, files that
validate, nothing over memory listed, the cut layouts a user can act on (a few, near the memory budget or a global
batch away), and a clear message when nothing can be listed."""

from __future__ import annotations

import json
import time

import pytest

import strategy
from strategy.cli import main
from strategy.planning.search import CUT_SHOWN, NEAR_MEMORY, CostModel
from strategy.planning.shapes import model_shape

GIB = 2 ** 30
# The published config.json values of meta-llama/Llama-2-7b-hf and Llama-2-70b-hf (the keys the model reads).
LLAMA2_7B = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
             "max_position_embeddings": 4096, "tie_word_embeddings": False}
SMALL = {"model_type": "llama", "vocab_size": 256, "hidden_size": 256, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 4, "intermediate_size": 688, "max_position_embeddings": 128}
SMALL_MOE = {**SMALL, "model_type": "qwen3_moe", "head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2,
             "moe_intermediate_size": 128, "decoder_sparse_step": 1}
LLAMA2_70B = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 8192, "intermediate_size": 28672,
              "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
              "max_position_embeddings": 4096, "tie_word_embeddings": False}
# The published config.json values of Qwen/Qwen2.5-3B (its LM head tied to the embedding).
QWEN2_5_3B = {"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 11008,
              "num_hidden_layers": 36, "num_attention_heads": 16, "num_key_value_heads": 2,
              "max_position_embeddings": 32768, "tie_word_embeddings": True}


def test_the_published_configs_count_their_published_parameters():
    assert model_shape(LLAMA2_7B).parameters == 6_738_415_616
    assert model_shape(LLAMA2_70B).parameters == 68_976_648_192


@pytest.mark.parametrize(("config", "gpus"), [(LLAMA2_7B, 8), (LLAMA2_7B, 64), (LLAMA2_70B, 64)],
                         ids=["7b_on_8", "7b_on_64", "70b_on_64"])
def test_every_candidate_fits_and_its_file_validates_at_the_world_size(tmp_path, capsys, config, gpus):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    out = tmp_path / "plans"
    assert main(["plan", "--model", str(path), "--gpus", str(gpus), "--gpu-memory", "80GB", "--seq-len", "4096",
                 "--global-batch", "256", "--write", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["candidates"]) == 5
    times = [c["step_seconds"] for c in result["candidates"]]
    assert times == sorted(times)  # fastest first
    for k, c in enumerate(result["candidates"], 1):
        assert c["memory"]["total"] <= 80e9 * 0.9  # nothing over memory is listed
        assert c["memory"]["total"] == pytest.approx(sum(c["memory"][x] for x in
                                                         ("parameters", "gradients", "optimizer", "activations")))
        file = out / f"candidate-{k}.prototxt"
        assert file.read_text() == c["strategy"]
        assert main(["validate", "--world-size", str(gpus), str(file)]) == 0
        degrees = c["degrees"]
        assert degrees["dp"] * degrees["mp"] * degrees["pp"] * degrees["sharding"] * degrees["sep"] * degrees["cp"] == gpus
        assert degrees["mp"] <= 8  # within a node
    for c in (c for c in result["cut"] if "degrees" in c):
        assert c["why"].startswith("over memory by") and c["memory"]["total"] <= NEAR_MEMORY * 80e9 * 0.9
        assert c["tokens_per_second_per_gpu"] > result["candidates"][0]["tokens_per_second_per_gpu"]


def test_70b_on_8_gpus_gets_no_candidate_and_the_least_memory_a_rank_needs(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA2_70B))
    assert main(["plan", "--model", str(path), "--gpus", "8", "--gpu-memory", "80GB", "--seq-len", "4096",
                 "--global-batch", "64"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("no strategy fits in 67.1 GiB a rank: the least any needs is ")
    assert "(the model states alone, 16 bytes a parameter over 8 ranks, are 128.5 GiB = 138 GB)" in out
    result = strategy.plan(LLAMA2_70B, gpus=8, gpu_memory=80e9, seq_len=4096, global_batch=64)
    assert not result.candidates
    assert not [c for c in result.cut if "degrees" in c]  # twice the memory: no layout near enough to list


def test_a_memory_too_small_for_any_strategy_says_what_it_would_need():
    result = strategy.plan(LLAMA2_7B, gpus=8, gpu_memory=8 * GIB, seq_len=4096, global_batch=8)
    assert not result.candidates
    assert result.message.startswith("no strategy fits in 7.2 GiB a rank: the least any needs is ")


def test_heads_no_mp_divides_leave_mp_1_and_say_so():
    odd = {**LLAMA2_7B, "num_attention_heads": 31, "num_key_value_heads": 31, "hidden_size": 3968}
    result = strategy.plan(odd, gpus=8, gpu_memory=80e9, seq_len=4096, global_batch=64)
    assert result.candidates and all(c.degrees["mp"] == 1 for c in result.candidates)
    assert any(c["why"].startswith("mp does not divide the heads (31 query, 31 key/value)") for c in result.cut
               if "layouts" in c)


def test_a_world_no_degree_set_fills_is_a_message_not_an_empty_table():
    result = strategy.plan(LLAMA2_7B, gpus=7, gpu_memory=80e9, seq_len=4096, global_batch=8)
    assert not result.candidates
    assert result.message.startswith("no set of degrees fills 7 GPUs for this model: ")
    assert "the global batch 8 does not divide over the data ranks" in result.message


# The published config.json of openai-community/gpt2 (the keys its model reads): 124,439,808 parameters.
GPT2 = {"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
        "tie_word_embeddings": True}


def test_any_other_causal_lm_is_planned_with_its_weights_counted_from_the_model_itself(tmp_path, capsys):
    pytest.importorskip("transformers")
    shape = model_shape(GPT2)
    assert shape.parameters == 124_439_808 and shape.tied and shape.layers == 12
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GPT2))
    assert main(["plan", "--model", str(path), "--gpus", "8", "--gpu-memory", "80GB", "--seq-len", "1024",
                 "--global-batch", "8"]) == 0
    assert ("(gpt2's weights counted from the model itself, its activations by the Llama family's terms at its "
            "widths)") in capsys.readouterr().out


def test_a_model_type_without_a_causal_lm_is_a_usage_error_naming_it(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "t5"}))
    assert main(["plan", "--model", str(path), "--gpus", "8", "--gpu-memory", "80GB", "--seq-len", "1024",
                 "--global-batch", "8"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"strategy plan: model_type 't5': transformers {transformers.__version__} builds no causal LM of this config "
        "(Unrecognized configuration class <class 'transformers.models.t5.configuration_t5.T5Config'> for this kind "
        "of AutoModel: AutoModelForCausalLM.); plan a model whose config.json AutoModelForCausalLM.from_config takes")


def test_without_the_runtime_another_model_type_is_refused_naming_the_install(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])
    with pytest.raises(ValueError) as e:
        model_shape(GPT2)
    assert str(e.value) == ("model_type 'gpt2': the memory model reads llama, mistral, qwen2, qwen3, mixtral, qwen3_moe "
                            "from their config and counts any other causal LM from the model itself, but the runtime "
                            "is not installed; install it with transformers (pip install 'distributed-strategy[hf]')")


def test_a_moe_model_is_planned_with_its_experts_split_over_ep():
    moe = {"model_type": "qwen3_moe", "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144,
           "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
           "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8, "tie_word_embeddings": False}
    shape = model_shape(moe)
    assert shape.parameters == pytest.approx(30.5e9, rel=0.01)  # Qwen3-30B-A3B
    assert shape.active_parameters == pytest.approx(3.3e9, rel=0.05)
    result = strategy.plan(moe, gpus=16, gpu_memory=80e9, seq_len=4096, global_batch=64)
    assert result.candidates and any(c.degrees["ep"] > 1 for c in result.candidates)
    for c in result.candidates:
        strategy.resolve(strategy.loads(c.text), world_size=16)


def test_the_search_for_70b_on_1024_gpus_takes_under_10_seconds():
    start = time.perf_counter()
    result = strategy.plan(LLAMA2_70B, gpus=1024, gpu_memory=80e9, seq_len=4096, global_batch=1024)
    assert time.perf_counter() - start < 10 and result.candidates and result.searched > 1000


def test_a_vocabulary_mp_does_not_divide_keeps_mp_at_1():
    odd_vocab = {**LLAMA2_7B, "vocab_size": 32001}
    result = strategy.plan(odd_vocab, gpus=8, gpu_memory=80e9, seq_len=4096, global_batch=64)
    assert all(c.degrees["mp"] == 1 for c in result.candidates)


def test_a_tied_qwen2_5_3b_at_32k_tokens_is_offered_mp_and_pp_and_never_cut_for_its_tied_head():
    """Under mp the vocabulary-split embedding and head share each rank's block of the tied weight; under pp the first
    and last stage each hold a copy (issue 43): nothing is cut for being tied (pp layouts fit, slower than cp's here)."""
    result = strategy.plan(QWEN2_5_3B, gpus=8, gpu_memory=80e9, seq_len=32768, global_batch=64, top=200)
    assert any(c.degrees["mp"] > 1 for c in result.candidates)
    assert any(c.degrees["pp"] > 1 for c in result.candidates)
    assert all("tied" not in c["why"] for c in result.cut)


def test_a_cost_model_constant_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match="the cost model's utilisation must be positive, got 0"):
        strategy.plan(LLAMA2_7B, gpus=8, gpu_memory=80e9, seq_len=4096, global_batch=64,
                      cost=strategy.CostModel(utilisation=0))


def test_a_config_that_is_not_json_names_the_file_line_and_column(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text('{\n  "hidden_size": 64,\n  oops\n}\n')
    assert main(["plan", "--model", str(path), "--gpus", "8", "--gpu-memory", "80GB", "--seq-len", "1024",
                 "--global-batch", "8"]) == 2
    assert capsys.readouterr().err.strip() == (f"strategy plan: {path}:3:3: not a JSON config: Expecting property name "
                                               "enclosed in double quotes")



def plan_out(tmp_path, capsys, config: dict, gpus: int, global_batch: int, *extra: str) -> str:
    """`strategy plan`'s output for `config` on `gpus` GPUs of 80 GiB, 4,096 tokens a sequence."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    main(["plan", "--model", str(path), "--gpus", str(gpus), "--gpu-memory", "80GiB", "--seq-len", "4096",
          "--global-batch", str(global_batch), *extra])
    return capsys.readouterr().out


def cut_lines(out: str) -> list[str]:
    """The layouts of the table's cut list."""
    lines = out.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("cut, "))
    end = next(k for k, line in enumerate(lines) if line.startswith("left out by"))
    return lines[start + 1:end]


def test_the_cut_list_shows_the_layouts_faster_than_the_first_within_a_quarter_over_memory(tmp_path, capsys):
    out = plan_out(tmp_path, capsys, LLAMA2_70B, 64, 256, "--top", "3")
    assert "cut, faster than #1 (over memory by at most 25%, or a global batch the data ranks do not divide):" in out
    assert cut_lines(out) == [
        "  dp 1 mp 4 pp 8 sharding 2 (stage 1) sep 1 cp 1 ep 1, recompute off, micro-batch 1, 766 tok/s/GPU: over "
        "memory by 17.1 GiB (89.1 GiB a rank, 72.0 GiB usable)",
        "  dp 1 mp 4 pp 16 sharding 1 sep 1 cp 1 ep 1, recompute off, micro-batch 1, 734 tok/s/GPU: over memory by "
        "5.3 GiB (77.3 GiB a rank, 72.0 GiB usable)",
        "  dp 2 mp 8 pp 4 sharding 1 sep 1 cp 1 ep 1, recompute off, micro-batch 1, 685 tok/s/GPU: over memory by "
        "10.5 GiB (82.5 GiB a rank, 72.0 GiB usable)",
        "  dp 1 mp 8 pp 4 sharding 2 (stage 1) sep 1 cp 1 ep 1, recompute off, micro-batch 1, 684 tok/s/GPU: over "
        "memory by 6.5 GiB (78.5 GiB a rank, 72.0 GiB usable)",
    ]
    result = strategy.plan(LLAMA2_70B, gpus=64, gpu_memory=80 * GIB, seq_len=4096, global_batch=256, top=3)
    cut = [c for c in result.cut if "degrees" in c]
    assert len(cut) == 4 and all(c["memory"]["total"] <= NEAR_MEMORY * 72 * GIB for c in cut)


def test_the_cut_list_is_at_most_five_layouts_each_at_the_nearest_global_batch_its_data_ranks_divide(tmp_path, capsys):
    lines = cut_lines(plan_out(tmp_path, capsys, LLAMA2_7B, 24, 256))
    assert len(lines) == CUT_SHOWN == 5
    assert lines[0] == ("  dp 3 mp 1 pp 2 sharding 4 (stage 1) sep 1 cp 1 ep 1, recompute off, micro-batch 1, 9,057 "
                        "tok/s/GPU: the global batch 256 does not divide over its 12 data ranks; predicted at 252")
    result = strategy.plan(LLAMA2_7B, gpus=24, gpu_memory=80 * GIB, seq_len=4096, global_batch=256)
    for c in (c for c in result.cut if "degrees" in c):
        data = c["degrees"]["dp"] * c["degrees"]["sharding"]
        assert c["global_batch"] % data == 0 and abs(c["global_batch"] - 256) <= data / 2
        assert c["memory"]["total"] <= 72 * GIB


def test_a_cut_layout_names_its_sharding_stage_only_when_sharding_is_on(tmp_path, capsys):
    assert cut_lines(plan_out(tmp_path, capsys, LLAMA2_7B, 7, 8)) == [
        "  dp 1 mp 1 pp 1 sharding 7 (stage 1) sep 1 cp 1 ep 1, recompute off, micro-batch 1, 7,928 tok/s/GPU: the "
        "global batch 8 does not divide over its 7 data ranks; predicted at 7"]
    lines = cut_lines(plan_out(tmp_path, capsys, LLAMA2_70B, 64, 256))
    assert all(("stage" in line) == ("sharding 1 " not in line) for line in lines)
    assert any("sharding 1 " in line for line in lines)


def test_a_written_file_counts_its_micro_batch_in_sequences_singular_for_one(tmp_path, capsys):
    plan_out(tmp_path, capsys, LLAMA2_7B, 64, 256, "--write", str(tmp_path / "plans"))
    comments = {k: (tmp_path / "plans" / f"candidate-{k}.prototxt").read_text().splitlines()[2] for k in (2, 3)}
    assert comments == {2: "# micro-batches of 2 sequences, 4 a step on each data rank",
                        3: "# micro-batches of 1 sequence, 8 a step on each data rank"}


def test_a_model_whose_loss_holds_the_routers_loss_gets_no_pipeline_layouts(tmp_path):
    """The pipeline refuses a model whose loss adds the router's load-balancing loss (its stages do not pass the router
    logits on): the plan leaves pp out for it, saying why, and keeps pp for the same model without that loss."""
    config = {"model_type": "qwen3_moe", "vocab_size": 256, "hidden_size": 256, "num_hidden_layers": 4,
              "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32, "intermediate_size": 688,
              "max_position_embeddings": 128, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
              "decoder_sparse_step": 1}
    found = {}
    for name, keys in {"with": {"output_router_logits": True, "router_aux_loss_coef": 0.01},
                       "default coefficient": {"output_router_logits": True},  # (the config class's, above 0)
                       "without": {"output_router_logits": False, "router_aux_loss_coef": 0.01},
                       "zero coefficient": {"output_router_logits": True, "router_aux_loss_coef": 0.0}}.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({**config, **keys}))
        found[name] = strategy.plan(str(path), gpus=2, gpu_memory=80 * 2 ** 30, seq_len=128, global_batch=8,
                                    top=10 ** 6)
    for name in ("with", "default coefficient"):
        assert not [c for c in found[name].candidates if c.degrees["pp"] > 1], name
        assert any("pp with the router's load-balancing loss" in str(cut) for cut in found[name].cut), name
    for name in ("without", "zero coefficient"):
        assert [c for c in found[name].candidates if c.degrees["pp"] > 1], name


def test_a_layout_pays_for_each_collective_it_issues_and_smaller_micro_batches_issue_more():
    """The collectives' own cost (latency, whatever their size), counted as the runtime issues them. mp, by the Hugging
    Face plan of a dense layer: o and down all-reduce forward, q, k, v, gate and up backward (the recomputed forward's
    again), and the embedding and head 3, per micro-batch; dp all-reduces its gradient buckets once a step, the same at
    every micro-batch size; sharding gathers each unit (4 layers, and the rest) per micro-step, the layers twice at
    stage 3, and reduces once a step at stage 1, per micro-step at stage 3; sep 4 all-to-alls a layer each way; cp a
    gather and its reduce-scatter a layer; ep 4 all-to-alls a sparse layer forward and 2 back; pp a send and a
    receive each way per micro-batch."""
    latency = 1e-3
    cost = CostModel(collective_seconds=latency)
    cands = strategy.plan(SMALL, gpus=2, gpu_memory=8 * 2 ** 30, seq_len=128, global_batch=8, top=10 ** 6,
                          cost=cost).candidates
    moe = strategy.plan(SMALL_MOE, gpus=2, gpu_memory=8 * 2 ** 30, seq_len=128, global_batch=8, top=10 ** 6,
                        cost=cost).candidates

    def calls(degrees: dict[str, int], mbs: int, stage: int = 1, recompute: bool = False, among=cands) -> float:
        return next(c.terms["collectives"] for c in among if c.micro_batch_size == mbs and c.recompute == recompute
                    and c.stage == stage and all(c.degrees[k] == degrees.get(k, 1) for k in c.degrees)) / latency

    for mbs in (1, 2, 4, 8):  # mp 2: the data rank's 8 sequences in 8 / mbs micro-batches
        assert calls({"mp": 2}, mbs) == pytest.approx((2 * 4 + 5 * 4 + 3) * (8 // mbs))
    assert calls({"mp": 2}, 4, recompute=True) == pytest.approx((2 * 2 * 4 + 5 * 4 + 3) * 2)
    dp = [calls({"dp": 2}, mbs) for mbs in (1, 2, 4)]
    assert dp[0] >= 1 and dp == pytest.approx([dp[0]] * 3)
    assert calls({"sharding": 2}, 2) == pytest.approx(5 * 2 + 5)  # 2 micro-steps: gathers 5 each, reduces 5 once
    assert calls({"sharding": 2}, 2, stage=3) == pytest.approx((2 * 4 + 1) * 2 + 5 * 2)
    assert calls({"sep": 2}, 4) == pytest.approx(8 * 4 * 2)
    assert calls({"cp": 2}, 4) == pytest.approx(2 * 4 * 2)
    assert calls({"pp": 2}, 2) == pytest.approx(4 * 4)
    assert calls({"ep": 2, "dp": 2}, 4, among=moe) - calls({"dp": 2}, 4, among=moe) == pytest.approx(6 * 4 * 1)
    single = strategy.plan(SMALL, gpus=1, gpu_memory=8 * 2 ** 30, seq_len=128, global_batch=8, top=10 ** 6,
                           cost=cost).candidates
    assert {c.terms["collectives"] for c in single} == {0.0}  # one rank: nothing to wait for
