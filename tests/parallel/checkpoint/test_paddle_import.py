"""A Paddle training run continues in PyTorch: checkpoints PaddlePaddle 3.3.1 / PaddleFormers 1.2.0 wrote themselves
(../shared/fixtures/paddle-ckpt: weights, AdamW state after two steps, tensor-parallel shards) read into the Hugging
Face model of the same architecture give Paddle's logits, and a third torch AdamW step from the imported moments gives
Paddle's third-step loss and parameters."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch

import paddle_import_cases as cases
import strategy
from conftest import ROOT
from parallel.checkpoint.paddle import read_paddle
from parallel.checkpoint.paddle.layout import apply, rule_for

transformers = pytest.importorskip("transformers")

CKPT = ROOT.parent / "shared" / "fixtures" / "paddle-ckpt"
MODELS = ["llama", "qwen2"]


def _model(c):
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**c.config))
    model.load_state_dict(c.weights, strict=not c.config.get("tie_word_embeddings"))
    return model


def _paddle_loss(model, ids: torch.Tensor) -> torch.Tensor:
    """PaddleFormers' criterion: cross entropy of logits[t] against labels[t], unshifted (its collator shifts)."""
    logits = model(input_ids=ids).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids.reshape(-1))


@pytest.mark.parametrize("name", MODELS)
def test_imported_weights_give_paddles_logits(name):
    c = read_paddle(CKPT / name / "paddle_pdparams", optimizer=CKPT / name / "optimizer.pdopt")
    model = _model(c).eval()
    ids = torch.from_numpy(np.load(CKPT / name / "eval_ids.npy"))
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, :4]
    torch.testing.assert_close(logits, torch.from_numpy(np.load(CKPT / name / "eval_logits_first4.npy")),
                               rtol=0, atol=1e-5)


@pytest.mark.parametrize("shards", [False, True], ids=["whole", "tp2-shards"])
@pytest.mark.parametrize("name", MODELS)
def test_a_third_adamw_step_from_the_imported_state_is_paddles(name, shards):
    truths = json.loads((CKPT / name / "truths.json").read_text())
    if shards:
        c = read_paddle(CKPT / name / "tp2", config=CKPT / name / "paddle_pdparams" / "config.json")
    else:
        c = read_paddle(CKPT / name / "paddle_pdparams", optimizer=CKPT / name / "optimizer.pdopt")
    model = _model(c).train()
    o = truths["optimizer"]
    opt = torch.optim.AdamW(model.parameters(), lr=o["learning_rate"], betas=(o["beta1"], o["beta2"]),
                            eps=o["epsilon"], weight_decay=o["weight_decay"])
    by_name = dict(model.named_parameters())
    assert set(by_name) == set(c.optimizer)  # every parameter's moments, the tied head's once
    for pname, p in by_name.items():
        opt.state[p] = {k: v.clone() for k, v in c.optimizer[pname].items()}
    assert float(c.optimizer["model.norm.weight"]["step"]) == 2
    loss = _paddle_loss(model, torch.from_numpy(np.load(CKPT / name / "train_ids.npy")))
    assert loss.item() == pytest.approx(truths["train_loss_step3"], abs=1e-6)
    loss.backward()
    opt.step()
    after = np.load(CKPT / name / "params_after_step3.npz")
    tied = c.config.get("tie_word_embeddings", False)
    for key in after.files:
        rule = rule_for(c.model_type, key, tied)
        for hf, value in apply(rule, key, after[key], c.config).items():
            torch.testing.assert_close(by_name[hf].detach(), torch.from_numpy(np.ascontiguousarray(value)),
                                       rtol=0, atol=1e-6, msg=lambda m, hf=hf: f"{hf}: {m}")


@pytest.mark.parametrize("name", MODELS)
def test_tensor_parallel_shards_merge_into_the_whole_checkpoint(name):
    whole = read_paddle(CKPT / name / "paddle_pdparams", optimizer=CKPT / name / "optimizer.pdopt")
    merged = read_paddle(CKPT / name / "tp2", config=CKPT / name / "paddle_pdparams" / "config.json")
    assert merged.weights.keys() == whole.weights.keys()
    for key, value in whole.weights.items():
        assert torch.equal(merged.weights[key], value), key
    for key, state in whole.optimizer.items():
        for k, v in state.items():
            assert torch.equal(merged.optimizer[key][k], v), (key, k)
    assert any("merged from 2 shards (pairs)" in line for line in merged.lines) == (name == "qwen2")


