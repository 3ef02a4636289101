"""The tune's choices without running trials: the shortlist holds every family, a trial interrupted twice is not run a
third time, and the stopping rule asks whether any unmeasured layout could still beat the best."""

from __future__ import annotations

import pytest

import strategy
from strategy.planning.calibration import fit
from strategy.planning.search import CostModel
from strategy.tuning.history import History, trial_key
from strategy.tuning.tuner import Trial, _fill, _measure, _shortlist, _State, corrected, family

LLAMA = {"model_type": "llama", "vocab_size": 256, "hidden_size": 256, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 4, "intermediate_size": 688, "max_position_embeddings": 128}
CONTEXT = {"model": "llama:x", "seq_len": 128, "global_batch": 8, "world_size": 2, "device": "cpu", "torch": "2.13"}


@pytest.fixture(scope="module")
def trials() -> list[Trial]:
    found = strategy.plan(LLAMA, gpus=2, gpu_memory=8 * 2 ** 30, seq_len=128, global_batch=8, top=10 ** 6)
    return [Trial(c, trial_key(c.text, CONTEXT), family(c), predicted=c.step_seconds, uncalibrated=c.step_seconds)
            for c in found.candidates]


def fresh(trials: list[Trial]) -> list[Trial]:
    return [Trial(t.candidate, t.key, t.family, predicted=t.predicted, uncalibrated=t.uncalibrated) for t in trials]


def test_the_shortlist_is_the_fastest_predicted_and_the_fastest_of_every_family(trials):
    short = _shortlist(trials, 3)
    assert all(t in short for t in sorted(trials, key=lambda t: t.predicted)[:3])
    families = {(t.family, t.candidate.stage if t.candidate.degrees["sharding"] > 1 else 0) for t in trials}
    assert families == {(t.family, t.candidate.stage if t.candidate.degrees["sharding"] > 1 else 0) for t in short}
    assert {"dp2", "mp2", "pp2", "sharding2", "sep2", "cp2"} <= {t.family for t in short}
    for t in short:  # each the family's fastest predicted
        same = [u for u in trials if u.family == t.family and u.candidate.stage == t.candidate.stage]
        assert t in trials[:3] or t.predicted == min(u.predicted for u in same)


def test_a_trial_interrupted_twice_is_recorded_as_an_error_and_not_run(tmp_path, trials):
    t = fresh(trials)[0]
    history = History.open(tmp_path / "history.jsonl", CONTEXT)
    for _ in range(2):
        history.start(t.key, 1, t.candidate.text, {}, {})
    t.number = 1
    _measure(t, history, runner=None, state=None)  # type: ignore[arg-type]  # (nothing is launched)
    assert t.status == "error" and t.error.startswith("interrupted twice")
    assert History.open(tmp_path / "history.jsonl", CONTEXT).finished(t.key)["result"]["status"] == "error"


def test_the_tune_stops_when_no_unmeasured_layout_can_beat_the_best(trials):
    ts = fresh(trials)
    state = _State(ts, CostModel(), CONTEXT)
    ranked = sorted(ts, key=lambda t: t.uncalibrated)
    for t in ranked[:-5]:  # all but the five slowest predicted measured, at 10 times their prediction
        t.status, t.step_seconds = "ok", 10 * t.uncalibrated
    state.refit()
    assert min(t.predicted for t in ranked[-5:]) > 1.5 * state.best().step_seconds  # (the fit: 10 times the plan)
    nxt, why = state.next([])
    assert nxt is None and why.startswith("no unmeasured layout can beat the best measured")
    for t in ranked[:-5]:
        t.step_seconds = 100.0  # every measured layout far slower: the unmeasured could beat them
    state.refit()
    nxt, _ = state.next([])
    assert nxt is not None and not nxt.status
    assert fit([(ts[1].candidate.terms, ts[1].step_seconds)], CostModel()).predict(ts[1].candidate.terms) == pytest.approx(
        ts[1].step_seconds, rel=0.01)


def test_the_close_contenders_of_the_best_are_measured_again_up_to_three_runs_each(trials):
    from strategy.tuning.tuner import _confirm

    ts = fresh(trials)
    state = _State(ts, CostModel(), CONTEXT)
    for t, seconds in zip(ts, (0.20, 0.21, 0.35)):  # the third beyond 30% of the best: not a contender
        _fill(t, {"status": "ok", "step_seconds": seconds}, None)
    order = []
    for again in (0.22, 0.18, 0.23, 0.19):
        t = _confirm(state)
        order.append(ts.index(t))
        _fill(t, {"status": "ok", "step_seconds": again}, None)
    # fewest runs first, the faster of equals (after two runs each: 0.195 against 0.21); three runs each, then done
    assert order == [0, 1, 1, 0] and _confirm(state) is None
    assert ts[0].samples == [0.20, 0.22, 0.19] and ts[0].step_seconds == 0.20 and state.best() is ts[0]
    assert ts[1].samples == [0.21, 0.18, 0.23] and ts[1].step_seconds == 0.21
    _fill(ts[1], {"status": "timeout"}, None)  # a repeat that fails keeps what was measured
    assert ts[1].status == "ok" and ts[1].samples == [0.21, 0.18, 0.23]
    alone = fresh(trials)
    _fill(alone[0], {"status": "ok", "step_seconds": 0.2}, None)
    _fill(alone[1], {"status": "ok", "step_seconds": 0.35}, None)
    assert _confirm(_State(alone, CostModel(), CONTEXT)) is None  # no contender within 30%: nothing to run again


