"""The direct readers fill exactly the message and positions the located reader builds, or step aside.

Every format is checked two ways: on what protobuf, PyYAML and `strategy.dump` write for random valid strategies
(the direct reader must take those), and on random documents made of real field names and tricky values, where
it must agree with the located reader or give up (never accept what that reader rejects or reads differently).
"""

from __future__ import annotations

import json
import re

import pytest
import yaml
from google.protobuf import json_format, text_format
from hypothesis import example, given, settings
from hypothesis import strategies as st

import strategy
from conftest import PADDLE_FILES
from strategies import examples, messages
from strategy.formats import codec as formats
from strategy.formats.json import direct as jsondirect, positions as jsonpositions
from strategy.formats.text import direct as textdirect
from strategy.formats.yaml import direct as yamldirect
from strategy.schema import rules
from strategy.formats.direct import Positions
from strategy.errors import StrategyError

_READERS = {"prototxt": textdirect, "json": jsondirect, "yaml": yamldirect}


def _located(text: str, fmt: str):
    msg = strategy.DistributedStrategy()
    try:
        return msg, formats.located(msg, text, fmt, source="<t>", policy="strict")
    except StrategyError as e:
        return e


def _direct(text: str, fmt: str):
    msg = strategy.DistributedStrategy()
    read = _READERS[fmt].fill(msg, text, "<t>")
    if read is None:
        return None
    positions, broken = read
    # It checked the rules as it read: nothing the rules reject gets past it, and it found every broken `requires`.
    rules.check(msg, positions, policy="strict", source="<t>", requires=False)
    assert broken == rules.requires_violations(msg)
    return msg, dict(positions)


def _agrees(text: str, fmt: str) -> bool:
    direct, located = _direct(text, fmt), _located(text, fmt)
    if isinstance(located, StrategyError):
        return direct is None  # every error is the located reader's
    return direct is None or direct == located


def _takes(text: str, fmt: str) -> bool:
    """The direct reader read it, and as the located reader does."""
    direct = _direct(text, fmt)
    return direct is not None and direct == _located(text, fmt)


# What protobuf and PyYAML write: always the direct path, unless a string needs escapes or a float is infinite.
def _plain(msg: strategy.DistributedStrategy) -> bool:
    text = text_format.MessageToString(msg)
    return text.isascii() and "\\" not in text and "inf" not in text


@settings(max_examples=examples(150), deadline=None)
@given(messages())
def test_what_protobuf_writes_as_text_is_read_directly(msg):
    text = text_format.MessageToString(msg)
    assert _takes(text, "prototxt") if _plain(msg) else _agrees(text, "prototxt")
    assert _agrees(text_format.MessageToString(msg, as_one_line=True), "prototxt")


@settings(max_examples=examples(150), deadline=None)
@given(messages(), st.booleans(), st.sampled_from([None, 0, 2]))
def test_what_protobuf_writes_as_json_is_read_directly(msg, proto_names, indent):
    text = json_format.MessageToJson(msg, preserving_proto_field_name=proto_names, indent=indent)
    assert _takes(text, "json") if "Infinity" not in text else _agrees(text, "json")


@settings(max_examples=examples(150), deadline=None)
@given(messages(), st.sampled_from([2, 4]))
@example(strategy.from_dict({"downpour_table_param": [{"table_class": "0["}]}), 2)  # a bracket inside a plain word
def test_what_strategy_dump_and_pyyaml_write_is_read_directly(msg, indent):
    text = strategy.dumps(msg, format="yaml")
    # Plain words and numbers, the block subset: brackets only as a whole empty value ({} or []), not in a word
    # (table_class: 0[ is a plain scalar to YAML, which the direct reader leaves to the located reader).
    simple = re.fullmatch(r"[A-Za-z0-9_.\-: \n]*", re.sub(r"(?<=[:-] )(?:\{\}|\[\])$", "", text, flags=re.M))
    assert _takes(text, "yaml") if _plain(msg) and simple else _agrees(text, "yaml")
    as_dict = strategy.to_dict(msg)
    assert _agrees(yaml.safe_dump(as_dict, indent=indent, default_flow_style=False) if as_dict else "{}\n", "yaml")
    assert _agrees(yaml.safe_dump(as_dict, default_flow_style=None), "yaml")  # flow lists: the located reader's


@pytest.mark.filterwarnings("ignore::strategy.StrategyWarning")  # llama_tp2_sp breaks a rule: loaded under "warn"
@pytest.mark.parametrize("path", PADDLE_FILES, ids=lambda p: p.name)
def test_paddles_files_are_read_directly_in_every_text_format(path):
    if path.suffix == ".binpb":
        return
    msg = strategy.load(path.with_suffix(".prototxt"), policy="warn") if "llama" in path.name else strategy.load(path)
    texts = {formats.format_for(path): path.read_text(), "yaml": strategy.dumps(msg, format="yaml")}
    for fmt, text in texts.items():
        assert _takes(text, fmt), fmt


