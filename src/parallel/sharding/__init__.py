"""ZeRO sharding (sharding_degree, sharding_configs.stage) on torch's FSDP2 over the mesh's sharding axis.

Builds on `topology`, `tensor` and `blocks`; `training` and `checkpoint` read what it marks.
"""

from .fsdp import apply_sharding

__all__ = ["apply_sharding"]