def test_step_times_are_compared_at_the_probes_speed(trials):
    """A trial whose reference workload took 81/16 of the probe's counts as 8/27 of what it measured (three quarters
    of the correction: SPEED_WEIGHT 0.75); without a reference on either side (a user's command) it counts as
    measured."""
    assert corrected({"step_seconds": 0.54, "reference_seconds": 0.10125}, 0.02) == pytest.approx(0.16)
    assert corrected({"step_seconds": 0.5}, 0.02) == 0.5 and corrected({"step_seconds": 0.5, "reference_seconds": 0.03125},
                                                                         None) == 0.5
    assert corrected({"status": "oom"}, 0.02) is None
    t = fresh(trials)[0]
    _fill(t, {"status": "ok", "step_seconds": 0.54, "reference_seconds": 0.10125}, 0.02)
    assert t.step_seconds == pytest.approx(0.16) and t.speed == pytest.approx(8 / 27)
    _fill(t, {"status": "ok", "step_seconds": 0.5, "reference_seconds": 0.02}, 0.02)  # measured again at full speed
    assert t.samples == pytest.approx([0.16, 0.5]) and t.step_seconds == pytest.approx(0.33)


def test_the_best_measured_layouts_micro_batch_neighbours_go_first_and_the_search_walks_down_them(trials):
    """The time model ranks micro-batch sizes by the calls' cost alone: once two layouts are measured, the best one's
    unmeasured halves and doubles run before the rest of the shortlist, and a neighbour that wins is searched around
    in turn."""
    ts = fresh(trials)
    state = _State(ts, CostModel(), CONTEXT)
    dp4 = next(t for t in ts if t.family == "dp2" and t.candidate.micro_batch_size == 4 and not t.candidate.recompute)
    other = next(t for t in ts if t.family == "mp2")
    pending = [t for t in ts if t.family == "sep2"]
    _fill(dp4, {"status": "ok", "step_seconds": 0.2}, None)
    assert state.next(pending)[0] in pending  # one layout measured: the shortlist first
    _fill(other, {"status": "ok", "step_seconds": 0.3}, None)
    nxt, _ = state.next(pending)
    assert nxt.family == "dp2" and nxt.candidate.micro_batch_size in (2, 8) and not nxt.candidate.recompute
    _fill(nxt, {"status": "ok", "step_seconds": 0.1 if nxt.candidate.micro_batch_size == 2 else 0.25}, None)
    sizes = {t.candidate.micro_batch_size for t in state.neighbours(state.best())}
    assert sizes <= {1, 2, 4, 8} and state.best().candidate.micro_batch_size in (2, 4)
    while (nxt := state.next(pending)[0]) is not None and nxt not in pending:  # down to the smallest that wins
        _fill(nxt, {"status": "ok", "step_seconds": 0.05 * nxt.candidate.micro_batch_size}, None)
    assert state.best().candidate.micro_batch_size == 1 and nxt in pending


def test_after_the_search_a_new_best_from_a_repeat_has_its_neighbours_searched_before_more_repeats(trials):
    """A repeat can put first a layout the search did not look around (it was second then): its unmeasured
    micro-batch neighbours run next, as new trials; with none left, the close contenders run again."""
    from strategy.tuning.tuner import _after_search

    ts = fresh(trials)
    state = _State(ts, CostModel(), CONTEXT)
    dp4 = next(t for t in ts if t.family == "dp2" and t.candidate.micro_batch_size == 4 and not t.candidate.recompute)
    sep8 = next(t for t in ts if t.family == "sep2" and t.candidate.micro_batch_size == 8 and not t.candidate.recompute)
    _fill(sep8, {"status": "ok", "step_seconds": 0.18}, None)  # a lucky first run
    _fill(dp4, {"status": "ok", "step_seconds": 0.20}, None)
    for t in state.neighbours(sep8):
        _fill(t, {"status": "ok", "step_seconds": 0.3}, None)  # the search looked around sep 2
    nxt, repeat = _after_search(state, sep8)
    assert repeat and nxt is sep8  # no neighbour of the best left: the contenders run again, the faster first
    _fill(sep8, {"status": "ok", "step_seconds": 0.26}, None)  # its second run: 0.22 at the median, dp 2 first now
    assert state.best() is dp4
    nxt, repeat = _after_search(state, sep8)
    assert not repeat and nxt in state.neighbours(dp4) and nxt.candidate.micro_batch_size in (2, 8)
    assert _after_search(state, dp4) == (dp4, True)  # the best the search ended on (its neighbours were its to run):
    # the contender with the fewest runs again