# Random documents of real names and values each format reads in its own way.
_ROOT_NAMES = ["amp", "recompute", "hybrid_configs", "amp_configs", "recompute_configs", "pipeline_configs", "ampConfigs",
               "hybridConfigs", "nope"]
_INNER_NAMES = ["mp_degree", "dp_degree", "mpDegree", "order", "mp_configs", "sharding_configs", "stage",
                "mp_async_allreduce", "mp_skip_c_identity", "init_loss_scaling", "use_pure_bf16", "custom_white_list",
                "checkpoints", "accumulate_steps",
                "schedule_mode", "dtype", "sync_mode", "unknown_field"]
_NAMES = st.sampled_from(_ROOT_NAMES + _INNER_NAMES)
_TEXT_VALUES = st.sampled_from(["true", "True", "t", "f", "1", "0", "01", "-1", "5", "9", '"pp"', '"mp"', '"zz"', "0x10", "-0", "-2", "2", "1.5", "1e5", "1.",
                                "inf", "-inf", "nan", "1f", '"s"', "'s'", '"a\\n"', '"dp"', '"1F1B"', "bfloat16", "O1",
                                '""', "2147483648", "99999999999999999999999"])
_YAML_VALUES = st.sampled_from(["true", "yes", "on", "Off", "NO", "y", "1", "010", "0o10", "0x1F", "1_000", "1.5", "1e5",
                                "1.0e-05", "-1", "-0", ".5", ".inf", "1:20", '"x"', "'y'", "'it''s'", '"a\\tb"', "{}",
                                "[]", "[1, 2]", "{a: 1}", "~", "null", "1F1B", "FThenB", "bfloat16", "2001-01-01", "dp",
                                "'mp'", "&a 1", "*a", "!!str 1", "|", "- x", "a: b", "#c", "2147483648"])


@st.composite
def _text_documents(draw) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        indent = " " * draw(st.sampled_from([0, 2, 4]))
        kind = draw(st.sampled_from(["value", "open", "colon_open", "close", "comment", "blank", "two"]))
        name = draw(_NAMES)
        value = draw(_TEXT_VALUES)
        lines.append(indent + {"value": f"{name}: {value}", "open": f"{name} {{", "colon_open": f"{name}: {{",
                               "close": "}", "comment": "# c", "blank": "",
                               "two": f"{name}: {value} {draw(_NAMES)}: {value}"}[kind])
    return "\n".join(lines)


@st.composite
def _yaml_documents(draw) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        indent = " " * draw(st.sampled_from([0, 0, 1, 2, 4]))
        kind = draw(st.sampled_from(["value", "value", "open", "item", "comment", "blank", "doc"]))
        name = draw(_NAMES)
        value = draw(_YAML_VALUES)
        comment = draw(st.sampled_from(["", "", " # note", "#x", "  "]))
        lines.append(indent + {"value": f"{name}: {value}", "open": f"{name}:", "item": f"- {value}", "comment": "# c",
                               "blank": "", "doc": "---"}[kind] + comment)
    return "\n".join(lines)


@st.composite
def _yaml_blocks(draw, indent: int = 0, depth: int = 0) -> list[str]:
    """Mostly well-formed block YAML: keys with values, keys opening nested blocks or lists (indented or not), a
    message in a list; now and then a line one space off."""
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        pad = " " * (indent + draw(st.sampled_from([0, 0, 0, 0, 1])))
        name = draw(st.sampled_from(_ROOT_NAMES if depth == 0 else _INNER_NAMES))
        kind = draw(st.sampled_from(["value", "value", "block", "list", "messages"] if depth < 2 else ["value"]))
        if kind == "value":
            lines.append(f"{pad}{name}: {draw(_YAML_VALUES)}")
            continue
        lines.append(f"{pad}{name}:")
        step = draw(st.sampled_from([2, 4]))
        if kind == "block":
            lines += draw(_yaml_blocks(indent + step, depth + 1))
            continue
        dash = " " * (indent + draw(st.sampled_from([0, step])))
        for _ in range(draw(st.integers(1, 3))):
            if kind == "list":
                lines.append(f"{dash}- {draw(_YAML_VALUES)}")
            else:
                inner = draw(_yaml_blocks(len(dash) + 2, 2))
                lines.append(f"{dash}- {inner[0].lstrip()}")
                lines += inner[1:]
    return lines


@settings(max_examples=examples(400), deadline=None)
@given(_yaml_blocks().map("\n".join))
def test_direct_yaml_agrees_on_nested_blocks_and_lists(text):
    assert _agrees(text, "yaml")


_JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**65), 2**65), st.floats(allow_nan=True),
              st.sampled_from(["dp", "mp", "1F1B", "bfloat16", "s\u00e9", "\ud800", "x"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.lists(st.tuples(_NAMES, inner), max_size=4).map(lambda pairs: ("pairs", pairs))),
    max_leaves=8,
)


