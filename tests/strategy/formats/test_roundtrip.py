"""Round trips through every format are lossless, and our text reader agrees with protobuf's."""

from __future__ import annotations

import copy

from google.protobuf import json_format, text_format
from hypothesis import given, settings
from hypothesis import strategies as st

import strategy
from strategies import dicts, examples, messages

FORMATS = list(strategy.FORMATS)


@settings(max_examples=examples(200), deadline=None)
@given(messages(), st.permutations(FORMATS))
def test_any_chain_of_formats_is_lossless(msg, chain):
    current = msg
    for fmt in chain:
        current = strategy.loads(strategy.dumps(current, format=fmt), format=fmt)
        assert current == msg
        assert current.SerializeToString() == msg.SerializeToString()


@settings(max_examples=examples(200), deadline=None)
@given(messages(), st.booleans())
def test_our_text_reader_reads_what_protobuf_writes(msg, one_line):
    assert strategy.loads(text_format.MessageToString(msg, as_one_line=one_line)) == msg


@settings(max_examples=examples(200), deadline=None)
@given(messages())
def test_protobuf_reads_what_we_write(msg):
    assert text_format.Parse(strategy.dumps(msg), strategy.DistributedStrategy()) == msg
    assert json_format.Parse(strategy.dumps(msg, format="json"), strategy.DistributedStrategy()) == msg


@settings(max_examples=examples(100), deadline=None)
@given(dicts())
def test_from_dict_and_to_dict_round_trip_without_mutating_the_input(d):
    before = copy.deepcopy(d)
    msg = strategy.from_dict(d)
    assert d == before
    assert strategy.to_dict(msg) == d
