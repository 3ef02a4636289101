"""The base of the parallel layers: where a layer gets its group and settings from (injected, never global)."""

from __future__ import annotations

from torch import nn

from strategy import MpSettings

from ..topology.groups import HybridGroup, current

__all__ = ["MpModule"]

INITS = ("full", "shard", "empty")  # "empty": uninitialised shards, for weights that are copied in next


class MpModule(nn.Module):
    """Binds a layer to a hybrid group: `hcg` when given, else `parallel.current()`, read once here."""

    def __init__(self, hcg: HybridGroup | None, init: str | None = None) -> None:
        super().__init__()
        if init is not None and init not in INITS:
            raise ValueError(f"init must be one of {', '.join(map(repr, INITS))}, got {init!r}")
        hcg = hcg or current()
        self.group, self.mp_rank, self.mp_size = hcg.mp_group, hcg.mp_rank, hcg.mp_size
        self.settings: MpSettings = hcg.resolved.mp
