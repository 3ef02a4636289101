"""`--set a.b.c=value` overrides are typed by the schema and applied after the file."""

from __future__ import annotations

import pytest

import strategy
from strategy import StrategyError


def test_overrides_apply_after_the_file_with_schema_types(write):
    path = write("s.prototxt", "hybrid_configs { mp_degree: 2 }")
    s = strategy.load(path, overrides=[
        "hybrid_configs.mp_degree=4",
        "hybrid_configs.mp_configs.mp_async_allreduce=true",
        "hybrid_configs.mp_configs.sync_mode=average",
    ])
    assert s.hybrid_configs.mp_degree == 4
    assert s.hybrid_configs.mp_configs.mp_async_allreduce is True
    assert s.hybrid_configs.mp_configs.sync_mode == "average"


def test_an_override_can_satisfy_a_requires_rule(write):
    path = write("s.yaml", "hybrid_configs: {mp_configs: {mp_skip_c_identity: true}}")
    s = strategy.load(path, overrides=["hybrid_configs.mp_configs.mp_async_allreduce=true"])
    assert s.hybrid_configs.mp_configs.mp_skip_c_identity


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("hybrid_configs.mp_degre=2", "unknown field: hybrid_configs has no field 'mp_degre'; did you mean 'mp_degree'?"),
        ("hybrid_configs.mp_degree=four", "hybrid_configs.mp_degree expects an integer, got the string 'four'"),
        ("hybrid_configs.mp_configs.sync_grad=maybe", "hybrid_configs.mp_configs.sync_grad expects true or false, got the string 'maybe'"),
        ("hybrid_configs=1", "hybrid_configs is a message: expected a mapping of its fields, got the string '1'"),
        ("hybrid_configs.mp_degree", "an override reads path.to.field=value, e.g. hybrid_configs.mp_degree=2"),
        ("hybrid_configs.mp_degree=0", "hybrid_configs.mp_degree must be >= 1; got 0"),
    ],
)
def test_bad_overrides_name_the_override_and_the_field(override, message):
    with pytest.raises(StrategyError) as info:
        strategy.loads("", overrides=[override])
    assert info.value.source == f"--set {override}"
    assert info.value.message == message


def test_a_requires_rule_broken_by_an_override_points_at_it():
    with pytest.raises(StrategyError) as info:
        strategy.loads("", overrides=["hybrid_configs.mp_configs.mp_fused_linear_param_grad_add=1"])
    assert str(info.value) == (
        "--set hybrid_configs.mp_configs.mp_fused_linear_param_grad_add=1: hybrid_configs.mp_configs."
        "mp_fused_linear_param_grad_add requires hybrid_configs.mp_configs.mp_async_allreduce: true"
    )


def test_a_list_sets_a_repeated_field_item_by_item():
    s = strategy.loads("", overrides=['recompute_configs.checkpoints=["model.layers.*","lm_head"]'])
    assert list(s.recompute_configs.checkpoints) == ["model.layers.*", "lm_head"]
    s = strategy.loads("", overrides=["hybrid_configs.order=[dp, sharding, 'pp', mp]"])
    assert list(s.hybrid_configs.order) == ["dp", "sharding", "pp", "mp"]


def test_a_bare_value_on_a_repeated_field_is_one_item():
    s = strategy.loads("", overrides=["recompute_configs.checkpoints=model.layers.*"])
    assert list(s.recompute_configs.checkpoints) == ["model.layers.*"]


def test_a_list_of_numbers_is_typed_by_the_schema():
    s = strategy.loads("", overrides=["recompute_configs.checkpoint_shape=[1, 2,3]"])
    assert list(s.recompute_configs.checkpoint_shape) == [1, 2, 3]


def test_a_list_replaces_the_files_items_and_an_empty_one_clears_them():
    text = 'recompute_configs { checkpoints: "a" checkpoints: "b" }'
    assert list(strategy.loads(text, overrides=["recompute_configs.checkpoints=[c]"]).recompute_configs.checkpoints) == ["c"]
    assert list(strategy.loads(text, overrides=["recompute_configs.checkpoints=[]"]).recompute_configs.checkpoints) == []


def test_an_item_with_a_comma_is_quoted():
    s = strategy.loads("", overrides=['recompute_configs.checkpoints=["a,b", c]'])
    assert list(s.recompute_configs.checkpoints) == ["a,b", "c"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("hybrid_configs.order=[dp, tp]",
         'hybrid_configs.order[1] must be one of "dp", "pp", "sharding", "sep", "cp", "mp", "ep", "moe_sharding"; got "tp"'),
        ("hybrid_configs.order=[dp, mp, dp]", 'hybrid_configs.order[2] = "dp" repeats hybrid_configs.order[0]; keep one'),
        ("recompute_configs.checkpoint_shape=[1, x]", "recompute_configs.checkpoint_shape expects an integer, got the string 'x'"),
        ('recompute_configs.checkpoints=["a, b]', "recompute_configs.checkpoints: a quote (\") is not closed in [\"a, b]"),
        ("recompute_configs.checkpoints=[a, b", 'recompute_configs.checkpoints takes a list written [a, b] (quote items '
                                                'with commas: ["a,b"]); got [a, b'),
        ("recompute_configs.checkpoints=[a,,b]", 'recompute_configs.checkpoints: an empty item in [a,,b]; quote an empty string ("")'),
        ("hybrid_configs.mp_configs.tp_plan=[x]", "hybrid_configs.mp_configs.tp_plan is a list of TpRule messages; --set takes "
                                                  "values only: write them in the strategy file"),
    ],
)
def test_bad_list_overrides_name_the_override_the_field_and_the_fix(override, message):
    with pytest.raises(StrategyError) as info:
        strategy.loads("", overrides=[override])
    assert info.value.source == f"--set {override}"
    assert info.value.message == message
