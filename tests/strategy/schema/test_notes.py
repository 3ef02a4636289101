"""Notes stay data until they are printed: each is its sentence (a str users read and compare) and its field path,
kind and reason, which `explain` reads instead of parsing the sentence."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import strategy
from strategy.notes import Effect, Kind, Note

TEXT = ("hybrid_configs { pp_configs { enable_timer: true } mp_configs { mp_async_allreduce: true } } "
        "amp: true amp_configs { use_pure_bf16: true init_loss_scaling: 1024 }")


def test_a_resolved_note_is_its_sentence_and_its_data():
    notes = {n.path: n for n in strategy.resolve(strategy.loads(TEXT), world_size=1).notes}
    timer = notes["hybrid_configs.pp_configs.enable_timer"]
    assert timer == "hybrid_configs.pp_configs.enable_timer is set but has no effect: hybrid_configs.pp_degree is 1."
    assert (timer.kind, timer.reason) == (Kind.NO_EFFECT, "hybrid_configs.pp_degree is 1")
    assert notes["hybrid_configs.dp_degree"].kind is Kind.INFERRED
    assert notes["amp_configs.init_loss_scaling"].reason == "bfloat16 needs no loss scaling"


def test_a_note_survives_pickling_as_the_ranks_exchange_it():
    note = Note("pipeline_configs.schedule_mode", Kind.NO_EFFECT, "use_dualpipev runs it", value='"1F1B"')
    again = pickle.loads(pickle.dumps(note))
    assert again == note == 'pipeline_configs.schedule_mode "1F1B" is set but has no effect: use_dualpipev runs it.'
    assert (again.path, again.kind, again.value) == (note.path, note.kind, note.value)


def test_explain_hides_a_note_its_row_says_by_kind_not_by_wording():
    out = strategy.explain(strategy.loads("hybrid_configs { pp_configs { enable_timer: true } }"), world_size=1)
    assert "enable_timer" in out and "is set but has no effect" not in out  # the row says it; the note is left out
    assert str(Effect(Kind.NO_EFFECT, "hybrid_configs.pp_degree is 1")) == "no effect: hybrid_configs.pp_degree is 1"


def test_explain_parses_no_sentence():
    source = (Path(strategy.__file__).parent / "resolution" / "explain.py").read_text()
    assert not re.search(r"^import re$", source, re.M) and ".startswith(\"no effect" not in source
