"""The proto carries Paddle 3.3.1's whole fleet schema, field by field, and states what this project does with each."""

from __future__ import annotations

import json

import pytest
from google.protobuf.descriptor import FieldDescriptor

from conftest import PADDLE_SCHEMA
from strategy import schema
from strategy._generated import distributed_strategy_pb2
from strategy._generated.strategy_options_pb2 import DECIDED_HERE, IMPLEMENTED, NO_EFFECT, NOT_IMPLEMENTED

PADDLE = json.loads(PADDLE_SCHEMA.read_text())
POOL = distributed_strategy_pb2.DESCRIPTOR.pool
PACKAGE = "distributed_strategy"
_TYPES = {getattr(FieldDescriptor, name): name.removeprefix("TYPE_").lower() for name in dir(FieldDescriptor) if name.startswith("TYPE_")}


def test_the_facts_are_paddles_whole_schema():
    assert (len(PADDLE["messages"]), sum(map(len, PADDLE["messages"].values())), len(PADDLE["enums"])) == (45, 329, 2)


@pytest.mark.parametrize("message", sorted(PADDLE["messages"]))
def test_every_paddle_field_has_its_name_number_type_label_and_default(message):
    desc = POOL.FindMessageTypeByName(f"{PACKAGE}.{message}")
    ours = [f for f in desc.fields if f.number < 1000]
    assert [f.name for f in ours] == [f["name"] for f in PADDLE["messages"][message]]  # and in Paddle's order
    for field, fact in zip(ours, PADDLE["messages"][message]):
        where = f"{message}.{field.name}"
        assert field.number == fact["number"], where
        assert _TYPES[field.type] == fact["type"], where
        assert ("repeated" if field.is_repeated else "required" if field.is_required else "optional") == fact["label"], where
        if fact["type"] == "message":
            assert field.message_type.name == fact["message"], where
        if fact["type"] == "enum":
            assert field.enum_type.name == fact["enum"], where
        if "default" in fact:
            assert field.has_default_value or fact["default"] in (0, "", False), where
            default = field.default_value
            if field.enum_type is not None:
                default = field.enum_type.values_by_number[default].name
            assert default == fact["default"], where
        else:
            assert not field.has_default_value, where


@pytest.mark.parametrize("enum", sorted(PADDLE["enums"]))
def test_every_paddle_enum_has_its_values(enum):
    desc = POOL.FindEnumTypeByName(f"{PACKAGE}.{enum}")
    assert {v.name: v.number for v in desc.values} == PADDLE["enums"][enum]


def _every_field():
    for message in PADDLE["messages"]:
        yield from POOL.FindMessageTypeByName(f"{PACKAGE}.{message}").fields


def test_every_field_declares_its_support_and_a_comment():
    for field in _every_field():
        assert schema.option(field, "support") in (IMPLEMENTED, NO_EFFECT, NOT_IMPLEMENTED, DECIDED_HERE), field.full_name
        assert len(schema.doc(field)) > 20, field.full_name


def test_every_scalar_field_that_is_not_implemented_or_has_no_effect_gives_a_hint():
    for field in _every_field():
        if field.message_type is None and schema.option(field, "support") != IMPLEMENTED:
            hint = schema.option(field, "hint") or schema.message_option(field.containing_type, "fields_hint")
            assert hint and len(hint) > 15, field.full_name


def test_the_comments_say_what_a_field_does_here_when_it_does_nothing():
    for field in _every_field():
        support = schema.option(field, "support")
        if support == NO_EFFECT:
            assert "No effect in PyTorch." in schema.doc(field), field.full_name
        if support == NOT_IMPLEMENTED:
            assert "Not implemented here." in schema.doc(field), field.full_name
        if support == DECIDED_HERE:
            assert "Decided here: " in schema.doc(field), field.full_name


def test_what_works_today_is_declared_implemented():
    implemented = {path for path, f in schema.walk() if schema.option(f, "support") == IMPLEMENTED and f.message_type is None}
    assert {"hybrid_configs.dp_degree", "hybrid_configs.mp_degree", "hybrid_configs.mp_configs.need_broadcast_data",
            "hybrid_configs.mp_configs.nccl_config.commName"} <= implemented
    assert {f"hybrid_configs.mp_configs.{f.name}" for f in schema.field_by_path("hybrid_configs.mp_configs")[-1].message_type.fields
            if f.number <= 8} <= implemented


def test_the_schema_is_split_by_concern():
    files = {POOL.FindMessageTypeByName(f"{PACKAGE}.{m}").file.name for m in PADDLE["messages"]}
    assert files == {"distributed_strategy.proto", "hybrid_parallel.proto", "training.proto", "static_graph.proto",
                     "parameter_server.proto"}
