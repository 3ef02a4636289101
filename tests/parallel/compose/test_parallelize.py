"""parallel.parallelize on models no one here wrote: Hugging Face Llama and Qwen2 from small configs."""

from __future__ import annotations

import pytest

import hf_cases as cases

# (mp_async_allreduce, mp_skip_c_identity, mp_fused_linear_param_grad_add): every valid combination.
FLAGS = [(False, False, False), (True, False, False), (True, True, False), (True, False, True), (True, True, True)]
NAMES = ["plain", "async", "async-skip", "async-fused", "all"]


@pytest.mark.parametrize("flags", FLAGS, ids=NAMES)
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_mp2_matches_the_unparallelised_model_over_several_steps(pools, arch, flags):
    result = pools(2).run(cases.parity, 2, arch, flags)[0]
    assert result["layers"] == ["ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding"]
    assert result["losses"][-1] < result["losses"][0]


@pytest.mark.parametrize("flags", [FLAGS[0], FLAGS[-1]], ids=["plain", "all"])
def test_mp4_with_one_head_per_rank_matches_too(pools, flags):
    pools(4).run(cases.parity, 4, "llama", flags, 4, 4, timeout=180)


@pytest.mark.parametrize("sp", [None, {"sequence_parallel": True}], ids=["mp2", "mp2_sequence_parallel"])
def test_qwen3s_per_head_norms_sum_their_gradients_over_mp(pools, sp):
    """Qwen3's q_norm and k_norm run per head after the column split ("replicated_with_grad_allreduce"): each rank's
    gradient covers its heads only, the optimizer sums them over mp, and the training is one process's."""
    result = pools(2).run(cases.parity, 2, "qwen3", FLAGS[0], 4, 2, False, sp)[0]
    assert result["losses"][-1] < result["losses"][0]


def test_replicated_parameters_follow_the_sync_flags(pools):
    pools(2).run(cases.parity, 2, "llama", FLAGS[-1], 4, 2, True)


def test_the_plan_can_live_in_the_strategy(pools):
    names = pools(2).run(cases.plan_from_strategy, 2)[0]
    assert names == [f"model.layers.{i}.mlp.{p}" for i in range(2) for p in ("down_proj", "gate_proj", "up_proj")]


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        ({"model.layers.*.mlp.up_proj": "colwize"}, "rule 'model.layers.*.mlp.up_proj': unknown style 'colwize'; styles: colwise,"),
        ({"model.layers.*.mlp.upproj": "colwise"}, "rule 'model.layers.*.mlp.upproj' matches no module of LlamaForCausalLM"),
        ({"model.norm": "colwise"}, "model.norm (LlamaRMSNorm) under rule 'model.norm' -> colwise: colwise needs an nn.Linear"),
        ({"model.embed_tokens": "rowwise"}, "model.embed_tokens (Embedding) under rule 'model.embed_tokens' -> rowwise: rowwise needs an nn.Linear"),
    ],
    ids=["style", "nothing", "type-norm", "type-embedding"],
)
def test_a_bad_plan_names_the_problem_and_changes_nothing(pools, plan, expected):
    message, untouched = pools(2).run(cases.plan_error, 2, plan)[0]
    assert message.startswith("StrategyError: cannot apply the plan given at mp_degree=2:")
    assert expected in message
    assert untouched


def test_a_dimension_not_divisible_by_the_degree_names_module_shape_and_degree(pools):
    message, untouched = pools(4).run(cases.plan_error, 4, {"model.layers.*.self_attn.k_proj": "colwise"})[0]
    # kv heads: 2, so k_proj's 32 rows would split heads across 4 ranks
    assert "config.num_key_value_heads=2 is not divisible by mp_degree=4: each rank needs whole heads" in message
    assert untouched


def test_need_broadcast_data_gives_every_mp_rank_the_first_ranks_batch(pools):
    losses = pools(2).run(cases.broadcast_inputs, 2)
    assert losses[0] == losses[1]


@pytest.mark.timeout(300)
def test_finetune_script_loads_a_local_checkpoint_and_trains_under_torchrun(tmp_path):
    """A Qwen2 checkpoint saved without tokenizer files (its AutoTokenizer loads empty, encoding text to nothing):
    the example falls back to bytes and says so. Its LM head is tied to the embedding, as released Qwen2.5 models'
    are: at mp 2 the two share each rank's block of the weight."""
    import json
    import subprocess
    import sys

    import transformers

    from conftest import ROOT

    config = transformers.Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    transformers.Qwen2ForCausalLM(config).save_pretrained(tmp_path / "ckpt")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(ROOT / "examples" / "finetune_hf.py"), "--strategy", str(ROOT / "examples" / "strategies" / "mp2_all_flags.prototxt"),
           "--model", str(tmp_path / "ckpt"), "--steps", "6", "--seq-len", "32", "--out", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"tokenizer: UTF-8 bytes ({tmp_path / 'ckpt'}'s Qwen2Tokenizer" in result.stdout
    assert "torch_dtype" not in result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["losses"]) == 6 and summary["final_loss"] < summary["first_loss"]
    assert summary["effective_mp"]["fused_linear_param_grad_add"] is True
    assert (out / "loss.png").exists() and (out / "strategy.prototxt").exists()


@pytest.mark.parametrize("flags", [FLAGS[0], FLAGS[-1]], ids=["plain", "all"])
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_sequence_parallel_hugging_face_models_match_too(pools, arch, flags):
    sp = {"sequence_parallel": True, "sp_async_reduce_scatter": True, "recompute_allgather": True}
    result = pools(2).run(cases.parity, 2, arch, flags, 4, 2, False, sp)[0]
    assert result["losses"][-1] < result["losses"][0]


def test_recomputing_with_a_padding_mask_gives_the_gradients_of_keeping_the_activations(pools):
    from conftest import PADDLE_FIXTURES

    result = pools(2).run(cases.recompute_with_a_padding_mask, str(PADDLE_FIXTURES / "llama_tp2_sp.prototxt"))[0]
    assert result["losses"][1] == pytest.approx(result["losses"][0], rel=1e-6)


def test_paddles_llama_strategy_recomputes_every_decoder_layer_with_sequence_parallelism(pools):
    from conftest import PADDLE_FIXTURES

    result = pools(2).run(cases.paddle_llama_strategy_recomputes_every_decoder_layer,
                          str(PADDLE_FIXTURES / "llama_tp2_sp.prototxt"))[0]
    assert result["recomputed"] == ["model.layers.0", "model.layers.1"] and result["sp"]
