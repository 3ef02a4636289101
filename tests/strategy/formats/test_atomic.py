"""strategy.atomic: a file written in one step, and a directory replaced so that a crash leaves one whole copy."""

from __future__ import annotations

import os

from strategy.atomic import replace_directory, restore_interrupted, write_atomic


def test_a_file_is_replaced_whole_keeping_its_permissions(tmp_path):
    target = tmp_path / "f.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    write_atomic(target, b"new")
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]  # no temporary left


def test_a_directory_is_replaced_and_the_old_one_removed_after(tmp_path):
    target, finished = tmp_path / "ckpt", tmp_path / ".ckpt.partial"
    target.mkdir()
    (target / "a").write_text("old")
    finished.mkdir()
    (finished / "a").write_text("new")
    replace_directory(finished, target)
    assert (target / "a").read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_a_replace_killed_between_its_renames_is_put_back(tmp_path):
    target = tmp_path / "ckpt"
    aside = tmp_path / ".ckpt.old-0123"
    aside.mkdir()
    (aside / "marker").write_text("")
    (tmp_path / ".ckpt.old-4567").mkdir()  # not whole: no marker
    restore_interrupted(target, whole=lambda d: (d / "marker").is_file())
    assert (target / "marker").is_file() and not aside.exists()
    restore_interrupted(target)  # a target in place: nothing to do
    assert target.is_dir()
