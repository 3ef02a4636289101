"""How a partial axis order is completed: its own module so that both the topology and the layout use it without
one importing the other (the layout is read per resolve; the topology is a dataclass it builds only for explain)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["complete_order"]


def complete_order(listed: Sequence[str], default: Sequence[str]) -> tuple[str, ...]:
    """Every axis of `default`, with the `listed` ones in their listed order.

    The listed axes take the default places of the listed axes, in the listed order; the others keep their own
    place. So PaddleNLP's five-name "sharding_first" ["dp", "sharding", "pp", "sep", "mp"] becomes dp, sharding,
    pp, sep, cp, mp. Where a left-out axis goes does not change any group while its degree is 1.
    """
    chosen = iter(listed)
    wanted = set(listed)
    assert wanted <= set(default) and len(wanted) == len(listed), (listed, default)
    return tuple(next(chosen) if axis in wanted else axis for axis in default)
