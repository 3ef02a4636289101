"""Seeing a run: `Meter` times each step and its phases per rank and logs step time, tokens/s, TFLOP/s and MFU,
memory and stragglers at the strategy's interval (metrics_configs); `Profiler` traces a few steps with torch.profiler;
`plot_metrics` draws a run's metrics.png."""

from .flops import flops_per_token
from .meter import PHASES, Meter, line
from .plot import plot_metrics, read_records
from .profiler import Profiler

__all__ = ["Meter", "PHASES", "Profiler", "flops_per_token", "line", "plot_metrics", "read_records"]
