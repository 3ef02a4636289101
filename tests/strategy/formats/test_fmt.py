"""`strategy fmt` and the formatter behind it: canonical layout, every comment kept, idempotent, atomic."""

from __future__ import annotations

import os
import re

from google.protobuf import text_format
from hypothesis import given, settings
from hypothesis import strategies as st

import strategy
from strategies import examples, messages
from strategy.formats.text.fmt import format_text
from test_cli_check import strategy_cli

MESSY = """# Strategy for 2 ranks

hybrid_configs: {   # hybrid
  dp_degree:1 ;  mp_degree : 2 # two ranks



  # model parallel options
  mp_configs <
    mp_async_allreduce: True
    sync_mode: "average" # mode
    # nothing after this
  >  # end of mp_configs
}
# trailing remark
"""

CANONICAL = """# Strategy for 2 ranks

hybrid_configs {  # hybrid
  dp_degree: 1
  mp_degree: 2  # two ranks

  # model parallel options
  mp_configs {
    mp_async_allreduce: true
    sync_mode: "average"  # mode
    # nothing after this
  }  # end of mp_configs
}
# trailing remark
"""


def comments(text: str) -> list[str]:
    """The `#` comments of a text-format document, skipping quoted strings (which may hold a `#`)."""
    return [c for c in re.findall(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|(#[^\n]*)", text) if c]


def test_fmt_produces_the_canonical_layout_and_keeps_comments_in_place():
    assert format_text(MESSY) == CANONICAL


def test_fmt_is_idempotent_and_keeps_the_meaning():
    assert format_text(CANONICAL) == CANONICAL
    assert strategy.loads(MESSY) == strategy.loads(CANONICAL)


@settings(max_examples=examples(150), deadline=None)
@given(messages(), st.booleans(), st.lists(st.text(alphabet="abc XYZ#:{}", max_size=12), max_size=8), st.randoms())
def test_fmt_never_loses_a_comment_or_changes_the_message(msg, one_line, notes, rnd):
    lines = text_format.MessageToString(msg, as_one_line=one_line).split("\n")  # not splitlines: strings may hold \x85
    for note in notes:  # sprinkle own-line and end-of-line comments
        at = rnd.randrange(len(lines) + 1)
        if lines and rnd.random() < 0.5 and at < len(lines):
            lines[at] += f"  # {note}"
        else:
            lines.insert(at, f"# {note}")
    text = "\n".join(lines) + "\n"
    out = format_text(text)
    assert sorted(comments(out)) == sorted(comments(text))
    assert strategy.loads(out) == msg
    assert format_text(out) == out


def test_fmt_rewrites_in_place_atomically_and_reports(write, tmp_path):
    path = write("s.prototxt", MESSY)
    path.chmod(0o640)
    result = strategy_cli("fmt", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{path}: reformatted"
    assert path.read_text() == CANONICAL
    assert oct(path.stat().st_mode & 0o777) == "0o640"
    assert os.listdir(tmp_path) == ["s.prototxt"]
    assert strategy_cli("fmt", str(path)).stdout == ""  # already canonical: nothing to say


def test_fmt_check_lists_files_that_would_change_and_writes_nothing(write):
    messy, clean = write("a.prototxt", MESSY), write("b.prototxt", CANONICAL)
    result = strategy_cli("fmt", "--check", str(messy), str(clean))
    assert result.returncode == 1
    assert result.stdout.strip() == f"{messy}: would reformat"
    assert messy.read_text() == MESSY
    assert strategy_cli("fmt", "--check", str(clean)).returncode == 0


def test_fmt_leaves_a_file_with_a_syntax_error_untouched(write):
    path = write("bad.prototxt", "hybrid_configs {\n  mp_degree: 2\n")
    result = strategy_cli("fmt", str(path))
    assert result.returncode == 1
    assert result.stderr.strip() == f"{path}:3:1: expected '}}' before end of file"
    assert path.read_text() == "hybrid_configs {\n  mp_degree: 2\n"


def test_fmt_refuses_a_file_over_the_size_limit_and_leaves_it_whole(write):
    path = write("big.prototxt", "hybrid_configs { mp_degree: 2 }\n" + "# padding comment line\n" * 60_000)
    before = path.read_bytes()
    result = strategy_cli("fmt", str(path))
    assert result.returncode == 1
    assert "larger than 1048576 bytes" in result.stderr
    assert path.read_bytes() == before


def test_fmt_refuses_invalid_syntax_instead_of_rewriting_it(write):
    path = write("bad.prototxt", "hybrid_configs { mp_degree: - } }\n")
    result = strategy_cli("fmt", str(path))
    assert result.returncode == 1
    assert result.stderr.strip() == f"{path}:1:31: expected a value, got '}}'"
    assert path.read_text() == "hybrid_configs { mp_degree: - } }\n"


def test_fmt_keeps_a_comment_before_a_list_and_is_idempotent_around_blank_lines():
    assert format_text("a:\n# kept\n[1]\n") == "a: [1]  # kept\n"
    once = format_text("hybrid_configs {\n mp_degree\n\n: 2 }")
    assert once == "hybrid_configs {\n  mp_degree: 2\n}\n" and format_text(once) == once


def test_fmt_normalises_crlf_files_to_one_line_ending():
    assert format_text("x: 1 # c\r\ny: 2\r\n") == "x: 1  # c\ny: 2\n"


def test_fmt_writes_through_a_symlink(tmp_path):
    real = tmp_path / "real.prototxt"
    real.write_text("hybrid_configs {mp_degree:2}\n")
    link = tmp_path / "link.prototxt"
    link.symlink_to(real)
    assert strategy_cli("fmt", str(link)).returncode == 0
    assert link.is_symlink()
    assert real.read_text() == "hybrid_configs {\n  mp_degree: 2\n}\n"
