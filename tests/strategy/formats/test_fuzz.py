"""Hostile input: random and mutated documents in every format, random dicts and overrides. Whatever
comes in, only StrategyError (with a message) comes out, quickly and with bounded memory.
(`make fuzz` runs the same property under atheris for 100,000+ inputs.)"""

from __future__ import annotations

import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategy
from fuzz_targets import MODES, check, seeds
from strategies import examples, messages

FAST = settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.sampled_from(MODES), st.binary(max_size=300))
def test_random_bytes_only_ever_raise_strategy_error(mode, data):
    check(mode, data)


@FAST
@given(st.sampled_from(MODES[:3]), st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_random_text_only_ever_raises_strategy_error(mode, text):
    check(mode, text.encode("utf-8", "surrogatepass"))


@st.composite
def mutated(draw):
    msg = draw(messages())
    mode = draw(st.sampled_from(MODES[:4]))
    doc = strategy.dumps(msg, format=mode)
    data = bytearray(doc if isinstance(doc, bytes) else doc.encode())
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "delete", "insert", "duplicate", "token"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "duplicate":
            data[at:at] = data[at : at + draw(st.integers(1, 40))]
        else:
            data[at:at] = draw(st.sampled_from([b"{", b"}", b":", b"[", b"]", b",", b'"', b"-", b"1e999", b"9" * 5000,
                                                b"&a", b"*a", b"!!python/object:os.system", b"\xff", b"0x", b"nan", b"\\u0000"]))
    return mode, bytes(data)


@FAST
@given(mutated())
def test_mutated_valid_documents_only_ever_raise_strategy_error(case):
    check(*case)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
field_names = st.sampled_from(["hybrid_configs", "mp_configs", "mp_degree", "dp_degree", "sync_mode", "mp_async_allreduce", "x"])


@FAST
@given(st.dictionaries(field_names, st.dictionaries(field_names, json_values, max_size=4) | json_values, max_size=3))
def test_random_dicts_only_ever_raise_strategy_error(d):
    try:
        strategy.from_dict(d)
    except strategy.StrategyError as e:
        assert e.message


def test_the_seed_corpus_is_valid():
    for seed in seeds():
        check(MODES[seed[0]], seed[1:])


def bounded(fn) -> tuple[float, int]:
    """(seconds, peak bytes) of fn(), which must raise StrategyError. Time and memory are measured in
    separate runs: tracing allocations slows Python down several times."""
    start = time.perf_counter()
    with pytest.raises(strategy.StrategyError):
        fn()
    seconds = time.perf_counter() - start
    tracemalloc.start()
    try:
        with pytest.raises(strategy.StrategyError):
            fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return seconds, peak


def test_yaml_alias_bomb_fails_fast_with_bounded_memory():
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 10):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ",".join(f"*{chr(96 + i)}" for _ in range(10)) + "]")
    seconds, peak = bounded(lambda: strategy.loads("\n".join(lines), format="yaml"))
    assert seconds < 2 and peak < 64 << 20
    with pytest.raises(strategy.StrategyError, match=r"^<string>:1:24: more than 100000 values \(after expanding aliases\)"):
        strategy.loads("\n".join(lines), format="yaml")  # the node where the expansion crosses the limit


def test_yaml_aliases_read_as_their_expansion():
    aliased = "amp_configs:\n  custom_white_list: &ops [matmul, gelu]\n  custom_black_list: *ops\n"
    expanded = "amp_configs:\n  custom_white_list: [matmul, gelu]\n  custom_black_list: [matmul, gelu]\n"
    assert strategy.loads(aliased, format="yaml") == strategy.loads(expanded, format="yaml")


def test_yaml_escape_past_the_last_code_point_is_a_located_error():
    with pytest.raises(strategy.StrategyError, match=r"^<string>:3:8: invalid escape in a quoted string .* up to 0010FFFF"):
        strategy.loads('recompute_configs:\n  checkpoints:\n  - "\\U10010000"\n', format="yaml")


def test_binary_with_a_giant_length_prefix_fails_fast():
    giant = b"\x82\x07" + b"\xff\xff\xff\xff\x0f" + b"\x08\x01"  # hybrid_configs claiming 4 GiB
    seconds, peak = bounded(lambda: strategy.loads(giant, format="binary"))
    assert seconds < 1 and peak < 16 << 20


def test_huge_input_is_refused_before_parsing():
    seconds, peak = bounded(lambda: strategy.loads("hybrid_configs { mp_degree: 2 }\n" * 100_000))
    assert seconds < 1


@pytest.mark.parametrize("fmt", ["prototxt", "json", "yaml"])
def test_integers_with_thousands_of_digits_are_a_strategy_error(fmt):
    digits = "9" * 5000
    doc = {"prototxt": f"hybrid_configs {{ mp_degree: {digits} }}", "json": f'{{"hybrid_configs": {{"mp_degree": {digits}}}}}',
           "yaml": f"hybrid_configs: {{mp_degree: {digits}}}"}[fmt]
    with pytest.raises(strategy.StrategyError, match="out of range|cannot read") as info:
        strategy.loads(doc, format=fmt)
    assert info.value.line == 1 and info.value.column is not None


def test_yaml_tags_never_construct_objects():
    with pytest.raises(strategy.StrategyError, match="unsupported YAML tag"):
        strategy.loads("hybrid_configs: !!python/object/apply:os.system ['echo pwned']", format="yaml")
