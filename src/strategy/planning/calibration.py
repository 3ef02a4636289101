"""The plan's time model fitted to measured steps (`strategy tune`), and its file (`strategy plan --calibration`).

The prediction is a weighted sum of the model's terms (`search.step_terms`: compute, each axis's communication, the
calls, the collectives, the optimizer, the bubble, a fixed cost), each term worked out from the cost constants (the
device probe's when tuning). The fit finds one coefficient per term by least squares on the relative error of the
measured trials, regularised toward a prior (ridge): with fewer trials than terms a term no trial shows stays at its
prior, and a coefficient is never negative (a term cannot make a step faster). The prior of a term whose constant the
probe measures as a step incurs it (`AS_MEASURED`: a layer's call, a small collective) is 1; the others' (peak
FLOP/s, one message's bandwidth: a step reaches a share of them) is one common scale, the median over the trials of
what is left of the step over their sum. A communication coefficient below the common scale is the share of that
traffic the runtime hides behind compute (overlap).
"""

# Annotations stay evaluated (no `from __future__ import annotations`): see resolution/layout.py.

import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .search import TERMS, CostModel

__all__ = ["Calibration", "fit", "load_calibration", "spearman", "mape"]

FORMAT = "strategy-tune-calibration/1"
RIDGE = 0.05  # the pull toward the prior, against the squared relative error of each trial
# terms whose cost constant the probe measures as a step incurs it (a decoder layer's call, a small collective):
# their prior coefficient is 1, where the others' (peak FLOP/s, one message's bandwidth) share the common scale
AS_MEASURED = ("layers", "collectives")
# cost constants added after the format was first written, and their term: a file without one predicts as it was fitted
ADDED = {"collective_seconds": "collectives"}


@dataclass(frozen=True)
class Calibration:
    """Cost constants and a coefficient per term; `predict(terms)` is the calibrated step time. `fitted`: the trials
    it was fitted to; `errors`: how well it predicts them (mean absolute percentage error before and after); `context`:
    what it was measured on (device, world size, torch, model)."""

    cost: CostModel
    coefficients: dict[str, float]
    fitted: int = 0
    errors: dict[str, float] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)

    def predict(self, terms: Mapping[str, float]) -> float:
        return sum(self.coefficients.get(name, 1.0) * value for name, value in terms.items())

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "cost": dataclasses.asdict(self.cost), "coefficients": self.coefficients,
                "fitted": self.fitted, "errors": self.errors, "context": self.context}

    def save(self, path: str | os.PathLike[str]) -> None:
        from ..atomic import write_atomic

        write_atomic(Path(path), (json.dumps(self.as_dict(), indent=2) + "\n").encode())


def load_calibration(path: str | os.PathLike[str]) -> Calibration:
    """A calibration file `strategy tune` wrote.

    Raises:
        ValueError: not such a file, naming the file and the key at fault.
    """
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a calibration file (its format must be {FORMAT!r}; `strategy tune` writes one)")
    names = {f.name for f in dataclasses.fields(CostModel)}
    cost = data.get("cost")
    coefficients = data.get("coefficients")
    if not isinstance(coefficients, dict):
        raise ValueError(f"{path}: coefficients: expected an object of term -> number")
    if isinstance(cost, dict) and set(cost) == names - set(ADDED):  # written before the terms ADDED: they count 0,
        cost = {**cost, **{k: getattr(CostModel(), k) for k in ADDED}}  # as in its fit
        coefficients = {**{term: 0.0 for term in ADDED.values()}, **coefficients}
    if not isinstance(cost, dict) or set(cost) != names:
        raise ValueError(f"{path}: cost: expected an object of {sorted(names)}, got {cost!r}")
    for name, value in coefficients.items():
        if name not in TERMS:
            raise ValueError(f"{path}: coefficients.{name}: no such term (the terms: {', '.join(TERMS)})")
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{path}: coefficients.{name}: expected a number >= 0, got {value!r}")
    return Calibration(CostModel(**cost), {k: float(v) for k, v in coefficients.items()}, int(data.get("fitted", 0)),
                       dict(data.get("errors", {})), dict(data.get("context", {})))


def fit(rows: Sequence[tuple[Mapping[str, float], float]], cost: CostModel, *, ridge: float = RIDGE,
        context: Mapping[str, Any] | None = None) -> Calibration:
    """The coefficients that best predict `rows` ((the terms of a trial's layout, its measured step seconds)), by
    least squares on the relative error with a ridge toward the prior (1 for `AS_MEASURED`, one common scale for the
    rest); coefficients >= 0."""
    import numpy as np

    if not rows:
        return Calibration(cost, dict.fromkeys(TERMS, 1.0), 0, {}, dict(context or {}))
    x = np.array([[terms.get(name, 0.0) for name in TERMS] for terms, _ in rows], dtype=float)
    y = np.array([seconds for _, seconds in rows], dtype=float)
    anchored = np.array([name in AS_MEASURED for name in TERMS])
    held = x[:, anchored].sum(axis=1)  # (their share at their own figures)
    rest = x[:, ~anchored].sum(axis=1)
    shown = rest > 0  # (a trial of the anchored terms alone says nothing of the scale)
    scale = float(np.median(np.maximum(y - held, 0.1 * y)[shown] / rest[shown])) if shown.any() else 1.0
    prior = np.where(anchored, 1.0, scale)
    a = x * prior / y[:, None]  # each term's share of the trial's time, at its prior
    free = np.ones(len(TERMS), dtype=bool)
    z = np.zeros(len(TERMS))
    for _ in range(len(TERMS)):  # active set: a coefficient that comes out negative is held at 0 (z = -1)
        fixed = ~free
        b = 1 - a @ np.where(fixed, 0.0, 1.0)  # the residual the free terms must explain
        cols = a[:, free]
        lhs = np.vstack([cols, math.sqrt(ridge) * np.eye(int(free.sum()))])
        rhs = np.concatenate([b, np.zeros(int(free.sum()))])
        z_free = np.linalg.lstsq(lhs, rhs, rcond=None)[0]
        z = np.full(len(TERMS), -1.0)
        z[free] = z_free
        negative = free & (z < -1)
        if not negative.any():
            break
        free &= ~negative
    coefficients = {name: float(max(0.0, prior[i] * (1 + z[i]))) for i, name in enumerate(TERMS)}
    calibration = Calibration(cost, coefficients, len(rows), {}, dict(context or {}))
    before = mape([sum(t.values()) for t, _ in rows], y.tolist())
    after = mape([calibration.predict(t) for t, _ in rows], y.tolist())
    at_prior = mape((x @ prior).tolist(), y.tolist())  # (the priors alone: no term fitted)
    return dataclasses.replace(calibration, errors={"mape_uncalibrated": before, "mape_prior": at_prior,
                                                    "mape_fitted": after, "common_scale": scale})


def mape(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """The mean absolute percentage error of `predicted` against `measured` (a fraction: 0.1 is 10%)."""
    return sum(abs(p - m) / m for p, m in zip(predicted, measured)) / max(1, len(measured))


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of `a` and `b` (ties ranked by their mean rank)."""
    def ranks(v: Sequence[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        out = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out

    ra, rb = ranks(a), ranks(b)
    n = len(a)
    if n < 2:
        return 1.0
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    sa = math.sqrt(sum((x - ma) ** 2 for x in ra))
    sb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (sa * sb) if sa and sb else 0.0
