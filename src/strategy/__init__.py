"""Typed, checked distributed-training strategies: load, validate, convert and resolve strategy files.

Never imports torch; `parallel` builds on the names exported here.
"""

from ._generated.distributed_strategy_pb2 import DistributedStrategy
from ._generated.hybrid_parallel_pb2 import HybridConfig, MpConfig
from .errors import StrategyError, StrategyWarning
from .explain import explain
from .formats import EXTENSIONS, FORMATS
from .importers import Imported, import_config
from .io import dump, dumps, from_dict, load, loads, to_dict
from .memory import ModelStateBytes, ModelStateMemory
from .resolution import TP_STYLES, Resolved, resolve
from .settings import (AmpSettings, GradientMergeSettings, MpSettings, PipelineSettings, RecomputeSettings,
                       ShardingSettings)
from .topology import Topology

__all__ = [
    "AmpSettings",
    "GradientMergeSettings",
    "RecomputeSettings",
    "EXTENSIONS",
    "FORMATS",
    "DistributedStrategy",
    "HybridConfig",
    "Imported",
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
    "import_config",
    "from_dict",
    "load",
    "loads",
    "resolve",
    "to_dict",
]
