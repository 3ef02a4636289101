"""Bad input of every kind is a StrategyError pointing at file:line:col and the dotted field path."""

from __future__ import annotations

import warnings

import pytest

import strategy
from strategy import StrategyError


def error_of(path, **kwargs) -> StrategyError:
    with pytest.raises(StrategyError) as info:
        strategy.load(path, **kwargs)
    return info.value


UNKNOWN_NESTED = {
    "t.prototxt": "hybrid_configs {\n  mp_configs {\n    mp_async_allreduse: true\n  }\n}\n",
    "t.json": '{\n  "hybrid_configs": {\n    "mp_configs": {\n      "mp_async_allreduse": true\n    }\n  }\n}\n',
    "t.yaml": "hybrid_configs:\n  mp_configs:\n    mp_async_allreduse: true\n",
}
UNKNOWN_AT = {"t.prototxt": (3, 5), "t.json": (4, 7), "t.yaml": (3, 5)}


@pytest.mark.parametrize("name", list(UNKNOWN_NESTED))
def test_misspelled_nested_key_is_an_error_with_location_and_suggestion(write, name):
    path = write(name, UNKNOWN_NESTED[name])
    e = error_of(path)
    assert (e.source, e.line, e.column) == (str(path), *UNKNOWN_AT[name])
    assert e.field == "hybrid_configs.mp_configs.mp_async_allreduse"
    assert e.message == "unknown field hybrid_configs.mp_configs.mp_async_allreduse; did you mean 'mp_async_allreduce'?"
    assert str(e) == f"{path}:{e.line}:{e.column}: {e.message}"


@pytest.mark.parametrize("name", list(UNKNOWN_NESTED))
def test_warn_policy_drops_unknown_keys_with_a_warning(write, name):
    path = write(name, UNKNOWN_NESTED[name])
    with pytest.warns(strategy.StrategyWarning, match="mp_async_allreduse.*ignored"):
        s = strategy.load(path, policy="warn")
    assert s.hybrid_configs.HasField("mp_configs")
    assert not s.hybrid_configs.mp_configs.mp_async_allreduce


MISSPELLED_BOOL = {
    "f.prototxt": "hybrid_configs {\n  mp_configs {\n    mp_async_allreduce: flase\n  }\n}\n",
    "f.json": '{\n  "hybrid_configs": {\n    "mp_configs": {\n      "mp_async_allreduce": "flase"\n    }\n  }\n}\n',
    "f.yaml": "hybrid_configs:\n  mp_configs:\n    mp_async_allreduce: flase\n",
}
MISSPELLED_BOOL_AT = {"f.prototxt": (3, 25), "f.json": (4, 29), "f.yaml": (3, 25)}
MISSPELLED_BOOL_GOT = {"f.prototxt": "the bare word flase", "f.json": "the string 'flase'", "f.yaml": "the string 'flase'"}


@pytest.mark.parametrize("name", list(MISSPELLED_BOOL))
def test_a_word_close_to_a_bool_suggests_the_bool_at_the_value(write, name):
    path = write(name, MISSPELLED_BOOL[name])
    line, column = MISSPELLED_BOOL_AT[name]
    assert str(error_of(path)) == (f"{path}:{line}:{column}: hybrid_configs.mp_configs.mp_async_allreduce expects "
                                   f"true or false, got {MISSPELLED_BOOL_GOT[name]}; did you mean false?")


@pytest.mark.parametrize(("text", "message"), [
    ("mode: COLECTIVE", "mode expects one of COLLECTIVE, PS, PIPELINE, HETER, got the bare word COLECTIVE; "
                        "did you mean COLLECTIVE?"),
    ('mode: "PIPELINE"', "mode expects one of COLLECTIVE, PS, PIPELINE, HETER, got the string 'PIPELINE'; "
                         "did you mean PIPELINE?"),
    ('hybrid_configs { mp_configs { tp_plan { pattern: "*.q_proj" style: colwise } } }',
     "got the bare word colwise; did you mean COLWISE?"),
])
def test_a_misspelled_enum_value_suggests_the_closest_name_spelled_bare(text, message):
    with pytest.raises(StrategyError) as info:
        strategy.loads(text)
    assert info.value.message.endswith(message)


