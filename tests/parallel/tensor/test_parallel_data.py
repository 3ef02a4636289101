"""parallel.broadcast_data honours MpConfig.need_broadcast_data; NCCLConfig reaches the groups' communicators on NCCL."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import data_cases as cases
from parallel import communicator_options


def test_every_mp_rank_gets_its_groups_first_batch_with_shapes_and_dtypes(pools):
    got = pools(4).run(cases.broadcast, 2, 2, True)  # dp2 x mp2: mp groups [0, 1] and [2, 3]
    rank0 = torch.arange(15).view(3, 5).tolist()
    rank2 = (torch.arange(15).view(3, 5) + 200).tolist()
    assert [g["ids"] for g in got] == [rank0, rank0, rank2, rank2]
    assert [g["mask"] for g in got] == [[0.0, 0.0], [0.0, 0.0], [2.0, 2.0], [2.0, 2.0]]
    assert {g["dtype"] for g in got} == {"torch.bfloat16"} and {g["label"] for g in got} == {"label"}
    # one broadcast of the metadata length, one of the metadata, one per tensor
    assert all(g["collectives"] == {"broadcast": 4} for g in got)


@pytest.mark.parametrize(("dp", "mp", "flag"), [(1, 2, False), (2, 1, True)])
def test_off_or_without_tensor_parallelism_the_tensors_come_back_untouched(pools, dp, mp, flag):
    got = pools(2).run(cases.broadcast, dp, mp, flag)
    assert all(g["unchanged"] and g["collectives"] == {} for g in got)


def test_nccl_config_becomes_group_options_only_on_nccl():
    assert communicator_options({"commName": "tp", "nchannels": 4}, "gloo") == {}
    assert communicator_options({}, "nccl") == {}
    assert communicator_options({"commName": "tp"}, "nccl") == {"group_desc": "tp"}
    if hasattr(dist, "ProcessGroupNCCL"):  # CUDA builds of torch: the channel cap goes into the NCCL config
        options = communicator_options({"nchannels": 4}, "nccl")["pg_options"]
        assert options.config.max_ctas == 4
