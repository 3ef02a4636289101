"""The tune's history: lines that follow the documented schema, a rerun that reuses what ended and retries once what
was interrupted, entries of another context voided with the reason, and a line cut by a crash tolerated."""

from __future__ import annotations

import json

import jsonschema
import pytest

from strategy.tuning.history import SCHEMA_PATH, History, trial_key

CONTEXT = {"model": "llama:0123456789abcdef", "seq_len": 128, "global_batch": 8, "world_size": 2,
           "device": "cpu (2 cores)", "torch": "2.13.0+cpu"}
TEXT = "# strategy plan: predicted 0.1 s\nhybrid_configs {\n  dp_degree: 2\n}\n"
LAYOUT = {"degrees": {"dp": 2, "mp": 1}, "sharding_stage": 1, "recompute": False, "micro_batch_size": 4,
          "accumulate_steps": 1, "schedule": "Schedule1F1B", "family": "dp2"}
RESULT = {"status": "ok", "step_seconds": 0.2, "steps": [0.2, 0.21, 0.19], "memory_bytes": 7e7,
          "estimate_bytes": 7.1e7, "wall_seconds": 9.5, "log": "trials/abc/log.txt"}


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_line_follows_the_schema_and_a_rerun_reuses_what_ended(tmp_path):
    path = tmp_path / "history.jsonl"
    h = History.open(path, CONTEXT)
    key = trial_key(TEXT, CONTEXT)
    h.start(key, 1, TEXT, LAYOUT, {"step_seconds": 0.1, "memory_bytes": 7.1e7, "terms": {"compute": 0.1}})
    h.end(key, 1, RESULT)
    other = trial_key(TEXT.replace("dp_degree: 2", "mp_degree: 2"), CONTEXT)
    h.start(other, 2, TEXT, LAYOUT, {"step_seconds": 0.1})
    schema = json.loads(SCHEMA_PATH.read_text())
    for record in lines(path):
        jsonschema.validate(record, schema)
    again = History.open(path, CONTEXT)
    assert again.finished(key)["result"] == RESULT and again.interrupted(key) == 0
    assert again.finished(other) is None and again.interrupted(other) == 1
    assert again.trials == 2 and not again.voided


def test_a_line_missing_what_the_schema_requires_fails_it(tmp_path):
    schema = json.loads(SCHEMA_PATH.read_text())
    h = History.open(tmp_path / "history.jsonl", CONTEXT)
    h.end(trial_key(TEXT, CONTEXT), 1, {"status": "finished", "wall_seconds": 1.0})
    with pytest.raises(jsonschema.ValidationError, match="'finished' is not one of"):
        jsonschema.validate(lines(tmp_path / "history.jsonl")[0], schema)


def test_the_key_ignores_comments_but_not_settings_or_context():
    key = trial_key(TEXT, CONTEXT)
    assert trial_key(TEXT.replace("0.1 s", "0.3 s"), CONTEXT) == key  # the plan's predictions move with each probe
    assert trial_key(TEXT.replace("dp_degree: 2", "dp_degree: 1"), CONTEXT) != key
    assert trial_key(TEXT, CONTEXT | {"torch": "2.14.0"}) != key


def test_entries_of_another_context_are_voided_naming_what_changed(tmp_path):
    path = tmp_path / "history.jsonl"
    old = CONTEXT | {"torch": "2.12.0+cpu"}
    h = History.open(path, old)
    key = trial_key(TEXT, old)
    h.start(key, 1, TEXT, LAYOUT, {})
    h.end(key, 1, RESULT)
    now = History.open(path, CONTEXT)
    assert now.voided == {key: "torch '2.12.0+cpu' -> '2.13.0+cpu'"}
    assert now.finished(trial_key(TEXT, CONTEXT)) is None and not now.entries


def test_a_line_cut_by_a_crash_is_set_aside_and_the_rest_read(tmp_path):
    path = tmp_path / "history.jsonl"
    h = History.open(path, CONTEXT)
    key = trial_key(TEXT, CONTEXT)
    h.start(key, 1, TEXT, LAYOUT, {})
    h.end(key, 1, RESULT)
    with open(path, "a") as f:
        f.write('{"version": 1, "event": "sta')  # the tune killed inside a write
    again = History.open(path, CONTEXT)
    assert again.damaged == [3] and again.finished(key)["result"] == RESULT
    other = trial_key(TEXT.replace("dp_degree: 2", "mp_degree: 2"), CONTEXT)
    again.start(other, 2, TEXT, LAYOUT, {})  # appended after the cut line, on a line of its own
    assert History.open(path, CONTEXT).interrupted(other) == 1