@pytest.mark.parametrize(("text", "message"), [
    ("hybrid_configs { mp_configs { mp_async_allreduce: yes } }",
     "hybrid_configs.mp_configs.mp_async_allreduce expects true or false, got the bare word yes"),
    ("hybrid_configs { mp_degree: two }", "hybrid_configs.mp_degree expects an integer, got the bare word two"),
])
def test_a_bare_word_close_to_nothing_the_field_takes_gets_no_guess_and_no_advice_to_quote_it(text, message):
    with pytest.raises(StrategyError) as info:
        strategy.loads(text)
    assert info.value.message == message


REQUIRES = {
    "tp.prototxt": "# tensor parallel\nhybrid_configs {\n  mp_degree: 2\n  mp_configs {\n    sync_param: true\n    mp_skip_c_identity: true\n  }\n}\n",
    "tp.json": '{"hybrid_configs": {"mp_degree": 2,\n  "mp_configs": {"mp_skip_c_identity": true}}}',
    "tp.yaml": "hybrid_configs:\n  mp_degree: 2\n  mp_configs: {mp_skip_c_identity: true}\n",
}
REQUIRES_AT = {"tp.prototxt": (6, 5), "tp.json": (2, 18), "tp.yaml": (3, 16)}


@pytest.mark.parametrize("name", list(REQUIRES))
def test_requires_rule_points_at_the_dependent_field_and_says_what_to_set(write, name):
    path = write(name, REQUIRES[name])
    e = error_of(path)
    line, col = REQUIRES_AT[name]
    assert str(e) == (
        f"{path}:{line}:{col}: hybrid_configs.mp_configs.mp_skip_c_identity "
        "requires hybrid_configs.mp_configs.mp_async_allreduce: true"
    )
    assert e.field == "hybrid_configs.mp_configs.mp_skip_c_identity"


def test_requires_rule_under_warn_loads_losslessly_and_resolves_the_flag_off(write):
    path = write("tp.prototxt", REQUIRES["tp.prototxt"])
    with pytest.warns(strategy.StrategyWarning, match=r"tp.prototxt:6:5: .*mp_skip_c_identity requires .*resolving mp_skip_c_identity off"):
        s = strategy.load(path, policy="warn")
    assert s.hybrid_configs.mp_configs.mp_skip_c_identity is True  # the message keeps what the file says
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once, at load: resolving the unchanged message repeats nothing
        resolved = strategy.resolve(s, world_size=2, policy="warn")
    assert resolved.mp.skip_c_identity is False
    assert any("mp_skip_c_identity is set but has no effect: requires" in n for n in resolved.notes)


@pytest.mark.parametrize(
    ("name", "text", "where", "message"),
    [
        ("a.json", '{"hybrid_configs": {"mp_degree": "2"}}', (1, 34), "hybrid_configs.mp_degree expects an integer, got the string '2'"),
        ("a.json", '{"hybrid_configs": {"mp_degree": 2.5}}', (1, 34), "hybrid_configs.mp_degree expects an integer, got the number 2.5"),
        ("a.yaml", "hybrid_configs: true\n", (1, 17), "hybrid_configs is a message: expected a mapping of its fields, got the bool true"),
        ("a.yaml", "hybrid_configs:\n  mp_configs:\n    sync_grad: 1\n", (3, 16), "hybrid_configs.mp_configs.sync_grad expects true or false, got the number 1"),
        ("a.prototxt", "hybrid_configs { mp_configs { sync_mode: average } }", (1, 42), "hybrid_configs.mp_configs.sync_mode expects a quoted string, got the bare word average (quote strings)"),
        ("a.prototxt", "hybrid_configs { mp_degree: 2 mp_degree: 4 }", (1, 31), "hybrid_configs.mp_degree is set twice (first set at line 1); keep one"),
        ("a.prototxt", "hybrid_configs { mp_degree: 0 }", (1, 18), "hybrid_configs.mp_degree must be >= 1; got 0"),
        ("a.prototxt", "hybrid_configs { dp_degree: 0 }", (1, 18), "hybrid_configs.dp_degree must be >= 1, or -1 to infer it; got 0"),
        ("a.prototxt", "hybrid_configs { mp_degree: 99999999999 }", (1, 29), "hybrid_configs.mp_degree = 99999999999 is out of range [-2147483648, 2147483647]"),
        ("a.json", '{"hybrid_configs": {"mp_configs": {"sync_mode": "avg"}}}', (1, 36), 'hybrid_configs.mp_configs.sync_mode must be one of "broadcast", "average"; got "avg"; did you mean \'average\'?'),
    ],
)
def test_wrong_types_and_values_are_located_at_the_value_or_field(write, name, text, where, message):
    e = error_of(write(name, text))
    assert (e.line, e.column) == where
    assert e.message == message


