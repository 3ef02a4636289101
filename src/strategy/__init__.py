"""Typed, checked distributed-training strategies: load, validate, convert and resolve strategy files.

Never imports torch; `parallel` builds on the names exported here. Each name is imported on first use, so
`import strategy` stays cheap however large the schema grows, and a command loads only what it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the lazy names below are, for type checkers and editors
    from ._generated.distributed_strategy_pb2 import DistributedStrategy
    from ._generated.hybrid_parallel_pb2 import HybridConfig, MpConfig
    from .errors import StrategyError, StrategyWarning
    from .resolution.explain import Explanation, explain, explanation
    from .formats.codec import EXTENSIONS, FORMATS
    from .importers import Imported, import_config
    from .formats.io import dump, dumps, from_dict, load, loads, to_dict
    from .planning.estimate import MemoryEstimate, estimate_memory
    from .planning.search import Candidate, CostModel, Plan, plan
    from .planning.calibration import Calibration, load_calibration
    from .tuning import Trial, TuneResult, tune
    from .resolution.memory import ModelStateBytes, ModelStateMemory
    from .resolution.resolver import TP_STYLES, resolve
    from .resolution.resolved import Resolved
    from .resolution.settings import (AmpSettings, CheckpointSettings, DpBucketSettings, GradientMergeSettings,
                                      MetricsSettings, MpSettings, PipelineSettings, RecomputeSettings, ShardingSettings)
    from .resolution.topology import Topology

# Public name -> the submodule that defines it.
_WHERE = {
    "DistributedStrategy": "._generated.distributed_strategy_pb2",
    "HybridConfig": "._generated.hybrid_parallel_pb2",
    "MpConfig": "._generated.hybrid_parallel_pb2",
    "StrategyError": ".errors",
    "StrategyWarning": ".errors",
    "Explanation": ".resolution.explain",
    "explain": ".resolution.explain",
    "explanation": ".resolution.explain",
    "EXTENSIONS": ".formats.codec",
    "FORMATS": ".formats.codec",
    "Imported": ".importers",
    "import_config": ".importers",
    "dump": ".formats.io",
    "dumps": ".formats.io",
    "from_dict": ".formats.io",
    "load": ".formats.io",
    "loads": ".formats.io",
    "to_dict": ".formats.io",
    "MemoryEstimate": ".planning.estimate",
    "Candidate": ".planning.search",
    "CostModel": ".planning.search",
    "Plan": ".planning.search",
    "plan": ".planning.search",
    "Calibration": ".planning.calibration",
    "load_calibration": ".planning.calibration",
    "Trial": ".tuning",
    "TuneResult": ".tuning",
    "tune": ".tuning",
    "estimate_memory": ".planning.estimate",
    "ModelStateBytes": ".resolution.memory",
    "ModelStateMemory": ".resolution.memory",
    "TP_STYLES": ".resolution.resolver",
    "Resolved": ".resolution.resolved",
    "resolve": ".resolution.resolver",
    "AmpSettings": ".resolution.settings",
    "CheckpointSettings": ".resolution.settings",
    "MetricsSettings": ".resolution.settings",
    "DpBucketSettings": ".resolution.settings",
    "GradientMergeSettings": ".resolution.settings",
    "MpSettings": ".resolution.settings",
    "PipelineSettings": ".resolution.settings",
    "RecomputeSettings": ".resolution.settings",
    "ShardingSettings": ".resolution.settings",
    "Topology": ".resolution.topology",
}

__all__ = [
    "AmpSettings",
    "Candidate",
    "CheckpointSettings",
    "MetricsSettings",
    "CostModel",
    "DpBucketSettings",
    "GradientMergeSettings",
    "RecomputeSettings",
    "EXTENSIONS",
    "FORMATS",
    "DistributedStrategy",
    "Explanation",
    "HybridConfig",
    "Imported",
    "MemoryEstimate",
    "Plan",
    "ModelStateBytes",
    "ModelStateMemory",
    "MpConfig",
    "MpSettings",
    "PipelineSettings",
    "Resolved",
    "ShardingSettings",
    "StrategyError",
    "StrategyWarning",
    "TP_STYLES",
    "Topology",
    "dump",
    "dumps",
    "explain",
    "estimate_memory",
    "plan",
    "tune",
    "Calibration",
    "load_calibration",
    "Trial",
    "TuneResult",
    "explanation",
    "import_config",
    "from_dict",
    "load",
    "loads",
    "resolve",
    "to_dict",
]
assert sorted(__all__) == sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """A public name, or a submodule (`strategy.schema`), imported on first use and kept."""
    where = _WHERE.get(name)
    if where is not None:
        value = getattr(importlib.import_module(where, __name__), name)
    elif name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
