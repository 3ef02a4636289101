"""`strategy explain`: one screen of what matters by default, every field with --all, all of it as JSON with --json."""

from __future__ import annotations

import json

from conftest import ROOT
from strategy.cli import main

LLAMA_4D = ROOT.parent / "shared" / "fixtures" / "paddle-hybrid" / "llama_4d.prototxt"
ARGS = [str(LLAMA_4D), "--world-size", "8", "--params", "7e9"]


def explain(capsys, *extra: str) -> str:
    assert main(["explain", *ARGS, *extra]) == 0
    return capsys.readouterr().out


def rows(text: str) -> dict[str, list[str]]:
    """The field table: path -> [value, source, effect]."""
    table = text.split("\n\n", 1)[0].splitlines()[1:]
    return {line.split()[0]: (line.split(None, 3)[1:] + [""])[:3] for line in table}


def test_the_paddle_written_4d_file_fits_one_screen_with_its_groups_pipeline_and_memory(capsys):
    text = explain(capsys)
    assert len(text.splitlines()) <= 45
    shown = rows(text)
    # every field the file sets, and those in effect other than their default says; no plain defaults
    assert all(source == "set" or effect in ("always on",) or effect.startswith("inferred")
               for _, source, effect in shown.values()), shown
    assert shown["hybrid_configs.pp_degree"] == ["2", "set", ""]
    assert shown["hybrid_configs.sharding_configs.release_gradients"] == ["false", "default", "always on"]
    assert "hybrid_configs.mp_configs.sync_param" not in shown and "gradient_merge" not in shown
    assert "  pp groups: [0, 4] [1, 5] [2, 6] [3, 7]" in text
    assert "pipeline: torch.distributed.pipelining.Schedule1F1B, 2 stages over pp 2 (one per rank)" in text
    assert "  per rank       3.26 GiB   3.26 GiB    6.52 GiB   13.04 GiB" in text  # FSDP2's fp32 shards


def test_a_note_that_a_row_already_says_is_not_repeated(capsys):
    text = explain(capsys)
    assert rows(text)["amp_configs.init_loss_scaling"] == ["32768", "set", "no effect: bfloat16 needs no loss scaling"]
    assert rows(text)["hybrid_configs.pp_configs.delay_scale_loss"][2].startswith("no effect in PyTorch: each micro")
    assert "is set but has no effect" not in text
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