@pytest.mark.parametrize(
    ("name", "text", "where", "message"),
    [
        ("d.json", '{"hybrid_configs": {"mp_degree": 2,\n "mp_degree": 4}}', (2, 2), "duplicate key hybrid_configs.mp_degree (first at line 1); keep one"),
        ("d.yaml", "hybrid_configs:\n  mp_degree: 2\n  mp_degree: 4\n", (3, 3), "duplicate key hybrid_configs.mp_degree (first at line 2); keep one"),
    ],
)
def test_duplicate_keys_are_errors(write, name, text, where, message):
    e = error_of(write(name, text))
    assert ((e.line, e.column), e.message, e.field) == (where, message, "hybrid_configs.mp_degree")


@pytest.mark.parametrize(
    ("name", "text", "where", "fragment"),
    [
        ("s.prototxt", "hybrid_configs {\n  mp_degree: 2\n", (3, 1), "expected '}' before end of file"),
        ("s.prototxt", "hybrid_configs {\n  mp_degree 2\n}", (2, 13), "expected ':' or '{' after mp_degree, got '2'"),
        ("s.prototxt", 'hybrid_configs { mp_configs { sync_mode: "broad } }', (1, 42), "unterminated string"),
        ("s.json", '{"hybrid_configs": {"mp_degree": 2,}}', (1, 36), "expected a quoted key"),
        ("s.json", '{"hybrid_configs": {"mp_degree": 2}} x', (1, 38), "extra data after the JSON document"),
        ("s.yaml", "hybrid_configs:\n  mp_degree: 2\n mp_configs: {}\n", (3, 2), "expected <block end>"),
    ],
)
def test_syntax_errors_are_located(write, name, text, where, fragment):
    e = error_of(write(name, text))
    assert (e.line, e.column) == where
    assert fragment in e.message


def test_binary_garbage_is_an_error_not_a_crash(write):
    e = error_of(write("g.binpb", b"\x82\x07\xff\xff\xff"))
    assert "not a binary DistributedStrategy" in e.message
    assert e.source.endswith("g.binpb")


def test_unknown_field_number_in_binary_is_an_error(write):
    # hybrid_configs (112) holding field 99 = varint 1: a number in neither Paddle's schema nor ours.
    e = error_of(write("u.binpb", b"\x82\x07\x03\x98\x06\x01"))
    assert e.message.startswith("unknown field number 99 (varint) in hybrid_configs")
    assert e.field == "hybrid_configs"
    with pytest.warns(strategy.StrategyWarning, match="dropped"):
        s = strategy.load(write("u2.binpb", b"\x82\x07\x03\x98\x06\x01"), policy="warn")
    assert s.hybrid_configs.SerializeToString() == b""


def test_unknown_field_number_inside_a_repeated_message_is_found(write):
    # downpour_table_param (115, repeated): its second element holds field 99.
    e = error_of(write("u.binpb", b"\x9a\x07\x00\x9a\x07\x03\x98\x06\x01"))
    assert e.message.startswith("unknown field number 99 (varint) in downpour_table_param[1]")


def test_text_file_that_is_not_utf8_is_located(write):
    e = error_of(write("b.prototxt", b"hybrid_configs {\n  \xff\n}"))
    assert (e.line, e.column) == (2, 3)
    assert "not UTF-8" in e.message


def test_unknown_extension_lists_the_known_ones(write):
    e = error_of(write("s.toml", "x"))
    assert e.message.startswith("unknown extension '.toml': cannot tell the format; use one of .prototxt .pbtxt")
    assert strategy.load(write("s.toml2", "hybrid_configs { mp_degree: 2 }"), format="prototxt").hybrid_configs.mp_degree == 2


def test_missing_file_is_a_strategy_error(tmp_path):
    e = error_of(tmp_path / "nope.prototxt")
    assert e.source == str(tmp_path / "nope.prototxt")
    assert "cannot read the file: No such file or directory" in e.message


def test_unreadable_path_is_a_strategy_error(tmp_path):
    folder = tmp_path / "dir.prototxt"
    folder.mkdir()
    assert "cannot read the file" in error_of(folder).message


def test_json_accepts_protobufs_camel_case_names():
    s = strategy.loads('{"hybridConfigs": {"mpDegree": 2}}', format="json")
    assert s.hybrid_configs.mp_degree == 2


