"""Hypothesis strategies that draw valid DistributedStrategy messages, generically from the schema."""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import strategies as st

import strategy
from strategy import schema


def _value(field: FieldDescriptor) -> st.SearchStrategy:
    if field.cpp_type == FieldDescriptor.CPPTYPE_BOOL:
        return st.booleans()
    if field.cpp_type == FieldDescriptor.CPPTYPE_STRING:
        allowed = schema.option(field, "allowed")
        return st.sampled_from(allowed) if allowed else st.text(max_size=20)
    low = schema.option(field, "min_value")
    ints = st.integers(min_value=low if low is not None else -(2**31), max_value=2**31 - 1)
    infer = schema.option(field, "infer_value")
    return st.one_of(ints, st.just(infer)) if infer is not None else ints


@st.composite
def _fill(draw, desc: Descriptor) -> dict:
    out = {}
    for field in desc.fields:
        if not draw(st.booleans()):
            continue
        out[field.name] = draw(_fill(field.message_type)) if schema.is_message(field) else draw(_value(field))
    for field in desc.fields:  # honour `requires` rules so the message is valid under the strict policy
        needed = schema.option(field, "requires")
        if needed and out.get(field.name) is True:
            out[needed] = True
    return out


def dicts() -> st.SearchStrategy[dict]:
    return _fill(schema.ROOT)


def messages() -> st.SearchStrategy[strategy.DistributedStrategy]:
    return dicts().map(strategy.from_dict)
