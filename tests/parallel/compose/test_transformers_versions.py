"""The transformers releases parallelize supports: one range, stated in pyproject and in the runtime, refused outside
it before a model changes; the calls whose spelling differs across it follow the release installed.

`make test-transformers` runs the Hugging Face tests on the range's oldest and newest release; these run on both.
"""

from __future__ import annotations

import sys
import tomllib

import pytest
from packaging.requirements import Requirement

from conftest import ROOT
from parallel.compose.transformers_versions import NEWEST, OLDEST, SUPPORTED

transformers = pytest.importorskip("transformers")


def small_llama():
    config = transformers.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False)
    return transformers.LlamaForCausalLM(config)


def test_pyprojects_hf_extra_states_the_supported_range_and_its_ends_are_in_it():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["hf"]
    (requirement,) = [Requirement(r) for r in extras if Requirement(r).name == "transformers"]
    assert str(requirement.specifier) == ",".join(sorted(SUPPORTED.split(",")))
    assert OLDEST in requirement.specifier and NEWEST in requirement.specifier


def test_the_installed_transformers_is_in_the_range():
    assert transformers.__version__ in Requirement(f"transformers{SUPPORTED}").specifier


@pytest.mark.parametrize("version", ["5.8.0", "5.25.0", "4.57.6"])
def test_parallelize_refuses_a_release_outside_the_range_naming_both_before_any_change(monkeypatch, version):
    import parallel

    model = small_llama()
    before = [type(m).__name__ for m in model.modules()]
    # The module as it is now: building a model re-registers transformers' lazy module in sys.modules.
    monkeypatch.setattr(sys.modules["transformers"], "__version__", version)
    with pytest.raises(RuntimeError) as info:
        parallel.parallelize(model)
    assert str(info.value) == (
        f"parallelize(LlamaForCausalLM): transformers {version} is installed, but Hugging Face models are supported "
        f"with transformers{SUPPORTED} (tested on {OLDEST} and {NEWEST}): their masks, attention and plans are reached "
        f"through transformers' internals, which change between releases; pip install 'transformers{SUPPORTED}'")
    assert [type(m).__name__ for m in model.modules()] == before


def test_two_pipeline_stages_run_the_models_own_forward_to_its_logits_on_the_installed_release():
    """Each stage calls the model's forward (its keyword arguments as the installed release names them): the first
    stage's hidden states, fed to the last, give the whole model's logits."""
    import torch

    from parallel.pipeline.chunks import HuggingFaceChunk
    from parallel.pipeline.layer_chain import layer_chain
    from parallel.pipeline.split import cut, skeleton

    torch.manual_seed(0)
    model = small_llama().eval()
    chain, c = layer_chain(model, "model.layers"), cut(model)
    first = HuggingFaceChunk(skeleton(model, c, range(0, 1), True, False), chain, range(0, 1), True, False)
    last = HuggingFaceChunk(skeleton(model, c, range(1, 2), False, True), chain, range(1, 2), False, True)
    ids = torch.randint(0, 32, (2, 5))
    with torch.no_grad():
        torch.testing.assert_close(last(first(ids)), model(input_ids=ids).logits)


def test_the_hugging_face_plan_is_the_same_on_every_release_of_the_range():
    from parallel.compose.plan import hugging_face_plan

    plan = hugging_face_plan(small_llama())
    assert plan.pop("lm_head") in ("colwise_gather_output", "colwise_rep")  # the same style, named anew in 5.1
    assert plan == {
        "model.embed_tokens": "embedding_rowwise",
        "model.layers.*.self_attn.q_proj": "colwise",
        "model.layers.*.self_attn.k_proj": "colwise",
        "model.layers.*.self_attn.v_proj": "colwise",
        "model.layers.*.self_attn.o_proj": "rowwise",
        "model.layers.*.mlp.gate_proj": "colwise",
        "model.layers.*.mlp.up_proj": "colwise",
        "model.layers.*.mlp.down_proj": "rowwise",
    }
