"""The text format's fast path builds exactly the full parser's tree, or steps aside."""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PADDLE_FILES
from strategies import messages
from strategy import textproto
from strategy.errors import StrategyError
from strategy.textfast import fast_parse


def _full(text: str):
    try:
        return textproto._Parser(text, "<t>").message(None, 0)
    except StrategyError as e:
        return e


def _agrees(text: str) -> bool:
    fast = fast_parse(textproto._TOKEN, text, "<t>")
    full = _full(text)
    if isinstance(full, StrategyError):
        return fast is None  # every error is the full parser's
    return fast is None or fast == full


@settings(max_examples=200, deadline=None)
@given(messages(), st.booleans())
def test_the_fast_path_builds_the_full_parsers_tree_for_what_protobuf_writes(msg, one_line):
    assert _agrees(text_format.MessageToString(msg, as_one_line=one_line))


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet='ab_: {}[]<>;,"\\#\n-.0123456789eExtf', max_size=60))
def test_the_fast_path_never_accepts_what_the_full_parser_rejects_or_reads_differently(text):
    assert _agrees(text)


@pytest.mark.parametrize("path", [p for p in PADDLE_FILES if p.suffix == ".prototxt"], ids=lambda p: p.name)
def test_paddles_files_take_the_fast_path(path):
    text = path.read_text()
    assert fast_parse(textproto._TOKEN, text, "<t>") == textproto._Parser(text, "<t>").message(None, 0)
