"""`strategy explain`: one screen of what matters by default, every field with --all, all of it as JSON with --json."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import strategy
from conftest import ROOT, explain_rows as rows
from strategy import schema
from strategy._generated.strategy_options_pb2 import IMPLEMENTED
from strategy.cli import main
from strategy.schema import support

LLAMA_4D = ROOT.parent / "shared" / "fixtures" / "paddle-hybrid" / "llama_4d.prototxt"
ARGS = [str(LLAMA_4D), "--world-size", "8", "--params", "7e9"]
EXAMPLES = sorted((ROOT / "examples" / "strategies").glob("*.prototxt"))
WIDTH = 100  # an ordinary terminal


def explain(capsys, *extra: str, args: list[str] = ARGS) -> str:
    assert main(["explain", *args, *extra]) == 0
    return capsys.readouterr().out


def too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > WIDTH]


def test_the_paddle_written_4d_file_fits_one_screen_with_its_groups_pipeline_and_memory(capsys):
    text = explain(capsys)
    assert len(text.splitlines()) <= 55 and not too_wide(text)
    shown = rows(text)
    # every field the file sets, the degrees inferred and what decides how an axis that is on runs; no other defaults
    assert all(source == "set" or effect.startswith("inferred") or schema.option(schema.field_by_path(path)[-1], "decides")
               for path, (_, source, effect) in shown.items()), shown
    assert shown["hybrid_configs.pp_degree"] == ["2", "set", ""]
    assert "hybrid_configs.mp_configs.sync_param" not in shown and "gradient_merge" not in shown
    assert "  pp groups: [0, 4] [1, 5] [2, 6] [3, 7]" in text
    assert "pipeline: torch.distributed.pipelining.Schedule1F1B, 2 stages over pp 2 (one per rank)" in text
    assert "  per rank       3.26 GiB   3.26 GiB    6.52 GiB   13.04 GiB" in text  # FSDP2's fp32 shards


def test_without_params_the_4d_file_takes_at_most_45_lines_of_100_columns(capsys):
    text = explain(capsys, args=ARGS[:3])
    assert len(text.splitlines()) <= 45 and not too_wide(text), text


def test_every_line_of_the_4d_file_fits_100_columns_with_all_fields_too(capsys):
    assert not too_wide(explain(capsys, "--all"))


def world_size(path: Path) -> int:
    """Ranks the example's degrees fill, with two data replicas where it infers dp_degree."""
    h = strategy.load(path).hybrid_configs
    return math.prod(d if d > 0 else 2 for d in (h.dp_degree, h.mp_degree, h.pp_degree, h.sharding_degree,
                                                  h.sep_degree, h.cp_degree))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_line_of_each_example_strategy_fits_100_columns(capsys, path):
    args = [str(path), "--world-size", str(world_size(path)), "--params", "7e9"]
    for extra in ((), ("--all",)):
        text = explain(capsys, *extra, args=args)
        assert not too_wide(text), "\n".join(too_wide(text))


def test_a_long_effect_continues_below_its_row_with_its_kind_on_the_row(capsys):
    lines = explain(capsys).splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith("amp_configs.init_loss_scaling "))
    assert lines[at].endswith("  set      no effect:")
    assert lines[at + 1] == "    bfloat16 needs no loss scaling"


def test_a_long_effect_continues_under_its_column_where_that_has_room(capsys, write):
    path = write("p.prototxt", "a_sync: true")
    lines = explain(capsys, args=[str(path), "--world-size", "1"]).splitlines()
    column = lines[0].index("effect")
    at = next(k for k, line in enumerate(lines) if line.startswith("a_sync "))
    assert lines[at][column:] == "no effect in PyTorch: parameter-server training is"
    assert lines[at + 1][:column].strip() == "" and lines[at + 1][column] != " "
    assert rows("\n".join(lines))["a_sync"][2] == ("no effect in PyTorch: parameter-server training is Paddle's; this "
                                                    "runtime trains collectively with torch.distributed")


def test_a_long_value_continues_under_its_column_to_leave_the_effect_room(capsys, write):
    path = write("o.prototxt", 'hybrid_configs { mp_degree: 2 order: ["dp", "sharding", "pp", "sep", "mp"] }')
    lines = explain(capsys, args=[str(path), "--world-size", "4"]).splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith("hybrid_configs.order "))
    value, source, effect = (lines[0].index(name) for name in ("value", "source", "effect"))
    assert WIDTH - effect >= 40
    assert " ".join(line[value:source].strip() for line in lines[at:at + 2]) == '["dp", "sharding", "pp", "sep", "mp"]'
    assert " ".join(line[effect:].strip() for line in lines[at:at + 2]) == "outermost first: dp, sharding, pp, sep, cp, mp"


def test_the_sharding_stage_is_shown_without_all_while_sharding_degree_is_above_1(capsys, write):
    assert rows(explain(capsys))["hybrid_configs.sharding_configs.stage"] == ["1", "default", ""]
    path = write("s.prototxt", "hybrid_configs { mp_degree: 2 }")
    assert "hybrid_configs.sharding_configs.stage" not in rows(explain(capsys, args=[str(path), "--world-size", "2"]))


