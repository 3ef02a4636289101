"""checkpoint_configs and parallel.Checkpointer: periodic saves, keep_last, resume from the newest readable
checkpoint, and what a checkpoint carries besides tensors (RNGs, scheduler, data position)."""

from __future__ import annotations

import shutil

import pytest

import strategy
import checkpointer_cases as cases
from parallel.checkpoint import catalog
from strategy.cli import main


@pytest.mark.parametrize("async_save", [False, True], ids=["sync", "async"])
def test_a_resumed_run_continues_exactly_with_its_rngs_scheduler_and_data_position(pools, tmp_path, async_save):
    result = pools(2).run(cases.continues_exactly, str(tmp_path / "ckpt"), async_save, timeout=120)[0]
    assert result["start"] == 4
    assert result["resumed"] == result["straight"]  # the RNG-drawn batches and noise too
    assert result["same_parameters"] and result["read"] == 6
    assert result["lr"] == [pytest.approx(1e-2 * 0.5 ** 3)]  # StepLR after 6 steps
    assert result["kept"] == ["step-2", "step-4", "step-6"]


def test_keep_last_leaves_the_newest_complete_checkpoints(pools, tmp_path):
    assert pools(2).run(cases.keeps_the_newest, str(tmp_path / "ckpt"), 2, timeout=120)[0] == ["step-4", "step-5"]


def test_a_truncated_newest_checkpoint_is_skipped_with_a_warning_naming_it(pools, tmp_path):
    result = pools(2).run(cases.skips_a_truncated_newest, str(tmp_path / "ckpt"), timeout=120)[0]
    assert result["start"] == 2 and result["read"] == 2
    newest = tmp_path / "ckpt" / "step-4"
    assert any(w.startswith(f"{newest}: skipped, not readable (__") and "(truncated)); trying the previous checkpoint"
               in w for w in result["warnings"]), result["warnings"]


def test_a_directory_of_another_model_is_an_error_naming_the_key_and_both_shapes(pools, tmp_path):
    result = pools(2).run(cases.refuses_another_model, str(tmp_path / "ckpt"), timeout=120)[0]
    assert result["error"].startswith(f"{tmp_path / 'ckpt' / 'step-1'}: the checkpoint does not fit the model; nothing "
                                      "was loaded:\n  model.0.weight: the checkpoint holds global shape [8, 8], the "
                                      "model needs [6, 6]")
    assert result["untouched"]


def test_a_background_save_holds_the_state_of_its_step(pools, tmp_path):
    result = pools(2).run(cases.background_save_takes_its_steps_state, str(tmp_path / "ckpt"), timeout=120)[0]
    assert result == {"start": 1, "equal": True}


def _fake_checkpoint(root, step):
    d = root / f"step-{step}"
    d.mkdir(parents=True)
    (d / "checkpoint.json").write_text("{}")
    (d / "data.distcp").write_bytes(b"x" * 10)
    return d


def test_a_crash_while_removing_an_old_checkpoint_loses_nothing_newer(tmp_path, monkeypatch):
    for step in (1, 2, 3, 4):
        _fake_checkpoint(tmp_path, step)
    real = shutil.rmtree

    def crash(path, *args, **kwargs):  # the process dies half-way through deleting the oldest
        (path / "data.distcp").unlink()
        raise KeyboardInterrupt

    monkeypatch.setattr(catalog.shutil, "rmtree", crash)
    with pytest.raises(KeyboardInterrupt):
        catalog.retire(tmp_path, keep_last=2)
    monkeypatch.setattr(catalog.shutil, "rmtree", real)
    assert [step for step, _ in catalog.complete(tmp_path)] == [4, 3, 2]  # the half-deleted one is out of the catalog
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".step-1.deleting-")]
    catalog.remove_debris(tmp_path)
    catalog.retire(tmp_path, keep_last=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-3", "step-4"]


# -- the strategy side -------------------------------------------------------------------------------------------
def test_checkpoint_configs_resolve_into_their_settings(tmp_path):
    r = strategy.resolve(strategy.loads(f'checkpoint_configs {{ dir: "{tmp_path}/ck" every_steps: 50 keep_last: 3 '
                                        'async_save: true }'), world_size=1)
    assert r.checkpoint == strategy.CheckpointSettings(dir=f"{tmp_path}/ck", every_steps=50, keep_last=3,
                                                       async_save=True, resume="auto")
    assert strategy.resolve(strategy.loads(""), world_size=1).checkpoint == strategy.CheckpointSettings()


@pytest.mark.parametrize(("text", "where", "message"), [
    ("checkpoint_configs {\n  every_steps: 5\n}", "2:3",
     'checkpoint_configs.every_steps 5 saves every 5 steps, but checkpoint_configs.dir is not set: say where the '
     'checkpoints go (dir: "checkpoints")'),
    ('checkpoint_configs {\n  dir: "{file}/ck"\n}', "2:3",
     "checkpoint_configs.dir '{file}/ck' cannot be written: {file} is a file, not a directory; choose a directory "
     "this user can write"),
    ('checkpoint_configs {\n  resume: "{tmp}/nowhere"\n}', "2:3",
     "checkpoint_configs.resume '{tmp}/nowhere' is no directory: give \"auto\" (the newest checkpoint in dir, if "
     "any), \"never\", or the path of a checkpoint"),
    ("gradient_merge: true gradient_merge_configs { k_steps: 4 }\ncheckpoint_configs {\n  dir: \"{tmp}/ck\"\n"
     "  every_steps: 6\n}", "4:3",
     "checkpoint_configs.every_steps 6 is not a multiple of gradient_merge_configs.k_steps 4: a save inside a merge "
     "would lose the gradients of its micro-steps; save after an update (every_steps: 4)"),
], ids=["every_steps_without_dir", "dir_under_a_file", "resume_nowhere", "inside_a_merge"])
def test_validate_refuses_checkpoint_configs_a_run_could_not_use(tmp_path, capsys, text, where, message):
    file = tmp_path / "a_file"
    file.write_text("")
    fill = {"file": str(file), "tmp": str(tmp_path)}
    path = tmp_path / "s.prototxt"
    path.write_text(text.replace("{file}", fill["file"]).replace("{tmp}", fill["tmp"]) + "\n")
    assert main(["validate", str(path)]) == 1
    expected = message.replace("{file}", fill["file"]).replace("{tmp}", fill["tmp"])
    assert capsys.readouterr().err.strip() == f"{path}:{where}: {expected}"


def test_a_save_killed_between_its_renames_is_put_back_not_removed(tmp_path):
    new = tmp_path / ".step-3.partial-0123456789ab"
    old = tmp_path / ".step-3.old-ba9876543210"
    for d in (new, old):
        d.mkdir()
        (d / "checkpoint.json").write_text("{}")
    (new / "which").write_text("new")
    (tmp_path / ".step-5.partial-aaaaaaaaaaaa").mkdir()  # unfinished: no marker
    catalog.remove_debris(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-3"]
    assert (tmp_path / "step-3" / "which").read_text() == "new"


def test_keep_last_counts_down_from_the_checkpoint_just_written(tmp_path):
    """A run resumed from an older checkpoint (or started with resume "never") in a dir holding higher steps removes
    its own old ones, never the one it just wrote nor the other run's."""
    for step in (1, 2, 3, 7, 8):
        _fake_checkpoint(tmp_path, step)
    catalog.retire(tmp_path, keep_last=2, newest=tmp_path / "step-3")
    assert [step for step, _ in catalog.complete(tmp_path)] == [8, 7, 3, 2]
