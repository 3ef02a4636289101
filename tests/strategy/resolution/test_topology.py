"""The six hybrid axes in Paddle's order: groups and coordinates as Paddle builds them, the order a file gives."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT

import strategy
from strategy import StrategyError, Topology
from strategy.resolution import layout
from strategy.resolution.topology import complete_order

from test_cli_check import strategy_cli

# Written by tests/fixtures/make_paddle_topology.py from Paddle 3.3.1's CommunicateTopology.
PADDLE = json.loads((ROOT / "tests" / "fixtures" / "paddle_topology.json").read_text())
CASES = {case["name"]: case for case in PADDLE["cases"]}
DEFAULT = ("dp", "pp", "sharding", "sep", "cp", "mp")


def test_the_fixture_comes_from_paddle_3_3_1():
    assert PADDLE["paddle"] == "3.3.1"
    assert "dp2 pp2 sharding2 mp2" in CASES and "dp2 pp2 sharding2 mp2, sharding_first" in CASES


@pytest.mark.parametrize("name", list(CASES))
def test_groups_are_the_ones_paddles_get_comm_list_builds(name):
    case = CASES[name]
    topology = Topology.of(case["degrees"], case["order"])
    assert {axis: topology.groups(axis) for axis in case["order"]} == case["groups"]


@pytest.mark.parametrize("name", list(CASES))
def test_coordinates_are_the_ones_paddles_get_coord_gives(name):
    case = CASES[name]
    topology = Topology.of(case["degrees"], case["order"])
    for rank, expected in enumerate(case["coordinates"]):
        assert topology.coordinates(rank) == dict(zip(case["order"], expected))
        assert topology.rank(topology.coordinates(rank)) == rank


def test_sharding_first_swaps_the_sharding_and_pp_groups():
    default, first = CASES["dp2 pp2 sharding2 mp2"]["groups"], CASES["dp2 pp2 sharding2 mp2, sharding_first"]["groups"]
    assert first["sharding"] == default["pp"] and first["pp"] == default["sharding"]
    assert first["dp"] == default["dp"] and first["mp"] == default["mp"]


def test_a_rank_outside_the_world_has_no_coordinates():
    with pytest.raises(ValueError, match="rank 4 is outside 0..3"):
        Topology.of({"dp": 2, "mp": 2}, ("dp", "mp")).coordinates(4)


def test_a_five_name_order_keeps_the_left_out_axis_in_its_default_place():
    assert complete_order(["dp", "sharding", "pp", "sep", "mp"], DEFAULT) == ("dp", "sharding", "pp", "sep", "cp", "mp")
    assert complete_order(["mp", "dp"], DEFAULT) == ("mp", "pp", "sharding", "sep", "cp", "dp")


def test_resolved_process_groups_map_every_axis_in_order_to_paddles_groups():
    case = CASES["dp3 mp2"]
    r = strategy.resolve(strategy.loads("hybrid_configs { mp_degree: 2 }"), world_size=6)
    assert r.order == DEFAULT and list(r.process_groups()) == list(DEFAULT)
    assert r.process_groups() == case["groups"]
    assert r.degrees == {"dp": 3, "pp": 1, "sharding": 1, "sep": 1, "cp": 1, "mp": 2}
    assert r.coordinates(5) == dict(zip(DEFAULT, case["coordinates"][5])) == {**dict.fromkeys(DEFAULT, 0), "dp": 2, "mp": 1}


def test_a_files_order_is_resolved_to_all_six_axes():
    s = strategy.loads('hybrid_configs { mp_degree: 2 order: ["dp", "sharding", "pp", "sep", "mp"] }')
    r = strategy.resolve(s, world_size=4)
    assert r.order == ("dp", "sharding", "pp", "sep", "cp", "mp")
    assert list(r.degrees) == list(r.order)


def test_an_innermost_dp_puts_the_dp_ranks_side_by_side():
    r = strategy.resolve(strategy.loads('hybrid_configs { mp_degree: 2 order: ["mp", "dp"] }'), world_size=4)
    assert r.process_groups()["dp"] == [[0, 1], [2, 3]] and r.process_groups()["mp"] == [[0, 2], [1, 3]]


def test_dp_is_inferred_over_all_five_other_axes():
    s = strategy.loads("hybrid_configs { pp_degree: 2 sharding_degree: 2 sep_degree: 2 mp_degree: 2 }")
    assert layout.requested(s, 32).degrees == {"dp": 2, "pp": 2, "sharding": 2, "sep": 2, "cp": 1, "mp": 2}
    s = strategy.loads("hybrid_configs { cp_degree: 2 mp_degree: 2 }")
    assert layout.requested(s, 8).degrees["dp"] == 2


def test_dp_cannot_be_inferred_when_the_other_axes_do_not_divide_the_world():
    s = strategy.loads("hybrid_configs { sharding_degree: 4 mp_degree: 2 }")
    with pytest.raises(StrategyError, match=r"cannot infer dp_degree: world size 12 is not divisible .* product 8\)"):
        layout.requested(s, 12)


def test_an_unknown_axis_name_is_an_error_at_the_item():
    with pytest.raises(StrategyError) as info:
        strategy.loads('hybrid_configs {\n  order: ["dp", "tp"]\n}')
    assert str(info.value) == ('<string>:2:17: hybrid_configs.order[1] must be one of "dp", "pp", "sharding", "sep", '
                               '"cp", "mp", "ep", "moe_sharding"; got "tp"')
    assert info.value.field == "hybrid_configs.order[1]"


def test_an_axis_named_twice_is_an_error_at_the_repeat():
    with pytest.raises(StrategyError) as info:
        strategy.loads("hybrid_configs:\n  order: [dp, mp, dp]\n", format="yaml")
    assert str(info.value) == '<string>:2:19: hybrid_configs.order[2] = "dp" repeats hybrid_configs.order[0]; keep one'


def test_an_order_leaving_out_an_axis_of_degree_above_1_is_an_error_at_the_field():
    s = strategy.loads('hybrid_configs {\n  mp_degree: 2\n  order: ["dp", "pp"]\n}')
    with pytest.raises(StrategyError) as info:
        strategy.resolve(s, world_size=4)
    assert str(info.value) == ('<string>:3:3: hybrid_configs.order leaves out mp (degree 2); list every axis whose '
                               'degree is > 1, e.g. order: ["dp", "pp", "mp"]')


def test_an_order_leaving_out_an_inferred_dp_above_1_is_an_error():
    s = strategy.loads('hybrid_configs {\n  mp_degree: 2\n  order: ["mp"]\n}')
    assert strategy.resolve(s, world_size=2).order == ("dp", "pp", "sharding", "sep", "cp", "mp")  # dp is 1: fine
    with pytest.raises(StrategyError, match=r'^<string>:3:3: hybrid_configs.order leaves out dp \(degree 2\);'):
        strategy.resolve(s, world_size=4)


def test_validate_reports_a_bad_order_at_its_line(write):
    path = write("o.yaml", "hybrid_configs:\n  mp_degree: 2\n  order: [dp, tp]\n")
    result = strategy_cli("validate", str(path))
    assert result.returncode == 1
    assert result.stderr.strip() == f'{path}:3:15: hybrid_configs.order[1] must be one of "dp", "pp", "sharding", "sep", "cp", "mp", "ep", "moe_sharding"; got "tp"'
    path = write("p.yaml", "hybrid_configs:\n  mp_degree: 2\n  order: [dp]\n")
    result = strategy_cli("validate", str(path), "--world-size", "2")
    assert result.returncode == 1
    assert result.stderr.startswith(f"{path}:3:3: hybrid_configs.order leaves out mp (degree 2)")


def test_explain_prints_the_groups_of_every_axis_above_1_in_order(write):
    path = write("h.prototxt", "hybrid_configs { cp_degree: 2 sharding_degree: 2 mp_degree: 2 }")
    result = strategy_cli("explain", str(path), "--world-size", "16")
    assert result.returncode == 0, result.stderr
    groups = result.stdout.split("\n\n")[-1].splitlines()
    assert groups[:5] == [
        "process groups for 16 ranks (order dp, pp, sharding, sep, cp, mp; mp innermost):",
        "  dp groups: [0, 8] [1, 9] [2, 10] [3, 11] [4, 12] [5, 13] [6, 14] [7, 15]",
        "  sharding groups: [0, 4] [1, 5] [2, 6] [3, 7] [8, 12] [9, 13] [10, 14] [11, 15]",
        "  cp groups: [0, 2] [1, 3] [4, 6] [5, 7] [8, 10] [9, 11] [12, 14] [13, 15]",
        "  mp groups: [0, 1] [2, 3] [4, 5] [6, 7] [8, 9] [10, 11] [12, 13] [14, 15]",
    ]
    assert groups[5:] == ["  each cp group cuts every row into 4 chunks (rank 0 chunks 0 and 3, rank 1 chunks 1 and 2); they",
                          "      read the same batch"]
    dp_row = next(line for line in result.stdout.splitlines() if line.startswith("hybrid_configs.dp_degree"))
    assert dp_row.split()[-2:] == ["inferred:", "2"]  # the file's layout, as the groups show it


def test_explain_follows_the_files_order():
    s = strategy.loads('hybrid_configs { mp_degree: 2 order: ["dp", "sharding", "pp", "sep", "mp"] }')
    text = strategy.explain(s, world_size=4)
    assert "process groups for 4 ranks (order dp, sharding, pp, sep, cp, mp; mp innermost):" in text
    effect = {r.path: r.effect for r in strategy.explanation(s, world_size=4).rows}["hybrid_configs.order"]
    assert effect == "outermost first: dp, sharding, pp, sep, cp, mp"


def test_explain_on_one_rank_says_there_are_no_groups():
    assert strategy.explain(strategy.loads(""), world_size=1).endswith(
        "process groups for 1 rank (order dp, pp, sharding, sep, cp, mp; mp innermost):\n  none: every axis has degree 1")


def test_explain_of_degrees_that_do_not_fit_the_world_is_the_error_a_run_gets():
    with pytest.raises(StrategyError, match=r"^cannot infer dp_degree: world size 4 is not divisible .* cp_degree=3"):
        strategy.explain(strategy.loads("hybrid_configs { cp_degree: 3 }"), world_size=4)
