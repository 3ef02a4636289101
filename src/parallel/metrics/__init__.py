"""Seeing a run: `Meter` times each step and its phases per rank and logs step time, tokens/s, TFLOP/s and MFU,
memory and stragglers at the strategy's interval (metrics_configs)."""

from .flops import flops_per_token
from .meter import PHASES, Meter

__all__ = ["Meter", "PHASES", "flops_per_token"]
