"""The time model's calibration: the fit recovers the coefficients that made the steps, never goes negative, and
`strategy plan --calibration` ranks with it; a bad calibration file is refused naming the key."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

import strategy
from strategy.cli import main
from strategy.planning.calibration import FORMAT, Calibration, fit, load_calibration, mape, spearman
from strategy.planning.search import TERMS, CostModel

LLAMA = {"model_type": "llama", "vocab_size": 256, "hidden_size": 256, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 4, "intermediate_size": 688, "max_position_embeddings": 128}


def rows(coefficients: dict[str, float], n: int, seed: int = 0, noise: float = 0.0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        terms = {name: rng.uniform(0, 1) * (0 if rng.random() < 0.3 else 1) for name in TERMS}
        terms["compute"] = rng.uniform(0.5, 1)
        truth = sum(coefficients[k] * v for k, v in terms.items())
        out.append((terms, truth * (1 + rng.uniform(-noise, noise))))
    return out


def test_with_enough_trials_the_fit_recovers_the_coefficients_that_made_them():
    truth = {name: 1 + k for k, name in enumerate(TERMS)}
    c = fit(rows(truth, 60), CostModel(), ridge=1e-9)
    assert c.coefficients == pytest.approx(truth, rel=1e-3)
    assert c.errors["mape_fitted"] < 1e-6 < c.errors["mape_uncalibrated"]


def test_with_few_noisy_trials_coefficients_stay_non_negative_and_the_error_falls():
    truth = {name: 0.0 if name in ("dp", "sharding") else 5.0 for name in TERMS}  # dp and sharding fully overlapped
    data = rows(truth, 8, seed=3, noise=0.05)
    c = fit(data, CostModel())
    assert all(v >= 0 for v in c.coefficients.values())
    assert c.errors["mape_fitted"] <= c.errors["mape_prior"] <= c.errors["mape_uncalibrated"]
    assert c.errors["mape_fitted"] < 0.08
    assert c.predict(data[0][0]) == pytest.approx(sum(c.coefficients[k] * v for k, v in data[0][0].items()))


def test_a_term_the_probe_measures_as_a_step_incurs_it_keeps_its_own_figure_until_trials_show_otherwise():
    """With fewer trials than terms, at the default pull: the calls and the collectives (the probe timed a layer's
    call and a small collective as a step pays them) stay near 1 where the trials made them 1, while the terms of
    peak figures take the common scale of what is left of each step (5 here); with the plain common scale for every
    term they would be near 5. Trials that show the collectives at 3 move their coefficient there."""
    truth = {name: 5.0 for name in TERMS}
    truth.update(layers=1.0, collectives=1.0)
    few = rows(truth, 6, seed=1)
    assert all(t["layers"] or t["collectives"] for t, _ in few)  # (the anchored terms in the trials' steps)
    c = fit(few, CostModel())
    assert c.errors["common_scale"] == pytest.approx(5.0, rel=0.02)
    assert c.coefficients["layers"] == pytest.approx(1.0, abs=0.3)
    assert c.coefficients["collectives"] == pytest.approx(1.0, abs=0.3)
    assert c.errors["mape_fitted"] < 0.02 and c.errors["mape_prior"] < 0.02
    truth["collectives"] = 3.0
    shown = fit(rows(truth, 40, seed=2), CostModel(), ridge=1e-6)
    assert shown.coefficients["collectives"] == pytest.approx(3.0, rel=0.01)
    alone = fit([({"layers": 1.0}, 2.0), ({"collectives": 1.0}, 1.0)], CostModel())  # no term of the common scale
    assert alone.errors["common_scale"] == 1.0 and alone.predict({"layers": 1.0}) == pytest.approx(2.0, rel=0.1)


def test_a_calibration_file_written_before_the_collectives_term_predicts_as_it_was_fitted(tmp_path):
    """A file without `collective_seconds` was fitted without the collectives: they count 0 in it."""
    path = tmp_path / "calibration.json"
    cost = dataclasses.asdict(CostModel())
    del cost["collective_seconds"]
    coefficients = dict.fromkeys((t for t in TERMS if t != "collectives"), 2.0)
    path.write_text(json.dumps({"format": FORMAT, "cost": cost, "coefficients": coefficients}))
    c = load_calibration(path)
    assert c.cost == CostModel(**cost) and c.coefficients["collectives"] == 0.0
    assert c.predict({"compute": 1.0, "collectives": 5.0}) == 2.0


def test_without_trials_the_calibration_is_the_model_itself():
    c = fit([], CostModel())
    assert c.coefficients == dict.fromkeys(TERMS, 1.0) and c.predict({"compute": 2.0, "mp": 1.0}) == 3.0


def test_spearman_and_mape_against_hand_values():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(0.9486832980505138)  # ties at their mean rank
    assert mape([1.1, 0.9], [1.0, 1.0]) == pytest.approx(0.1)


def test_plan_ranks_with_a_calibration_and_strategy_plan_reads_its_file(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA))
    args = dict(gpus=2, gpu_memory=8 * 2 ** 30, seq_len=128, global_batch=8, top=100)
    plain = strategy.plan(str(config), **args)
    assert 2 in {c.degrees["mp"] for c in plain.candidates}  # mp 2 is among the layouts
    costly_mp = dict.fromkeys(TERMS, 1.0) | {"mp": 1e6}
    calibration = Calibration(CostModel(), costly_mp, 3)
    ranked = strategy.plan(str(config), calibration=calibration, **args)
    mp2 = [k for k, c in enumerate(ranked.candidates) if c.degrees["mp"] > 1]
    assert mp2 and min(mp2) == len(ranked.candidates) - len(mp2)  # every mp 2 layout now last
    for c in ranked.candidates:
        assert c.step_seconds == pytest.approx(calibration.predict(c.terms))
        assert sum(c.terms.values()) == pytest.approx(
            next(p for p in plain.candidates if p.text.splitlines()[3:] == c.text.splitlines()[3:]).step_seconds)
    path = tmp_path / "calibration.json"
    calibration.save(path)
    assert load_calibration(path) == calibration
    assert main(["plan", "--model", str(config), "--gpus", "2", "--gpu-memory", "8GiB", "--seq-len", "128",
                 "--global-batch", "8", "--top", "3", "--calibration", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[1].split()
    rows_ = [line.split() for line in lines[2:5]]
    assert header[:3] == ["#", "dp", "mp"] and [r[0] for r in rows_] == ["1", "2", "3"]
    assert all(r[header.index("mp")] == "1" for r in rows_)  # no mp 2 layout among the fastest three


@pytest.mark.parametrize("change, message", [
    ({"format": "other"}, "not a calibration file (its format must be 'strategy-tune-calibration/1'"),
    ({"coefficients": {"compute": 1.0, "flux": 2.0}}, "coefficients.flux: no such term (the terms: compute, mp, dp"),
    ({"coefficients": {"mp": -1}}, "coefficients.mp: expected a number >= 0, got -1"),
    ({"cost": {"peak_flops": 1.0, "warp": 2}}, "cost: expected an object of"),
    ({"cost": {"peak_flops": 1.0}}, "cost: expected an object of"),  # every constant, or the plan would guess
])
def test_a_bad_calibration_file_is_refused_naming_the_key(tmp_path, change, message):
    path = tmp_path / "calibration.json"
    cost = dataclasses.asdict(CostModel())
    path.write_text(json.dumps({"format": FORMAT, "cost": cost, "coefficients": {}} | change))
    with pytest.raises(ValueError) as e:
        load_calibration(path)
    assert str(e.value).startswith(f"{path}: {message}")


def test_a_calibration_that_is_not_json_is_refused_at_its_line(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text('{"format":\n  oops}')
    with pytest.raises(ValueError, match=rf"^{path}:2:3: not JSON: Expecting value"):
        load_calibration(path)