def test_loads_names_its_source_and_rejects_an_unknown_format():
    with pytest.raises(StrategyError, match=r"^<string>:1:1: unknown field nope"):
        strategy.loads("nope: 1")
    with pytest.raises(StrategyError, match="unknown format 'toml'; known formats: prototxt, json, yaml, binary"):
        strategy.loads("", format="toml")


def test_an_unknown_policy_is_rejected():
    with pytest.raises(ValueError, match="policy must be one of 'strict', 'warn'"):
        strategy.loads("", policy="lenient")


def test_extension_syntax_in_text_is_explained():
    with pytest.raises(StrategyError, match="extensions and Any are not used"):
        strategy.loads("[foo.bar] { }")


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("prototxt", "a {" * 200 + "}" * 200),
        ("json", '{"a": ' * 200 + "1" + "}" * 200),
        ("yaml", "[" * 2000 + "]" * 2000),
    ],
)
def test_deep_nesting_is_a_quick_strategy_error(fmt, text):
    with pytest.raises(StrategyError, match="nesting deeper than 32 levels"):
        strategy.loads(text, format=fmt)


def test_deeply_nested_dict_is_a_strategy_error():
    d: dict = {}
    for _ in range(100):
        d = {"hybrid_configs": d}
    with pytest.raises(StrategyError, match="nesting deeper than"):
        strategy.from_dict(d)


def test_oversized_input_is_refused_before_parsing(write):
    big = "# padding\n" * 200_000
    with pytest.raises(StrategyError, match="larger than 1048576 bytes"):
        strategy.loads(big)
    with pytest.raises(StrategyError, match="larger than 1048576 bytes"):
        strategy.load(write("big.prototxt", big))


@pytest.mark.parametrize(
    ("fmt", "text"),
    [("json", '{"hybrid_configs": {"mp_configs": {"sync_mode": "\\ud800"}}}'), ("yaml", 'hybrid_configs: {mp_configs: {sync_mode: "\\ud800"}}')],
)
def test_lone_surrogates_are_a_strategy_error(fmt, text):
    with pytest.raises(StrategyError, match="sync_mode is not valid UTF-8 text"):
        strategy.loads(text, format=fmt)
    with pytest.raises(StrategyError, match="not valid UTF-8"):
        strategy.from_dict({"hybrid_configs": {"mp_configs": {"sync_mode": "\ud800"}}})


@pytest.mark.parametrize(("literal", "message"), [("2.0", "expects an integer"), ("1e1", "expects an integer"),
                                                   ("2f", "expects an integer"), ("08", "invalid number 08")])
def test_text_format_integers_are_as_strict_as_protobufs(literal, message):
    with pytest.raises(StrategyError, match=message):
        strategy.loads(f"hybrid_configs {{ mp_degree: {literal} }}")


def test_text_format_bools_may_be_spelled_0_and_1_as_protobuf_allows():
    s = strategy.loads("hybrid_configs { mp_configs { sync_param: 0 sync_grad: 1 } }")
    assert (s.hybrid_configs.mp_configs.sync_param, s.hybrid_configs.mp_configs.sync_grad) == (False, True)


def test_a_block_closed_by_the_wrong_bracket_says_which_one_it_expected():
    with pytest.raises(StrategyError, match=r"^<string>:1:31: expected '>' to close this block, got '}'$"):
        strategy.loads("hybrid_configs < mp_degree: 2 }")


def test_a_huge_float_for_an_integer_is_reported_briefly():
    with pytest.raises(StrategyError, match=r"mp_degree expects an integer, got the number 1e\+300$"):
        strategy.loads('{"hybrid_configs": {"mp_degree": 1e300}}', format="json")


BIG = "9" * 5001  # past Python's int() digit limit (4300)


@pytest.mark.parametrize(("fmt", "text", "at"), [
    ("yaml", f"hybrid_configs:\n  mp_degree: {BIG}\n", (2, 14)),
    ("yaml", f"hybrid_configs: {{mp_degree: {BIG}}}\n", (1, 29)),
    ("json", f'{{"hybrid_configs": {{"mp_degree": {BIG}}}}}', (1, 34)),
    ("prototxt", f"hybrid_configs {{ mp_degree: {BIG} }}", (1, 29)),
])
def test_a_number_of_thousands_of_digits_is_out_of_range_in_every_format(fmt, text, at):
    """Found by the fuzz test: YAML's direct reader passed such a number to int(), which raised ValueError."""
    with pytest.raises(StrategyError) as e:
        strategy.loads(text, format=fmt)
    assert (e.value.line, e.value.column) == at
    assert e.value.message == f"number {BIG[:24]}... (5001 characters) is out of range for any field"
