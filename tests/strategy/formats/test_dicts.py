"""from_dict is strict and never touches its input; to_dict gives only the fields that are set."""

from __future__ import annotations

import copy

import pytest

import strategy
from strategy import StrategyError


def test_to_dict_has_only_set_fields_with_proto_names():
    s = strategy.loads("hybrid_configs { mp_degree: 2 mp_configs { mp_async_allreduce: true } }")
    assert strategy.to_dict(s) == {"hybrid_configs": {"mp_degree": 2, "mp_configs": {"mp_async_allreduce": True}}}
    assert strategy.to_dict(strategy.DistributedStrategy()) == {}


def test_from_dict_rejects_a_misspelled_nested_key_without_mutating_the_input():
    d = {"hybrid_configs": {"mp_configs": {"mp_fused_linear_param_grad_ad": True}}}
    before = copy.deepcopy(d)
    with pytest.raises(StrategyError) as info:
        strategy.from_dict(d)
    assert d == before
    assert str(info.value) == (
        "<dict>: unknown field hybrid_configs.mp_configs.mp_fused_linear_param_grad_ad; "
        "did you mean 'mp_fused_linear_param_grad_add'?"
    )


def test_from_dict_checks_requires_rules_and_warns_under_warn():
    d = {"hybrid_configs": {"mp_configs": {"mp_skip_c_identity": True}}}
    with pytest.raises(StrategyError, match="requires hybrid_configs.mp_configs.mp_async_allreduce: true"):
        strategy.from_dict(d)
    with pytest.warns(strategy.StrategyWarning):
        assert strategy.from_dict(d, policy="warn").hybrid_configs.mp_configs.mp_skip_c_identity
    assert d == {"hybrid_configs": {"mp_configs": {"mp_skip_c_identity": True}}}


@pytest.mark.parametrize(
    ("d", "message"),
    [
        ({"hybrid_configs": {"mp_degree": True}}, "hybrid_configs.mp_degree expects an integer, got the bool true"),
        ({"hybrid_configs": [1]}, "hybrid_configs takes a single value, got a list"),
        ({"hybrid_configs": {1: 2}}, "hybrid_configs: keys must be strings, got 1"),
        ({"hybrid_configs": {"mp_configs": {"sync_mode": 3}}}, "hybrid_configs.mp_configs.sync_mode expects a quoted string, got the number 3"),
    ],
)
def test_from_dict_type_errors(d, message):
    with pytest.raises(StrategyError) as info:
        strategy.from_dict(d)
    assert info.value.message == message


def test_from_dict_treats_none_as_unset():
    assert strategy.from_dict({"hybrid_configs": {"mp_degree": None}}).hybrid_configs.HasField("mp_degree") is False
