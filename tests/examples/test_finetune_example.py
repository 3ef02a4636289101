"""examples/finetune_hf.py's model and tokenizer as a new user meets them: local directories that hold less than a
full checkpoint, and the small models it builds from a config."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest
import transformers

from conftest import ROOT

TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2)


@pytest.fixture(scope="module")
def finetune():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        return importlib.import_module("finetune_hf")
    finally:
        sys.path.remove(str(ROOT / "examples"))


def test_a_qwen2_directory_without_tokenizer_files_encodes_bytes_and_says_why(tmp_path, finetune):
    transformers.Qwen2ForCausalLM(transformers.Qwen2Config(tie_word_embeddings=True, **TINY)).save_pretrained(tmp_path)
    heard: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # no torch_dtype deprecation from the example
        model, encode = finetune.build_model(tmp_path, 32, report=heard.append)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert encode("héllo").tolist() == [104, 195, 169, 108, 108, 111]  # UTF-8 bytes, not the empty tokenizer's []
    assert heard == [f"tokenizer: UTF-8 bytes ({tmp_path}'s Qwen2Tokenizer has 1 tokens and encodes 4096 characters "
                     "into 0 ids: no vocabulary files)"]


def test_a_directory_holding_only_config_json_gives_that_model_with_random_weights(tmp_path, finetune):
    transformers.Qwen2Config(tie_word_embeddings=True, **TINY).save_pretrained(tmp_path)
    heard: list[str] = []
    model, encode = finetune.build_model(tmp_path, 32, report=heard.append)
    assert type(model).__name__ == "Qwen2ForCausalLM" and model.config.hidden_size == 64
    assert model.lm_head.weight is model.model.embed_tokens.weight  # tied, as the config says
    assert heard[0] == f"model: {tmp_path} holds no weights, only its config: Qwen2ForCausalLM with random weights"
    assert encode("ab").tolist() == [97, 98]


def test_bytes_beyond_a_small_vocabulary_are_folded_into_it(tmp_path, finetune):
    transformers.LlamaConfig(**TINY | {"vocab_size": 100}).save_pretrained(tmp_path)
    _, encode = finetune.build_model(tmp_path, 32)
    assert encode("é").tolist() == [195 % 100, 169 % 100]


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "qwen3", "qwen3_moe", "mixtral"])
def test_every_model_type_builds_and_the_small_qwen_models_tie_their_head(finetune, model_type):
    model, _ = finetune.build_model(None, 32, model_type)
    assert model.config.model_type == model_type
    tied = model.lm_head.weight is model.get_input_embeddings().weight
    assert tied == (model_type in ("qwen2", "qwen3"))
