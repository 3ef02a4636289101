"""The expert (MoE) topology of ep_degree > 1: Paddle 3.3.1's EPHybridCommunicateGroup groups, its asserts as located
errors, the experts' replicas it does not allow (dp > 1), how resolve and explain give them."""

from __future__ import annotations

import json

import pytest

import strategy
from strategy.resolution import experts
from strategy.cli import main


def groups(text: str, world: int) -> dict[str, list[list[int]]]:
    found = experts.requested(strategy.loads(text), world)
    assert found is not None
    return {axis: found.topology.groups(axis) for axis in found.topology.order}


# Groups Paddle 3.3.1 builds for these files (its EPHybridCommunicateGroup run for every rank on CPU), with its MoE
# order: sharding, moe_sharding, pp, sep, cp, dp, ep, mp.
def test_paddles_expert_groups_with_moe_sharding_over_the_whole_sharding_group():
    g = groups("hybrid_configs { dp_degree: 1 sharding_degree: 8 ep_degree: 2 moe_sharding_degree: 4 }", 8)
    assert g["ep"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert g["moe_sharding"] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert g["edp"] == [[r] for r in range(8)]  # Paddle's world is pp × moe_sharding × ep: no replicas beyond


def test_paddles_expert_groups_where_ep_spans_the_mp_ranks():
    text = "hybrid_configs { dp_degree: 1 mp_degree: 2 sharding_degree: 4 ep_degree: 4 moe_sharding_degree: 2 }"
    g = groups(text, 8)
    assert g["ep"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert g["moe_sharding"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    topology = strategy.explanation(strategy.loads(text), world_size=8).topology
    assert topology.groups("sharding") == [[0, 2, 4, 6], [1, 3, 5, 7]]  # Paddle's dense sharding group
    assert topology.groups("mp") == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_the_world_beyond_pp_moe_sharding_and_ep_replicates_the_experts():
    """Paddle asserts dp_degree 1 under its expert topology; here dp ranks beyond ep hold the same experts."""
    assert groups("hybrid_configs { ep_degree: 2 }", 2)["ep"] == [[0, 1]]  # dp inferred 2: experts over the data ranks
    g = groups("hybrid_configs { dp_degree: 4 ep_degree: 2 }", 4)
    assert g["ep"] == [[0, 1], [2, 3]]
    assert g["edp"] == [[0, 2], [1, 3]]  # two expert blocks, each held by two data ranks


@pytest.mark.parametrize(("text", "world", "where", "message"), [
    ('hybrid_configs { ep_degree: 2 order: ["dp", "mp"] }', 2, "1:31",
     'hybrid_configs.order does not list "ep" while ep_degree is 2: Paddle then builds its plain topology and runs '
     "with ep_degree silently ignored"),
    ('hybrid_configs { ep_degree: 2 order: ["dp", "ep", "mp"] }', 2, "1:31",
     'hybrid_configs.order lists "ep" but not "moe_sharding" (Paddle asserts both under its expert topology)'),
    ("hybrid_configs { ep_degree: 2 sep_degree: 2 }", 4, "1:18",
     "ep_degree 2 with sep_degree 2: Paddle asserts sep_degree 1 under its expert topology; set one of them to 1"),
    ("hybrid_configs { ep_degree: 2 cp_degree: 2 }", 4, "1:18",
     "ep_degree 2 with cp_degree 2: Paddle carves cp out of each sharding group under its expert topology"),
    ("hybrid_configs { moe_sharding_degree: 2 }", 2, "1:18",
     "moe_sharding_degree 2 shards the experts' state, but ep_degree is 1"),
    ("hybrid_configs { sharding_degree: 3 ep_degree: 2 moe_sharding_degree: 2 }", 6, "1:50",
     "moe_sharding_degree 2 does not divide sharding_degree 3"),
    ("hybrid_configs { mp_degree: 3 ep_degree: 2 }", 3, "1:31",
     "pp_degree 1 × moe_sharding_degree 1 × ep_degree 2 = 2 does not divide the world size 3"),
    ("hybrid_configs { dp_degree: 1 pp_degree: 2 sharding_degree: 4 ep_degree: 2 moe_sharding_degree: 2 }", 8, "1:76",
     "moe_sharding_degree 2 before pp (pp_degree 2) in the order, with dense sharding 2 after it"),
    ("hybrid_configs { dp_degree: 2 pp_degree: 2 mp_degree: 2 ep_degree: 2 }", 8, "1:57",
     "with ep_degree 2 the experts' 2 replicas (the world beyond pp × moe_sharding × ep) put rank 2 in another "
     "pipeline stage than the dense layout does"),
], ids=["order_without_ep", "order_without_moe_sharding", "sep", "cp", "moe_sharding_without_ep", "sharding_split",
        "world", "sharding_across_pp", "stages"])
def test_what_paddle_asserts_of_an_expert_layout_is_a_located_error(text, world, where, message):
    for check in (lambda s: strategy.resolve(s, world_size=world), lambda s: experts.requested(s, world)):
        with pytest.raises(strategy.StrategyError) as e:
            check(strategy.loads(text))
        assert str(e.value).startswith(f"<string>:{where}: {message}"), str(e.value)


def test_a_paddle_moe_order_with_ep_and_moe_sharding_loads_and_lays_out_the_dense_axes():
    s = strategy.loads('hybrid_configs { order: ["sharding", "moe_sharding", "pp", "sep", "cp", "dp", "ep", "mp"] '
                       "mp_degree: 2 }")
    assert strategy.resolve(s, world_size=4).order == ("sharding", "pp", "sep", "cp", "dp", "mp")


def test_resolve_gives_the_expert_topology_and_paddles_dense_order(recwarn):
    r = strategy.resolve(strategy.loads("hybrid_configs { dp_degree: 4 ep_degree: 2 }"), world_size=4)
    assert (r.experts.ep_degree, r.experts.replicas) == (2, 2)
    assert r.experts.order == ("edp", "moe_sharding", "pp", "ep") and r.experts.dims == (2, 1, 1, 2)
    assert r.order == ("pp", "sharding", "sep", "cp", "dp", "mp")
    assert any("using the order Paddle's MoE runs set" in n for n in r.notes)


def test_ep_configs_nccl_config_sets_the_ep_groups_communicator():
    r = strategy.resolve(strategy.loads('hybrid_configs { ep_degree: 2 ep_configs { nccl_config { commName: "experts" } '
                                        "} }"), world_size=2)
    assert r.nccl == {"ep": {"commName": "experts"}}
    r = strategy.resolve(strategy.loads('hybrid_configs { ep_configs { nccl_config { commName: "experts" } } }'),
                         world_size=2)
    assert r.nccl == {} and "hybrid_configs.ep_configs.nccl_config.commName is set but has no effect: " \
        "hybrid_configs.ep_degree is 1." in r.notes


def test_explain_shows_the_expert_groups(capsys, write):
    path = write("moe.prototxt", "hybrid_configs { dp_degree: 1 mp_degree: 2 sharding_degree: 4 ep_degree: 4 "
                                 "moe_sharding_degree: 2 }")
    assert main(["explain", str(path), "--world-size", "8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("    moe_sharding groups")))
    assert lines[at - 2].startswith("  expert groups (order edp, moe_sharding, pp, ep; ep innermost; edp: the ranks")
    assert lines[at:at + 2] == ["    moe_sharding groups: [0, 4] [1, 5] [2, 6] [3, 7]",
                                "    ep groups: [0, 1, 2, 3] [4, 5, 6, 7]"]
    assert main(["explain", str(path), "--world-size", "8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["groups"]["experts"]
    assert data["order"] == ["edp", "moe_sharding", "pp", "ep"]
    assert data["axes"]["ep"]["implemented"] and data["axes"]["moe_sharding"]["implemented"]


def test_explain_splits_the_memory_into_dense_and_expert_rows(capsys, write):
    path = write("moe.prototxt", "hybrid_configs { ep_degree: 4 }")
    assert main(["explain", str(path), "--world-size", "4", "--params", "47e9", "--expert-params", "45e9"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("  of them")))
    assert lines[at:at + 2] == ["  of them 45,000,000,000 in experts, split over ep 4 × pp 1 (each rank its block, whole on the",
                                "      replicas beyond ep)"]
    rows = {line.split("  ")[1].strip(): line.split()[-2:] for line in lines[at + 3:at + 7]}
    assert rows["dense per rank"] == ["29.80", "GiB"]  # 2e9 × 16 bytes, nothing splits it
    assert rows["experts per rank"] == ["167.64", "GiB"]  # 45e9 × 16 bytes / ep 4
    assert rows["one process"] == ["700.35", "GiB"]
    assert main(["explain", str(path), "--world-size", "4", "--expert-params", "45e9"]) == 2
    assert "--expert-params is the experts' share of --params" in capsys.readouterr().err


def test_explain_shards_the_expert_rows_over_moe_sharding_as_the_stage_says(capsys, write):
    path = write("moe.prototxt", "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } ep_degree: 2 "
                                 "moe_sharding_degree: 2 }")
    assert main(["explain", str(path), "--world-size", "4", "--params", "47e9", "--expert-params", "45e9"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("  of them")))
    assert lines[at:at + 2] == ["  of them 45,000,000,000 in experts, split over ep 2 × pp 1 (each rank its block, sharded over",
                                "      moe_sharding 2 at stage 3, whole on the replicas beyond)"]
    rows = {line.split("  ")[1].strip(): line.split()[-2:] for line in lines[at + 3:at + 7]}
    assert rows["experts per rank"] == ["167.64", "GiB"]  # 45e9 × 16 bytes / ep 2 / moe_sharding 2


def test_resolved_names_the_expert_degrees_beside_the_dense_ones():
    text = 'hybrid_configs { sharding_degree: 2 ep_degree: 2 moe_sharding_degree: 2 order: ["dp", "pp", "sharding", "moe_sharding", "ep", "sep", "mp"] }'
    r = strategy.resolve(strategy.loads(text), world_size=4)
    assert (r.ep_degree, r.moe_sharding_degree) == (2, 2)
    assert r.degrees == {"dp": 2, "pp": 1, "sharding": 2, "sep": 1, "cp": 1, "mp": 1, "ep": 2, "moe_sharding": 2}
    assert r.world_size == 4 and list(r.topology.degrees) == list(r.order)  # the experts lie over the same ranks
    plain = strategy.resolve(strategy.loads(""), world_size=2)
    assert plain.ep_degree == 1 and "ep" not in plain.degrees
