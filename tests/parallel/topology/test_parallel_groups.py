"""parallel.init: Paddle's axis order, agreement between ranks before any subgroup, clear errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

import strategy
import group_cases as cases


@pytest.mark.parametrize(
    ("dp", "mp", "groups"),
    [
        (2, 2, ([[0, 1], [2, 3]], [[0, 2], [1, 3]])),
        (1, 4, ([[0, 1, 2, 3]], [[0], [1], [2], [3]])),
        (4, 1, ([[0], [1], [2], [3]], [[0, 1, 2, 3]])),
    ],
)
def test_layout_puts_mp_ranks_adjacent_and_dp_outermost(dp, mp, groups):
    s = strategy.loads(f"hybrid_configs {{ dp_degree: {dp} mp_degree: {mp} }}")
    got = strategy.resolve(s, world_size=dp * mp).process_groups()
    assert (got["mp"], got["dp"]) == groups


def test_init_builds_dp2_mp2_groups_in_four_processes(pools):
    got = pools(4).run(cases.layout, 2, 2)
    assert [g["mp_ranks"] for g in got] == [[0, 1], [0, 1], [2, 3], [2, 3]]
    assert [g["dp_ranks"] for g in got] == [[0, 2], [1, 3], [0, 2], [1, 3]]
    assert [(g["mp_rank"], g["dp_rank"]) for g in got] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert all(g["sizes"] == (2, 2, 4) and g["current_is_it"] for g in got)


@pytest.mark.parametrize(("dp", "mp"), [(2, 2), (4, 1), (1, 4)])
def test_every_axis_and_mesh_dim_is_the_resolved_layout_on_four_ranks(pools, dp, mp):
    got = pools(4).run(cases.axes_match_the_resolved_layout, f"hybrid_configs {{ dp_degree: {dp} mp_degree: {mp} }}")
    # dp and sharding positions take different batches; mp positions share one.
    assert [g["data"] for g in got] == [(r // mp, dp) for r in range(4)]


def test_every_axis_and_mesh_dim_is_the_resolved_layout_on_eight_ranks(pools):
    got = pools(8).run(cases.axes_match_the_resolved_layout, "hybrid_configs { dp_degree: 2 mp_degree: 4 }", timeout=120)
    assert [g["coordinates"]["dp"] for g in got] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [g["data"] for g in got] == [(r // 4, 2) for r in range(8)]


def test_current_before_init_is_a_clear_runtime_error(pools):
    message = pools(2).run(cases.current_before_init)[0]
    assert message == "no hybrid group: call parallel.init(strategy) first (under torchrun)"


def test_ranks_with_different_strategies_fail_fast_on_every_rank(pools):
    results = pools(2).run(cases.disagreeing_strategies, timeout=30)
    for message, seconds in results:
        assert "ranks disagree on the strategy: ranks [1] differ from rank 0" in message
        assert "mp.async_allreduce: rank 0: False, rank 1: True" in message
        assert seconds < 10
    assert results[0][0] == results[1][0]


def test_a_rank_that_cannot_load_makes_every_rank_raise(pools, tmp_path):
    missing = str(tmp_path / "missing.prototxt")
    messages = pools(2).run(cases.one_rank_cannot_load, missing, timeout=30)
    assert "cannot read the file" in messages[1]
    assert messages[0].startswith("rank 1: rank 1 could not use its strategy")


def test_init_accepts_a_path(pools, write):
    path = write("tp.yaml", "hybrid_configs: {mp_degree: 2, mp_configs: {mp_async_allreduce: true}}")
    assert pools(2).run(cases.init_from_path, str(path)) == [(2, True), (2, True)]


def test_destroy_releases_the_groups_and_is_idempotent(pools):
    assert pools(2).run(cases.destroy_releases_groups) == [True, True]


@pytest.mark.parametrize(("text", "derived", "buckets"), [
    ("hybrid_configs { dp_degree: 2 sharding_degree: 2 sharding_configs { stage: 3 } "
     "order: ['sharding', 'dp', 'pp', 'sep', 'mp'] }", ["data", "state"], False),
    ("hybrid_configs { dp_degree: 2 mp_degree: 2 }", ["state"], True),
], ids=["sharding-outside-dp", "dp-buckets"])
def test_a_dropped_model_its_optimizer_and_meshes_are_freed_and_their_group_threads_end(pools, text, derived, buckets):
    for result in pools(4).run(cases.destroy_lets_the_meshes_and_their_threads_go, text):
        assert result["gathered"] and result["derived"] == derived and result["buckets"] == buckets
        assert result["alive"] == 0 and result["threads"] <= 0, result


def test_import_parallel_then_exit_without_destroy_is_clean():
    code = "import parallel, strategy; print(parallel.current.__doc__ is not None)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_every_axis_is_one_record_and_the_expert_axes_have_groups_too(pools):
    ep = 'hybrid_configs { ep_degree: 2 order: ["dp", "pp", "sharding", "moe_sharding", "ep", "sep", "mp"] }'
    for rank, r in enumerate(pools(2).run(cases.every_axis_by_name, ep)):
        assert r["records"] == r["flat"]
        assert r["records"]["ep"] == (rank, 2, (0, 1)) and r["sizes"]["ep"] == 2 and r["sizes"]["edp"] == 1
    plain = pools(2).run(cases.every_axis_by_name, "hybrid_configs { dp_degree: 2 }")[0]
    assert plain["records"]["ep"] == (0, 1, ()) and plain["sizes"]["dp"] == 2
    assert plain["sizes"]["ep"] == "hcg.group('ep'): there is no ep group at ep_degree 1"
