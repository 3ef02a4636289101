"""Strategy files written by PaddlePaddle 3.3.1 load unchanged, and we write them back byte for byte."""

from __future__ import annotations

import pytest

import strategy
from conftest import PADDLE_CASES, PADDLE_FIXTURES

ENCODINGS = {"prototxt": "prototxt", "json": "json", "binpb": "binary"}


def test_all_three_paddle_cases_are_present():
    assert PADDLE_CASES == ["dp2_tp2_sync_average", "tp2_async_skip", "tp2_defaults"]


@pytest.mark.parametrize("case", PADDLE_CASES)
def test_three_encodings_load_to_the_same_message(case):
    loaded = [strategy.load(PADDLE_FIXTURES / f"{case}.{ext}") for ext in ENCODINGS]
    assert loaded[0] == loaded[1] == loaded[2]
    assert loaded[0].hybrid_configs.mp_degree == 2


@pytest.mark.parametrize("case", PADDLE_CASES)
@pytest.mark.parametrize("ext", list(ENCODINGS))
def test_dump_reproduces_paddles_bytes(case, ext):
    source = PADDLE_FIXTURES / f"{case}.{ext}"
    out = strategy.dumps(strategy.load(source), format=ENCODINGS[ext])
    expected = source.read_bytes()
    got = out if isinstance(out, bytes) else out.encode()
    # MessageToJson output has no trailing newline; ours ends the file with one.
    assert got.rstrip(b"\n") == expected.rstrip(b"\n")


def test_paddle_values_survive():
    s = strategy.load(PADDLE_FIXTURES / "dp2_tp2_sync_average.binpb")
    mp = s.hybrid_configs.mp_configs
    assert (s.hybrid_configs.dp_degree, mp.sync_param, mp.sync_grad, mp.sync_moment, mp.sync_mode) == (2, True, True, True, "average")
    resolved = strategy.resolve(s, world_size=4)
    assert (resolved.dp_degree, resolved.mp_degree) == (2, 2)
    assert resolved.mp.sync_mode == "average"


def test_paddle_async_skip_resolves_both_flags_on():
    resolved = strategy.resolve(strategy.load(PADDLE_FIXTURES / "tp2_async_skip.prototxt"), world_size=2)
    assert resolved.mp.async_allreduce and resolved.mp.skip_c_identity
    assert not resolved.mp.fused_linear_param_grad_add
    assert resolved.notes == ()
