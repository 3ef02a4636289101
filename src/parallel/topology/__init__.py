"""Where each rank sits: the hybrid groups and mesh `init` builds, the agreement check, and guarded collectives.

Imports nothing else of `parallel`; every other subpackage builds on it.
"""

from .groups import AxisGroup, HybridGroup, communicator_options, current, destroy, init
from .guard import CollectiveError, guard

__all__ = ["AxisGroup", "CollectiveError", "HybridGroup", "communicator_options", "current", "destroy", "guard", "init"]