def test_each_paddle_key_has_one_line_saying_what_it_became():
    c = read_paddle(CKPT / "qwen2" / "paddle_pdparams", optimizer=CKPT / "qwen2" / "optimizer.pdopt")
    paddle_keys = [k for k in pickle.load(open(CKPT / "qwen2" / "paddle_pdparams" / "model_state.pdparams", "rb"))
                   if not k.endswith("@@")]
    assert [line.split(" ", 1)[0] for line in c.lines[:-1]] == paddle_keys
    assert ("model.layers.0.mlp.up_gate_proj.weight (linear_2.w_0) -> model.layers.0.mlp.gate_proj.weight, "
            "model.layers.0.mlp.up_proj.weight: split from the fused [gate | up], each transposed") in c.lines
    assert "lm_head.weight (embedding_0.w_0) -> nothing: dropped: the tied LM head's copy of the embedding" in c.lines
    assert c.lines[-1].startswith("optimizer: 26 parameters' AdamW moments, converted as their weights; step 2")


def test_a_pickle_of_anything_but_arrays_is_refused_unrun(tmp_path):
    class Boom:
        def __reduce__(self):
            return (print, ("ran",))

    (tmp_path / "model_state.pdparams").write_bytes(pickle.dumps({"model.norm.weight": Boom()}))
    (tmp_path / "config.json").write_text((CKPT / "llama" / "paddle_pdparams" / "config.json").read_text())
    with pytest.raises(strategy.StrategyError, match=r"the pickle asks for builtins.print, which a Paddle checkpoint of "
                                                     r"plain tensors never holds; it is refused unrun"):
        read_paddle(tmp_path)


def test_a_truncated_file_and_a_missing_shard_are_errors_naming_the_file(tmp_path):
    (tmp_path / "config.json").write_text((CKPT / "llama" / "paddle_pdparams" / "config.json").read_text())
    data = (CKPT / "llama" / "tp2" / "model_state.tp00.pdparams").read_bytes()
    (tmp_path / "model_state.tp00.pdparams").write_bytes(data)
    (tmp_path / "model_state.tp02.pdparams").write_bytes(data)
    with pytest.raises(strategy.StrategyError, match=r"the shards of model_state are ranks \[0, 2\]; every rank 0..1 "
                                                     "is needed to merge them"):
        read_paddle(tmp_path)
    (tmp_path / "model_state.tp02.pdparams").unlink()
    (tmp_path / "model_state.tp01.pdparams").write_bytes(data[: len(data) // 2])
    with pytest.raises(strategy.StrategyError, match=rf"{tmp_path / 'model_state.tp01.pdparams'}: not a Paddle "
                                                     r"checkpoint pickle \((EOFError|UnpicklingError)"):
        read_paddle(tmp_path)


def test_what_does_not_fit_is_an_error_naming_the_key_and_the_file(tmp_path):
    weights = pickle.load(open(CKPT / "llama" / "paddle_pdparams" / "model_state.pdparams", "rb"))
    config = json.loads((CKPT / "llama" / "paddle_pdparams" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config))
    path = tmp_path / "model_state.pdparams"
    path.write_bytes(pickle.dumps({**weights, "model.layers.0.mlp.extra.weight": np.zeros((2, 2), np.float32)}))
    with pytest.raises(strategy.StrategyError, match=rf"{path}: model.layers.0.mlp.extra.weight: not a weight of a "
                                                     "llama checkpoint this importer knows"):
        read_paddle(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**config, "intermediate_size": 96}))
    path.write_bytes(pickle.dumps(weights))
    with pytest.raises(strategy.StrategyError, match=r"model.layers.0.mlp.gate_proj.weight comes out \[128, 64\], but "
                                                     r"LlamaForCausalLM of this config has \[96, 64\]"):
        read_paddle(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config))
    opt = pickle.load(open(CKPT / "llama" / "optimizer.pdopt", "rb"))
    (tmp_path / "optimizer.pdopt").write_bytes(pickle.dumps({**opt, "linear_99.w_0_moment1_0": np.zeros(2)}))
    with pytest.raises(strategy.StrategyError, match="linear_99.w_0_moment1_0 is no AdamW state of a parameter of the "
                                                     "weights"):
        read_paddle(tmp_path)


