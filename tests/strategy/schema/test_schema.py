"""The schema keeps Paddle's names, numbers and defaults, and declares its rules as custom options."""

from __future__ import annotations

import pytest

import strategy
from strategy import schema
from strategy._generated.strategy_options_pb2 import DECIDED_HERE, IMPLEMENTED, NO_EFFECT, NOT_IMPLEMENTED

from test_paddle_schema import PADDLE


def test_fields_beyond_paddle_are_numbered_from_1000():
    for message in _messages():
        if message.name not in PADDLE["messages"]:
            continue  # a message of our own (TpRule) numbers from 1: no Paddle file can hold it
        paddle = {f["name"] for f in PADDLE["messages"][message.name]}
        for field in message.fields:
            if field.name not in paddle:
                assert field.number >= 1000, f"{message.name}.{field.name}"


def _messages():
    from strategy._generated import distributed_strategy_pb2

    seen, todo = {}, [distributed_strategy_pb2.DistributedJobInfo.DESCRIPTOR]
    while todo:
        desc = todo.pop()
        if desc.name not in seen:
            seen[desc.name] = desc
            todo += [f.message_type for f in desc.fields if f.message_type is not None]
    return list(seen.values())


@pytest.mark.parametrize(
    ("path", "default"),
    [
        ("hybrid_configs.dp_degree", -1),
        ("hybrid_configs.mp_degree", 1),
        ("hybrid_configs.pp_degree", 1),
        ("hybrid_configs.sharding_degree", 1),
        ("hybrid_configs.sep_degree", 1),
        ("hybrid_configs.mp_configs.sync_param", True),
        ("hybrid_configs.mp_configs.sync_grad", False),
        ("hybrid_configs.mp_configs.sync_moment", False),
        ("hybrid_configs.mp_configs.sync_mode", "broadcast"),
        ("hybrid_configs.mp_configs.mp_async_allreduce", False),
        ("hybrid_configs.mp_configs.mp_skip_c_identity", False),
        ("hybrid_configs.mp_configs.mp_fused_linear_param_grad_add", False),
    ],
)
def test_defaults_match_paddle(path, default):
    assert schema.field_by_path(path)[-1].default_value == default


def test_requires_rules_are_declared_in_the_schema():
    requires = {path: schema.option(f, "requires") for path, f in schema.walk() if schema.option(f, "requires")}
    assert requires == {
        "hybrid_configs.mp_configs.mp_skip_c_identity": "mp_async_allreduce",
        "hybrid_configs.mp_configs.mp_fused_linear_param_grad_add": "mp_async_allreduce",
        "hybrid_configs.mp_configs.recompute_allgather": "sequence_parallel",
        "hybrid_configs.mp_configs.sp_async_reduce_scatter": "sequence_parallel",
    }


def test_legacy_environment_variables_are_declared_in_the_schema():
    legacy = {path: schema.option(f, "legacy_env") for path, f in schema.walk() if schema.option(f, "legacy_env")}
    assert legacy == {
        "hybrid_configs.mp_configs.mp_async_allreduce": "Flags_mp_aysnc_allreduce",
        "hybrid_configs.mp_configs.mp_skip_c_identity": "Flags_skip_mp_c_identity",
        "hybrid_configs.mp_configs.mp_fused_linear_param_grad_add": "Flags_fused_linear_param_grad_add",
    }


def test_every_field_has_documentation_from_the_proto_comments():
    for path, field in schema.walk():
        assert len(schema.doc(field)) > 20, path
    assert "requires mp_async_allreduce" in schema.doc(schema.field_by_path("hybrid_configs.mp_configs.mp_skip_c_identity")[-1]).lower()


def test_every_fields_doc_agrees_with_its_support_status():
    """The docs come from the proto comments, the status from the (support) option: both are written by hand, so a
    field implemented after its comment was written (amp, recompute, gradient_merge once) is caught here."""
    says = {IMPLEMENTED: None, NOT_IMPLEMENTED: "not implemented", NO_EFFECT: "no effect", DECIDED_HERE: "decided here"}
    wrong = []
    for path, field in schema.walk():
        status, text = schema.option(field, "support"), schema.doc(field).lower()
        if status == IMPLEMENTED and "not implemented" in text:
            wrong.append(f"{path}: implemented, but its doc says it is not")
        elif status != IMPLEMENTED and says[status] not in text:
            wrong.append(f"{path}: {says[status]}, but its doc does not say so")
    assert not wrong, "\n".join(wrong)


def test_public_classes_are_the_generated_ones():
    assert strategy.DistributedStrategy.DESCRIPTOR.fields_by_name["hybrid_configs"].message_type is strategy.HybridConfig.DESCRIPTOR
    assert strategy.HybridConfig.DESCRIPTOR.fields_by_name["mp_configs"].message_type is strategy.MpConfig.DESCRIPTOR


def test_unknown_path_suggests_the_closest_field():
    with pytest.raises(KeyError, match="did you mean 'mp_degree'"):
        schema.field_by_path("hybrid_configs.mp_degre")
