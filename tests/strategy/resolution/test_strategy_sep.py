"""sep_degree in the strategy: resolved strictly, a data axis that does not count, refused beside cp_degree."""

from __future__ import annotations

import pytest

import strategy


def test_sep_degree_resolves_strictly_with_dp_inferred_over_it():
    r = strategy.resolve(strategy.loads("hybrid_configs { dp_degree: -1 mp_degree: 2 sep_degree: 2 }"), world_size=8)
    assert (r.dp_degree, r.sep_degree, r.mp_degree) == (2, 2, 2)


def test_at_mp2_x_sep2_the_sep_groups_pair_ranks_two_apart():
    r = strategy.resolve(strategy.loads("hybrid_configs { mp_degree: 2 sep_degree: 2 }"), world_size=4)
    assert r.process_groups()["sep"] == [[0, 2], [1, 3]]
    assert r.process_groups()["mp"] == [[0, 1], [2, 3]]


@pytest.mark.parametrize("policy", ["strict", "warn"])
def test_sep_beside_cp_is_an_error_at_both_fields(tmp_path, policy):
    path = tmp_path / "sc.prototxt"
    path.write_text("hybrid_configs {\n  sep_degree: 2\n  cp_degree: 2\n}\n")
    with pytest.raises(strategy.StrategyError) as info:
        strategy.resolve(strategy.load(path, policy=policy), world_size=4, policy=policy)
    assert str(info.value) == (f"{path}:2:3: hybrid_configs.sep_degree (2) and hybrid_configs.cp_degree (2, at {path}:3:3) "
                               "cannot both be above 1 (Paddle refuses the pair too); keep one of them at 1")


def test_explain_shows_the_sep_groups_and_each_ranks_share_of_a_row():
    text = strategy.explain(strategy.loads("hybrid_configs { sep_degree: 2 }"), world_size=2)
    assert "  sep groups: [0, 1]" in text
    assert ("  each sep group splits every row into 2 contiguous chunks (rank 0 tokens [0/2, 1/2), rank 1 tokens\n"
            "      [1/2, 2/2) of its length); they read the same batch") in text