# ERNIE-4.5 and Qwen2-MoE follow the same rules (the fixtures' README; its generate.py builds both): checkpoints laid
# out here as Paddle lays them out, from a Hugging Face model, are read back to that model's tensors and moments.
SMALL = {"ernie4_5": dict(tie_word_embeddings=True),
         "qwen2_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                           shared_expert_intermediate_size=64, tie_word_embeddings=False)}


def _encode(hf: dict[str, np.ndarray], kind: str, cfg: dict) -> dict[str, np.ndarray]:
    """Hugging Face tensors in Paddle's names and layout: Linear [in, out]; q/k/v fused by key/value group, gate and
    up as [gate | up]; each expert its own [gate | up] and down; a tied head as a copy of the embedding."""
    heads, kv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    out: dict[str, np.ndarray] = {}
    for name, v in hf.items():
        p, _, leaf = name.rpartition(".")
        if ".self_attn.q_proj." in name:
            qkv = [hf[name.replace("q_proj", x)] for x in ("q_proj", "k_proj", "v_proj")]
            cols = [t.T if t.ndim == 2 else t for t in qkv]
            lead = cols[0].shape[:-1]
            q = cols[0].reshape(*lead, kv, heads // kv, d)
            k, vv = (c.reshape(*lead, kv, 1, d) for c in cols[1:])
            out[name.replace("q_proj", "qkv_proj")] = np.concatenate([q, k, vv], axis=-2).reshape(*lead, -1)
        elif ".self_attn.k_proj." in name or ".self_attn.v_proj." in name or name.endswith("up_proj.weight"):
            continue
        elif name.endswith("gate_proj.weight"):
            out[name.replace("gate_proj", "up_gate_proj")] = np.concatenate(
                [v.T, hf[name.replace("gate_proj", "up_proj")].T], axis=-1)
        elif name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            base = p + "." + ("up_gate_proj" if leaf == "gate_up_proj" else "down_proj")
            for e in range(v.shape[0]):
                out[base.replace("experts.", f"experts.{e}.") + ".weight"] = v[e].T
        elif v.ndim == 2 and "embed_tokens" not in name and "lm_head" not in name:
            out[name] = v.T
        else:
            out[name] = v
    if cfg.get("tie_word_embeddings"):
        out["lm_head.weight"] = out["model.embed_tokens.weight"]
    return out


def _paddle_run(tmp_path, kind: str):
    """A Paddle-laid-out checkpoint of a small `kind` model and of moments for it: (model, moments, folder)."""
    cfg = transformers.AutoConfig.for_model(kind, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                            num_key_value_heads=2, head_dim=16, intermediate_size=128, vocab_size=128,
                                            **SMALL[kind])
    torch.manual_seed(1)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    c = cfg.to_dict()
    hf = {k: v.detach().numpy() for k, v in model.state_dict().items() if not (cfg.tie_word_embeddings and k == "lm_head.weight")}
    moments = {which: {k: np.random.RandomState(i).rand(*v.shape).astype(np.float32) for k, v in hf.items()}
               for i, which in enumerate(("exp_avg", "exp_avg_sq"))}
    weights = _encode(hf, kind, c)
    tensors = {k: f"t_{i}" for i, k in enumerate(weights)}
    if cfg.tie_word_embeddings:
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"]
    (tmp_path / "model_state.pdparams").write_bytes(pickle.dumps({**weights, "StructuredToParameterName@@": tensors}))
    opt: dict = {}
    for which, suffix in (("exp_avg", "_moment1_0"), ("exp_avg_sq", "_moment2_0")):
        for key, value in _encode(moments[which], kind, c).items():
            if key != "lm_head.weight" or not cfg.tie_word_embeddings:
                opt[tensors[key] + suffix] = value
    for key in weights:
        if key != "lm_head.weight" or not cfg.tie_word_embeddings:
            opt[tensors[key] + "_beta1_pow_acc_0"] = np.array([0.9 ** 6], np.float32)
            opt[tensors[key] + "_beta2_pow_acc_0"] = np.array([0.999 ** 6], np.float32)
    (tmp_path / "optimizer.pdopt").write_bytes(pickle.dumps(opt))
    (tmp_path / "config.json").write_text(json.dumps(c))
    return model, moments, tmp_path


@pytest.mark.parametrize("kind", list(SMALL))
def test_ernie_4_5_and_qwen2_moe_read_back_to_the_models_tensors_and_moments(tmp_path, kind):
    model, moments, folder = _paddle_run(tmp_path, kind)
    c = read_paddle(folder)
    expected = model.state_dict()
    assert c.weights.keys() == {k for k in expected if not (k == "lm_head.weight" and c.config["tie_word_embeddings"])}
    for key, value in c.weights.items():
        assert torch.equal(value, expected[key]), key
    for key, state in c.optimizer.items():
        assert float(state["step"]) == 5
        for which in ("exp_avg", "exp_avg_sq"):
            assert np.array_equal(state[which].numpy(), moments[which][key]), (key, which)
    if kind == "qwen2_moe":
        import re

        assert any(re.fullmatch(r"model\.layers\.0\.mlp\.experts\.3\.up_gate_proj\.weight \(t_\d+\) -> "
                                r"model\.layers\.0\.mlp\.experts\.gate_up_proj#3: transposed into its expert's slice "
                                r"of the stacked tensor", line) for line in c.lines)


def test_the_import_is_a_checkpoint_that_resumes_at_mp_2_with_paddles_third_step(tmp_path, pools, capsys):
    """`strategy checkpoint import --from paddle`: this project's checkpoint (step 2, the run's AdamW settings) and a
    Hugging Face directory; loaded at mp 2 by parallel.load, one AdamW step gives Paddle's third-step loss and
    parameters."""
    from strategy.cli import main

    out, hf = tmp_path / "ckpt", tmp_path / "hf"
    code = main(["checkpoint", "import", "--from", "paddle", str(CKPT / "llama" / "paddle_pdparams"), "-o", str(out),
                 "--optimizer", str(CKPT / "llama" / "optimizer.pdopt"), "--lr", "1e-3", "--weight-decay", "0.01",
                 "--hf", str(hf)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert printed.out.splitlines()[0] == ("model.embed_tokens.weight (embedding_0.w_0) -> model.embed_tokens.weight: "
                                           "as is")
    assert f"wrote {out} (step 2) and {hf}" in printed.out
    truths = json.loads((CKPT / "llama" / "truths.json").read_text())
    for rank in pools(2).run(cases.third_step, str(out), str(CKPT / "llama"), "hybrid_configs { mp_degree: 2 }",
                             timeout=120):
        assert (rank["step"], rank["mp"], rank["lr"]) == (2, 2, 1e-3)
        assert rank["loss"] == pytest.approx(truths["train_loss_step3"], abs=1e-6)
        assert rank["worst"] < 1e-6
    pp2 = "hybrid_configs { pp_degree: 2 } pipeline_configs { micro_batch_size: 1 accumulate_steps: 2 }"
    for text in ("hybrid_configs { mp_degree: 2 }", pp2):  # the weights resharded over mp, cut into stages
        assert max(pools(2).run(cases.logits_after_load, str(out), str(CKPT / "llama"), text, timeout=120)) < 1e-5
    assert sorted(p.name for p in (CKPT / "llama" / "paddle_pdparams").iterdir()) == ["config.json",
                                                                                       "model_state.pdparams"]
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(hf)
    ids = torch.from_numpy(np.load(CKPT / "llama" / "eval_ids.npy"))
    with torch.no_grad():
        logits = reloaded.eval()(input_ids=ids).logits[:, :4]
    torch.testing.assert_close(logits, torch.from_numpy(np.load(CKPT / "llama" / "eval_logits_first4.npy")),
                               rtol=0, atol=1e-5)


def test_a_paddle_run_continues_under_torchrun_from_the_import(tmp_path):
    """The guide's path: import into the example's checkpoint directory with a Hugging Face copy of the model, then
    `torchrun examples/finetune_hf.py` resumes at step 2 and trains on at mp 2."""
    import subprocess
    import sys

    from strategy.cli import main

    run = tmp_path / "run"
    assert main(["checkpoint", "import", "--from", "paddle", str(CKPT / "llama" / "paddle_pdparams"), "--optimizer",
                 str(CKPT / "llama" / "optimizer.pdopt"), "-o", str(run / "checkpoints" / "step-2"), "--hf",
                 str(tmp_path / "hf")]) == 0
    (tmp_path / "s.prototxt").write_text('hybrid_configs { mp_degree: 2 }\ncheckpoint_configs { dir: "checkpoints" '
                                         "every_steps: 2 }\n")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(ROOT / "examples" / "finetune_hf.py"), "--strategy", str(tmp_path / "s.prototxt"), "--model",
           str(tmp_path / "hf"), "--steps", "4", "--seq-len", "16", "--out", str(run)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"resuming from {run / 'checkpoints' / 'step-2'} (step 2)" in result.stdout
    assert "in steps 3-4" in result.stdout


def test_the_docs_rules_table_is_the_generated_one():
    from parallel.checkpoint.paddle.layout import markdown

    doc = (ROOT / "docs" / "paddle-checkpoints.md").read_text()
    start = ("<!-- paddle-rules: generated by parallel.checkpoint.paddle.layout.markdown(); "
             "tests/parallel/checkpoint/test_paddle_import.py checks it -->\n")
    assert doc.split(start, 1)[1].split("<!-- /paddle-rules -->", 1)[0] == markdown()


ERNIE_MOE = ROOT / "tests" / "fixtures" / "paddle_ckpt_ernie4_5_moe"  # its generate.py: PaddleFormers wrote it


def test_ernie_4_5_moe_reads_as_paddleformers_own_export_and_its_moments_as_the_gradients_it_took(tmp_path):
    """ERNIE-4.5-MoE cannot run forward on a CPU (GPU-only kernels): the truths are PaddleFormers' own conversion to
    Hugging Face names and layout, of the weights and of the gradients its two AdamW steps took (each moment a known
    multiple of them), both loaded by transformers. Its multi-token-prediction block is reported dropped."""
    truths = json.loads((ERNIE_MOE / "truths.json").read_text())
    c = read_paddle(ERNIE_MOE / "paddle")
    assert c.model_type == "ernie4_5_moe" and c.step == truths["steps"]
    exported, grads = (transformers.AutoModelForCausalLM.from_pretrained(ERNIE_MOE / d).state_dict()
                       for d in ("hf_export", "hf_grads"))
    assert c.weights.keys() == exported.keys() - {"lm_head.weight"}  # tied: the embedding is the head
    for key, value in c.weights.items():
        torch.testing.assert_close(value, exported[key], rtol=0, atol=0, msg=key)
    assert c.optimizer.keys() == {k for k in c.weights if not k.endswith("e_score_correction_bias")}  # (not trained)
    for key, state in c.optimizer.items():
        torch.testing.assert_close(state["exp_avg"], truths["moment1_of_grad"] * grads[key], rtol=1e-6, atol=1e-7,
                                   msg=key)
        torch.testing.assert_close(state["exp_avg_sq"], truths["moment2_of_grad_squared"] * grads[key] ** 2,
                                   rtol=1e-5, atol=1e-9, msg=key)
    from parallel.checkpoint.paddle.pickles import load_pickle

    mtp = {k for k in load_pickle(ERNIE_MOE / "paddle" / "model_state.pdparams") if k.startswith("model.mtp_")}
    dropped = {line.split(" ", 1)[0] for line in c.lines if "dropped: multi-token prediction" in line}
    assert dropped == mtp and len(mtp) == 9


def test_ernie_4_5_moe_shards_are_refused_naming_why(tmp_path):
    for rank in range(2):
        (tmp_path / f"model_state.tp{rank:02d}.pdparams").write_bytes((ERNIE_MOE / "paddle" / "model_state.pdparams").read_bytes())
    (tmp_path / "config.json").write_text((ERNIE_MOE / "paddle" / "config.json").read_text())
    with pytest.raises(strategy.StrategyError, match="places ERNIE-4.5-MoE's experts on the ranks of its moe_group.*"
                                                     "tensor_model_parallel_size 1"):
        read_paddle(tmp_path)


def test_ernie_4_5_moe_imports_into_a_checkpoint_and_a_hugging_face_directory(tmp_path):
    from parallel import import_paddle

    c = import_paddle(ERNIE_MOE / "paddle", tmp_path / "ckpt", hf=tmp_path / "hf")
    assert c.step == 2 and (tmp_path / "ckpt").is_dir()
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").state_dict()
    exported = transformers.AutoModelForCausalLM.from_pretrained(ERNIE_MOE / "hf_export").state_dict()
    assert back.keys() == exported.keys()
    for key in back:
        torch.testing.assert_close(back[key], exported[key], rtol=0, atol=0, msg=key)


def test_an_import_that_fails_while_writing_leaves_no_half_checkpoint(tmp_path, monkeypatch):
    """OUT is written beside and renamed into place: an import that dies while writing leaves none, and a previous
    checkpoint at OUT whole."""
    import torch.distributed.checkpoint as dcp

    from parallel import import_paddle

    out = tmp_path / "ckpt"
    import_paddle(ERNIE_MOE / "paddle", out)
    before = sorted((p.relative_to(out), p.read_bytes()) for p in out.rglob("*") if p.is_file())
    real = dcp.save

    def dies(state, *, checkpoint_id, **kw):
        real(state, checkpoint_id=checkpoint_id, **kw)  # every file written, the rename not reached
        raise KeyboardInterrupt

    monkeypatch.setattr(dcp, "save", dies)
    with pytest.raises(KeyboardInterrupt):
        import_paddle(ERNIE_MOE / "paddle", out)
    assert sorted((p.relative_to(out), p.read_bytes()) for p in out.rglob("*") if p.is_file()) == before
    with pytest.raises(KeyboardInterrupt):
        import_paddle(ERNIE_MOE / "paddle", tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()
