"""The dp gradient average overlapped with the backward (DDP's buckets): when the update's last backward returns
the gradients are the dp average; gradient merge's other micro-steps reduce nothing; training equals one process."""

from __future__ import annotations

import pytest
import torch

import dp_cases as cases

DP2 = "hybrid_configs { dp_degree: 2 }"
MERGE = DP2 + " gradient_merge: true gradient_merge_configs { k_steps: 2 avg: true }"


def test_when_the_backward_returns_every_gradient_is_the_dp_average(pools):
    for r in pools(2).run(cases.gradient_at_backward_end, DP2):
        assert r["worst"] < 1e-7 and r["reduced"] == r["params"]


# last_comm_group_size_MB 1/128 (8 KiB): the first bucket holds the last parameter alone (8 KiB), the rest of the
# 89 KiB model fills one bucket of fuse_grad_size_in_MB (32 by default), as Paddle's DataParallel sizes its buffers.
FIRST_SMALL = DP2 + " last_comm_group_size_MB: 0.0078125"


@pytest.mark.parametrize("text, buckets", [(DP2, 1), (MERGE, 1), (FIRST_SMALL, 2)],
                         ids=["dp2", "dp2_merge2", "dp2_first_bucket_small"])
def test_dp2_trains_as_one_process_with_the_average_overlapped(pools, text, buckets):
    for r in pools(2).run(cases.averaged_when_backward_returns, text, 2):
        assert all(r["local_between"])  # (under merge: the first micro-step kept each rank's own gradient)
        assert r["buckets"] == buckets


def test_small_buckets_start_one_after_another_during_the_backward(pools):
    r = pools(2).run(cases.averaged_when_backward_returns, DP2, 2, 16 * 1024)[0]
    assert r["buckets"] > 4
    for starts in r["starts"]:
        assert len(starts) == r["buckets"] and starts == sorted(starts) and starts[-1] > starts[0]


def test_a_rank_whose_loss_reaches_no_parameter_still_joins_the_average_in_order(pools):
    for r in pools(2).run(cases.one_rank_reaches_no_parameter):
        assert torch.equal(r["weight"], r["expected"])
