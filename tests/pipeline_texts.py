"""Strategy texts for the pipeline tests: one setting a line, so each error has a line of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

import strategy
from strategy import StrategyError


def resolve(text: str, world_size: int, **kwargs) -> strategy.Resolved:
    return strategy.resolve(strategy.loads(text), world_size=world_size, **kwargs)


def pipe(pp: int = 2, *, steps: int | None = None, mode: str | None = None, virtual: int | None = None,
         dualpipev: bool = False, configs: tuple[str, ...] = (), pp_configs: tuple[str, ...] = ()) -> str:
    """A strategy at pp_degree `pp`, one line per setting (so errors have distinct lines); `configs` and `pp_configs`:
    more lines for pipeline_configs and pp_configs."""
    inner = [f"virtual_pp_degree: {virtual}"] * (virtual is not None) + ["use_dualpipev: true"] * dualpipev
    inner += list(pp_configs)
    outer = [f"accumulate_steps: {steps}"] * (steps is not None) + [f'schedule_mode: "{mode}"'] * (mode is not None)
    outer += list(configs)
    lines = ["hybrid_configs {", f"  pp_degree: {pp}"]
    lines += ["  pp_configs {", *(f"    {x}" for x in inner), "  }"] if inner else []
    lines += ["}"] + (["pipeline_configs {", *(f"  {x}" for x in outer), "}"] if outer else [])
    return "\n".join(lines) + "\n"


def error_of(write, text: str, world_size: int = 2) -> tuple[Path, StrategyError]:
    """The file written with `text`, and the error resolving it raises."""
    path = write("p.prototxt", text)
    with pytest.raises(StrategyError) as info:
        strategy.resolve(strategy.load(path), world_size=world_size)
    return path, info.value


DUALPIPEV_HINT = ('; set pipeline_configs.accumulate_steps: 4 or more, or pipeline_configs.schedule_mode: "ZBVPP" with '
                  "hybrid_configs.pp_configs.use_dualpipev off (the same V of stages, any count)")
