"""`strategy tune`: the plan checked by trial runs, its time model calibrated, the best layout measured."""

from .tuner import Trial, TuneResult, tune

__all__ = ["Trial", "TuneResult", "tune"]
