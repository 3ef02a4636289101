"""dump writes atomically: the old file stays whole on failure, no temporary file is left, modes are kept."""

from __future__ import annotations

import os
import stat

import pytest

import strategy
from strategy import StrategyError

S = strategy.loads("hybrid_configs { mp_degree: 2 }")


@pytest.mark.parametrize(("name", "fmt"), [("a.prototxt", "prototxt"), ("a.json", "json"), ("a.yml", "yaml"), ("a.pb", "binary")])
def test_dump_picks_the_format_from_the_extension(tmp_path, name, fmt):
    path = tmp_path / name
    strategy.dump(S, path)
    assert strategy.load(path) == S
    assert strategy.load(path, format=fmt) == S
    assert os.listdir(tmp_path) == [name]


def test_a_failure_mid_write_leaves_the_old_file_and_no_debris(tmp_path, monkeypatch):
    path = tmp_path / "s.prototxt"
    path.write_text("hybrid_configs { mp_degree: 4 }\n")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space left"):
        strategy.dump(S, path)
    assert path.read_text() == "hybrid_configs { mp_degree: 4 }\n"
    assert os.listdir(tmp_path) == ["s.prototxt"]


def test_dump_keeps_the_permissions_of_an_existing_file(tmp_path):
    path = tmp_path / "s.json"
    path.write_text("{}")
    path.chmod(0o640)
    strategy.dump(S, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_new_files_get_the_usual_permissions_not_the_temp_files(tmp_path):
    path = tmp_path / "s.yaml"
    umask = os.umask(0o022)
    try:
        strategy.dump(S, path)
    finally:
        os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_dump_to_an_unknown_extension_writes_nothing(tmp_path):
    with pytest.raises(StrategyError, match="unknown extension '.txt'"):
        strategy.dump(S, tmp_path / "s.txt")
    assert os.listdir(tmp_path) == []


def test_dumps_binary_is_bytes_and_text_formats_are_str():
    assert isinstance(strategy.dumps(S, format="binary"), bytes)
    for fmt in ("prototxt", "json", "yaml"):
        assert isinstance(strategy.dumps(S, format=fmt), str)