def test_the_pipelines_schedule_and_micro_batches_are_shown_without_all_while_pp_degree_is_above_1(capsys, write):
    shown = rows(explain(capsys))
    assert shown["pipeline_configs.schedule_mode"] == ['"1F1B"', "default", ""]
    assert shown["hybrid_configs.pp_configs.virtual_pp_degree"] == ["1", "default", ""]
    path = write("p.prototxt", "hybrid_configs { pp_degree: 2 }")
    shown = rows(explain(capsys, args=[str(path), "--world-size", "2"]))
    assert shown["pipeline_configs.accumulate_steps"] == ["1", "default", ""]  # one micro-batch a step: worth seeing
    assert shown["pipeline_configs.micro_batch_size"] == ["1", "default", ""]
    path = write("p1.prototxt", "hybrid_configs { mp_degree: 2 }")
    assert not any(p.startswith("pipeline_configs.") for p in rows(explain(capsys, args=[str(path), "--world-size", "2"])))


def test_what_decides_how_an_axis_runs_is_declared_in_the_schema_inside_a_message_an_axis_turns_on():
    decides = [path for path, _, _ in schema.fields_with("decides")]
    assert set(decides) >= {"hybrid_configs.sharding_configs.stage", "pipeline_configs.schedule_mode"}
    for path in decides:
        chain = schema.field_by_path(path)
        assert support.status(tuple(chain)).support == IMPLEMENTED, path
        assert any(schema.option(f, "active_when_parallel") for f in chain[:-1]), path


def test_an_always_on_flag_left_false_is_not_a_contradiction(capsys):
    brief, every = rows(explain(capsys)), rows(explain(capsys, "--all"))
    assert "hybrid_configs.sharding_configs.release_gradients" not in brief  # a default, and nothing to act on
    assert every["hybrid_configs.sharding_configs.release_gradients"] == [
        "false", "default", "always on here (false has no effect)"]
    assert every["hybrid_configs.pp_configs.release_gradients"] == ["true", "set", "always on"]


def test_an_always_on_flag_set_false_says_so_once_with_what_runs_instead(capsys, write):
    path = write("s.prototxt", "hybrid_configs { sharding_degree: 2 sharding_configs { release_gradients: false } }")
    text = explain(capsys, args=[str(path), "--world-size", "2"])
    effect = rows(text)["hybrid_configs.sharding_configs.release_gradients"]
    assert effect[:2] == ["false", "set"]
    assert effect[2].startswith("always on here (false has no effect): FSDP2 frees each unit's unsharded gradients")
    assert text.count("release_gradients") == 1  # no note repeats it


def test_a_note_that_a_row_already_says_is_not_repeated(capsys):
    text = explain(capsys)
    assert rows(text)["amp_configs.init_loss_scaling"] == ["32768", "set", "no effect: bfloat16 needs no loss scaling"]
    assert rows(text)["hybrid_configs.pp_configs.delay_scale_loss"][2] == "on"
    assert rows(text)["hybrid_configs.sharding_configs.accumulate_steps"][2].endswith(
        "; sharding_configs.stage says when FSDP2 reduces")
    assert "is set but has no effect" not in text and "this runtime decides it itself" not in text
    assert "  recompute is on and recompute_configs.checkpoints names no modules" in text  # a note no row says


def test_all_lists_every_field_the_default_view_leaves_out(capsys):
    brief, every = rows(explain(capsys)), rows(explain(capsys, "--all"))
    assert set(brief) < set(every)
    assert every["hybrid_configs.mp_configs.sync_param"] == ["true", "default", "on"]
    assert every["gradient_merge"] == ["false", "default", "off"]
    assert {path: every[path] for path in brief} == brief


def test_json_is_one_document_with_every_field_the_groups_the_pipeline_and_the_memory(capsys):
    data = json.loads(explain(capsys, "--json"))
    every = rows(explain(capsys, "--all"))
    fields = {f["path"]: f for f in data["fields"]}
    assert list(fields) == list(every)
    assert {p for p, f in fields.items() if f["changed"]} == set(rows(explain(capsys)))
    assert fields["amp_configs.use_pure_bf16"] == {"path": "amp_configs.use_pure_bf16", "value": True, "source": "set",
                                                   "effect": "on", "changed": True}
    assert fields["amp_configs.decr_ratio"]["value"] == 0.8  # as the file spells it, not float32's 0.800000011920929
    assert fields["pipeline_configs.schedule_mode"]["value"] == "1F1B"
    assert data["groups"]["order"] == ["dp", "pp", "sharding", "sep", "cp", "mp"]
    assert data["groups"]["axes"]["mp"] == {"degree": 2, "groups": [[0, 1], [2, 3], [4, 5], [6, 7]], "implemented": True}
    assert data["pipeline"]["schedule"] == "Schedule1F1B" and data["pipeline"]["stages_of_pp_rank"] == [[0], [1]]
    per_rank = data["memory"]["bytes"]["per_rank"]
    assert per_rank["total"] == per_rank["parameters"] + per_rank["gradients"] + per_rank["optimizer"]
    assert round(per_rank["total"] / 2**30, 2) == 13.04
    assert any(n.startswith("amp_configs.init_loss_scaling is set but has no effect") for n in data["notes"])


def test_json_and_all_are_one_choice(capsys):
    try:
        main(["explain", *ARGS, "--json", "--all"])
    except SystemExit as e:
        assert e.code == 2
    else:
        raise AssertionError("--json with --all was accepted")
    assert "not allowed with argument" in capsys.readouterr().err
