"""The hybrid topology: ranks laid out row-major over the axes, outermost first, as Paddle's CommunicateTopology.

Pure arithmetic over any degrees (also those the runtime does not run yet); no schema, no torch.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .axis_order import complete_order

__all__ = ["Topology", "complete_order"]


@dataclass(frozen=True, slots=True)
class Topology:
    """Axes and their degrees, outermost first: a rank is the row-major index of its coordinates.

    So the ranks of a group of the last (innermost) axis are adjacent, and those of the first are the farthest
    apart. Paddle 3.3.1's `CommunicateTopology(hybrid_group_names=order, dims=degrees)` builds the same groups.

    Example::

        t = Topology.of({"dp": 2, "mp": 2}, ("dp", "mp"))
        t.groups("mp")      # [[0, 1], [2, 3]]
        t.coordinates(3)    # {"dp": 1, "mp": 1}
    """

    order: tuple[str, ...]
    dims: tuple[int, ...]

    def __post_init__(self) -> None:
        assert len(self.order) == len(self.dims) == len(set(self.order)), (self.order, self.dims)
        assert all(d >= 1 for d in self.dims), self.dims

    @classmethod
    def of(cls, degrees: Mapping[str, int], order: Sequence[str]) -> Topology:
        """The topology of `degrees` (axis name -> degree; an axis of `order` not in it has degree 1)."""
        return cls(tuple(order), tuple(degrees.get(axis, 1) for axis in order))

    @property
    def world_size(self) -> int:
        return math.prod(self.dims)

    @property
    def degrees(self) -> dict[str, int]:
        """Axis name -> degree, outermost first."""
        return dict(zip(self.order, self.dims))

    def groups(self, axis: str) -> list[list[int]]:
        """The ranks of each group along `axis`: one group for each position on the other axes, taken in
        row-major order (Paddle's `get_comm_list`); a degree-1 axis gives a group of one for every rank."""
        k = self.order.index(axis)
        strides = self._strides()
        others = [range(d) for i, d in enumerate(self.dims) if i != k]
        other_strides = [s for i, s in enumerate(strides) if i != k]
        along = [i * strides[k] for i in range(self.dims[k])]
        out = []
        for position in itertools.product(*others):
            base = sum(c * s for c, s in zip(position, other_strides))
            out.append([base + step for step in along])
        return out

    def coordinates(self, rank: int) -> dict[str, int]:
        """`rank`'s index on each axis, outermost first (Paddle's `get_coord`)."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} is outside 0..{self.world_size - 1}")
        out = {}
        for axis, stride in zip(self.order, self._strides()):
            out[axis], rank = divmod(rank, stride)
        return out

    def rank(self, coordinates: Mapping[str, int]) -> int:
        """The rank at these coordinates (an axis left out is at index 0); the inverse of `coordinates`."""
        unknown = set(coordinates) - set(self.order)
        if unknown:
            raise ValueError(f"unknown axes {sorted(unknown)}; the axes are {', '.join(self.order)}")
        rank = 0
        for axis, dim, stride in zip(self.order, self.dims, self._strides()):
            index = coordinates.get(axis, 0)
            if not 0 <= index < dim:
                raise ValueError(f"{axis} index {index} is outside 0..{dim - 1}")
            rank += index * stride
        return rank

    def _strides(self) -> list[int]:
        """How far apart two ranks are that differ by one on each axis (the innermost: 1)."""
        return [math.prod(self.dims[i + 1:]) for i in range(len(self.dims))]
