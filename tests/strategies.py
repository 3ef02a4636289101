"""Hypothesis strategies that draw valid DistributedStrategy messages, generically from the schema."""

from __future__ import annotations

import os

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import strategies as st

import strategy
from strategy import schema


def examples(n: int) -> int:
    """A property test's examples: `n` under `make test-long` (and `make fuzz`'s neighbours), a quarter of them (at
    least 25) under `make test`, which keeps the suite within its minutes."""
    return n if os.environ.get("STRATEGY_TESTS_LONG") == "1" else max(25, n // 4)


_INTS = {
    FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}
# Eighths below 1000 are exact in float32 and short, so protobuf's dict and JSON mappings give back the same number.
_FLOATS = st.one_of(st.integers(-8000, 8000).map(lambda i: i / 8), st.sampled_from([float("inf"), float("-inf")]))


def _value(field: FieldDescriptor) -> st.SearchStrategy:
    cpp = field.cpp_type
    if cpp == FieldDescriptor.CPPTYPE_BOOL:
        return st.booleans()
    if cpp == FieldDescriptor.CPPTYPE_STRING:
        allowed = schema.option(field, "allowed")
        return st.sampled_from(allowed) if allowed else st.text(max_size=20)
    if cpp == FieldDescriptor.CPPTYPE_ENUM:
        low = schema.option(field, "min_value")
        return st.sampled_from([v.name for v in field.enum_type.values if low is None or v.number >= low])
    if cpp in (FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE):
        low = schema.option(field, "min_value")
        return _FLOATS if low is None else _FLOATS.filter(lambda x: x >= low)
    low, high = _INTS[cpp]
    minimum, maximum = schema.option(field, "min_value"), schema.option(field, "max_value")
    ints = st.integers(min_value=low if minimum is None else minimum, max_value=high if maximum is None else maximum)
    infer = schema.option(field, "infer_value")
    return st.one_of(ints, st.just(infer)) if infer is not None else ints


@st.composite
def _fill(draw, desc: Descriptor, depth: int = 0) -> dict:
    out = {}
    for field in desc.fields:
        if draw(st.integers(0, 3 + 2 * depth)) and not schema.option(field, "must_set"):  # a few fields, fewer deeper down
            continue
        one = (lambda: _fill(field.message_type, depth + 1)) if schema.is_message(field) else (lambda: _value(field))
        unique = bool(schema.option(field, "distinct"))
        out[field.name] = draw(st.lists(one(), min_size=1, max_size=3, unique=unique)) if field.is_repeated else draw(one())
    for field in desc.fields:  # honour `requires` rules so the message is valid under the strict policy
        needed = schema.option(field, "requires")
        if needed and out.get(field.name) is True:
            out[needed] = True
    return out


def dicts() -> st.SearchStrategy[dict]:
    return _fill(schema.ROOT)


def messages() -> st.SearchStrategy[strategy.DistributedStrategy]:
    return dicts().map(strategy.from_dict)