def _render(value) -> str:
    """JSON text, with objects given as pairs so that a key may repeat."""
    if isinstance(value, tuple) and value and value[0] == "pairs":
        return "{" + ", ".join(f"{json.dumps(k)}: {_render(v)}" for k, v in value[1]) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    return json.dumps(value)


@settings(max_examples=examples(400), deadline=None)
@given(_text_documents())
def test_direct_text_agrees_with_the_located_path_or_steps_aside(text):
    assert _agrees(text, "prototxt")


@settings(max_examples=examples(400), deadline=None)
@given(_yaml_documents())
def test_direct_yaml_agrees_with_the_located_path_or_steps_aside(text):
    assert _agrees(text, "yaml")


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.tuples(_NAMES, _JSON_VALUES), max_size=5))
def test_direct_json_agrees_with_the_located_path_or_steps_aside(pairs):
    assert _agrees(_render(("pairs", pairs)), "json")


@settings(max_examples=examples(300), deadline=None)
@given(messages(), st.sampled_from([None, 2]), st.booleans())
def test_json_located_in_decoded_order_as_token_by_token(msg, indent, compact):
    """Without escapes, JSON positions come from the decoded pairs' order (str.find): the same as lexing it."""
    text = json.dumps(strategy.to_dict(msg), indent=indent, separators=(",", ":") if compact else None)
    if "\\" in text or jsondirect.fill(strategy.DistributedStrategy(), text, "<t>") is None:
        return
    root = strategy.DistributedStrategy.DESCRIPTOR
    assert list(jsonpositions.locate(text, root, jsondirect._decode(text))) == list(jsonpositions._lexed(text, root))


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet="ab_:-\n #'\"{}[]01.eynot~", max_size=50))
def test_direct_yaml_never_accepts_what_the_located_path_rejects(text):
    assert _agrees(text, "yaml")


@pytest.mark.parametrize(("text", "expected"), [
    ("amp: on\n", {"amp": True}),  # YAML 1.1: on is true
    ("pipeline_configs:\n  schedule_mode: 1F1B\n", {"pipeline_configs": {"schedule_mode": "1F1B"}}),
    ("hybrid_configs:\n  order:\n  - dp\n  - mp\n  mp_degree: 2\n", {"hybrid_configs": {"order": ["dp", "mp"], "mp_degree": 2}}),
    ("hybrid_configs:\n  order:\n    - dp\n", {"hybrid_configs": {"order": ["dp"]}}),
    ("amp_configs: {}\n", {"amp_configs": {}}),
    ("ampConfigs:\n  initLossScaling: 1.0e-05\n", {"amp_configs": {"init_loss_scaling": 1e-05}}),
])
def test_yaml_block_documents_read_directly(text, expected):
    direct = _direct(text, "yaml")
    assert direct is not None and direct == _located(text, "yaml")
    assert strategy.to_dict(direct[0]) == expected


@pytest.mark.parametrize("text", ["hybrid_configs:\n  mp_degree: 010\n", "amp: yes\namp: no\n", "hybrid_configs:\n  mp_degree: 2\n mp: 1\n",
                                  "hybrid_configs:\n  order: [dp, mp]\n", "amp: !!bool true\n", "amp:\n"])
def test_yaml_outside_the_block_subset_takes_the_located_path(text):
    assert _direct(text, "yaml") is None


def test_json_locations_are_found_only_when_asked_and_are_the_located_paths():
    path = PADDLE_FILES[0].with_suffix(".json")
    msg = strategy.DistributedStrategy()
    read = jsondirect.fill(msg, path.read_text(), str(path))
    assert read is not None
    positions = read[0]
    assert isinstance(positions, Positions) and positions._locate is not None  # nothing located yet
    _, expected = _located(path.read_text(), "json")
    first = next(iter(expected))
    assert positions[first] == expected[first]._replace(source=str(path))
    assert positions._rest is not None  # read only as far as the first field
    positions["extra"] = strategy.errors.Location("--set", 1, 1)  # a later location (an override) wins
    assert dict(positions) == {**{k: v._replace(source=str(path)) for k, v in expected.items()},
                               "extra": strategy.errors.Location("--set", 1, 1)}


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_a_warning_from_a_directly_read_file_names_its_line(fmt, tmp_path):
    source = tmp_path / f"s.{fmt}"
    lines = {"json": '{\n  "hybrid_configs": {\n    "mp_configs": {\n      "mp_skip_c_identity": true\n    }\n  }\n}\n',
             "yaml": "hybrid_configs:\n  mp_configs:\n    mp_skip_c_identity: true\n"}
    source.write_text(lines[fmt])
    with pytest.warns(strategy.StrategyWarning) as caught:
        strategy.load(source, policy="warn")
    line, column = (4, 7) if fmt == "json" else (3, 5)
    assert str(caught[0].message).startswith(f"{source}:{line}:{column}: hybrid_configs.mp_configs.mp_skip_c_identity requires")
