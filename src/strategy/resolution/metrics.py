"""metrics_configs: what `parallel.Meter` measures and logs, checked before a run starts (a negative peak or
threshold is an error at its field's line)."""

# Annotations stay evaluated (no `from __future__ import annotations`): see layout.py.

import math
from collections.abc import Mapping

from .._generated.distributed_strategy_pb2 import DistributedStrategy
from ..errors import Location, StrategyError
from .settings import MetricsSettings

__all__ = ["settings"]

FIELD = "metrics_configs"


def settings(s: DistributedStrategy, positions: Mapping[str, Location], source: str | None) -> MetricsSettings:
    """The effective metrics settings of `s` (its metrics_configs is set).

    Raises:
        StrategyError: a peak_flops or straggler_threshold that is negative or not finite, located at the field.
    """
    c = getattr(s, FIELD)
    for name, what in (("peak_flops", "FLOP/s of one device (0: the device's own, where known)"),
                       ("straggler_threshold", "a fraction of the median busy time (0.25: 25% above it)")):
        value = getattr(c, name)
        if not math.isfinite(value) or value < 0:
            path = f"{FIELD}.{name}"
            raise StrategyError.at(positions.get(path) or positions.get(FIELD) or Location(source),
                                   f"{path} is {value}; it must be a finite number >= 0: {what}", field=path)
    return MetricsSettings(log_interval=c.log_interval, dir=c.dir, tensorboard=c.tensorboard,
                           peak_flops=float(c.peak_flops), straggler_threshold=float(c.straggler_threshold))
