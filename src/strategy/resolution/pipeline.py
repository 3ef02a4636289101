"""The pipeline a strategy runs: the torch.distributed.pipelining schedule, its stages, and enough micro-batches.

Paddle picks a schedule by name (pipeline_configs.schedule_mode) and chunk count; torch by class. The mapping is here
once, as data (`MODES`), read by resolution, its errors, and docs/pipelines.md's table (checked by a test).
"""

# Annotations stay evaluated (no `from __future__ import annotations`): a NamedTuple's string annotations are
# compiled at class creation, which every `strategy` command pays at start.

from collections.abc import Mapping
import functools
import itertools
from typing import Any, NamedTuple

from .. import schema
from .._generated.distributed_strategy_pb2 import DistributedStrategy
from .._generated.static_graph_pb2 import PipelineConfig
from ..notes import Kind, Note
from ..errors import Location, StrategyError, warn

__all__ = ["DUALPIPEV", "MODES", "Mode", "describe", "settings"]


class Mode(NamedTuple):
    """The torch schedule one schedule_mode runs."""

    single: str | None  # at virtual_pp_degree 1 (one chunk per rank); None: it needs two or more
    looped: str  # at virtual_pp_degree >= 2, stage s on pp rank s % pp_degree
    v: bool = False  # V-shaped: exactly two chunks per rank, pp rank r holding stages r and 2·pp − 1 − r


# Paddle's names (its auto-parallel pipeline passes: FThenB, 1F1B, Eager1F1B, VPP, ZBH1, ZBVPP; PaddleNLP's
# pipeline_schedule_mode) -> torch 2.13's classes. Paddle's Eager1F1B (1F1B with earlier forwards) has none.
MODES: dict[str, Mode] = {
    "1F1B": Mode("Schedule1F1B", "ScheduleInterleaved1F1B"),
    "FThenB": Mode("ScheduleGPipe", "ScheduleLoopedBFS"),
    "VPP": Mode(None, "ScheduleInterleaved1F1B"),
    "ZBH1": Mode("ScheduleInterleavedZeroBubble", "ScheduleInterleavedZeroBubble"),
    "ZBVPP": Mode("ScheduleZBVZeroBubble", "ScheduleZBVZeroBubble", v=True),
}
DUALPIPEV = Mode("ScheduleDualPipeV", "ScheduleDualPipeV", v=True)  # pp_configs.use_dualpipev, whatever the mode says

# What torch 2.13's constructors demand of n micro-batches over S stages (they raise otherwise; measured):
_ONE_PER_STAGE = frozenset({"Schedule1F1B", "ScheduleDualPipeV"})  # n >= S
_IN_ROUNDS = frozenset({"ScheduleInterleaved1F1B", "ScheduleInterleavedZeroBubble"})  # n % max(1, n // pp) == 0
# With fewer micro-batches than stages, 1F1B never reaches its steady state: the first stages' warm-up (min(pp - 1 -
# rank, n) forwards, as Paddle counts them) holds every micro-batch, so the bubble and the first stage's activations
# are GPipe's, which takes any count (later stages hold up to n micro-batches instead of about one). Paddle runs such a
# file; torch's Schedule1F1B refuses it. DualPipeV has no such reading (Paddle asserts accumulate_steps >= 2 * pp, as
# DeepSeek's DualPipeV does), so it stays an error.
FEW_MICRO_BATCHES = {"Schedule1F1B": "ScheduleGPipe"}


class _Plan(NamedTuple):
    """What the schema says of the pipeline: the degree that gates it, and the schedule a file that names none runs."""

    degree_path: str  # pipeline_configs' (active_when_parallel): "hybrid_configs.pp_degree"
    degree: str  # its last part, Resolved's field: "pp_degree"
    default_mode: str  # pipeline_configs.schedule_mode's default


# The paths errors and notes name, as a file spells them.
_MODE = "pipeline_configs.schedule_mode"
_PP_CONFIGS = "hybrid_configs.pp_configs"
_DUALPIPEV = f"{_PP_CONFIGS}.use_dualpipev"
_STEPS = "pipeline_configs.accumulate_steps"


@functools.cache
def _plan() -> _Plan:
    """The gate and the default, read from the descriptors."""
    degree = schema.option(schema.ROOT.fields_by_name["pipeline_configs"], "active_when_parallel")
    return _Plan(degree, degree.rsplit(".", 1)[-1], PipelineConfig.DESCRIPTOR.fields_by_name["schedule_mode"].default_value)


class _Context(NamedTuple):
    positions: Mapping[str, Location]
    source: str | None
    problems: list[StrategyError] | None  # None: raise the first

    def where(self, paths: tuple[str, ...]) -> Location:
        """The first of `paths` the file sets, else the source."""
        return next((self.positions[p] for p in paths if p in self.positions), Location(self.source))

    def fail(self, paths: tuple[str, ...], text: str) -> None:
        """An error at the first of `paths` the file sets (else at the source), raised or collected."""
        error = StrategyError.at(self.where(paths), text, field=paths[0])
        if self.problems is None:
            raise error
        self.problems.append(error)


def settings(s: DistributedStrategy, degrees: dict[str, int], pp_configs: dict[str, Any], positions: Mapping[str, Location],
             source: str | None, *, policy: str, notes: list[Note],
             problems: list[StrategyError] | None = None) -> dict[str, Any] | None:
    """The effective pipeline of `s` at these degrees, as PipelineSettings' fields (None: its defaults, while nothing
    pipelines); `pp_configs`: PpConfig's implemented fields after gating.
    With `problems`, what cannot run is appended there and resolved as near as it can be, instead of raised.

    Raises:
        StrategyError: a schedule torch lacks (under "warn": a warning, and "1F1B"), a chunk count the schedule cannot
            run, or too few micro-batches for it; each at its field's line, saying what would work.
    """
    plan = _plan()
    pp = degrees[plan.degree]
    if pp <= 1:
        return None
    configs = s.pipeline_configs
    context = _Context(positions, source, problems)
    mode, via = _mode(configs, pp_configs, context, policy, notes)
    mode, chunks = _chunks(mode, via, pp_configs["virtual_pp_degree"], context)
    schedule = mode.single if chunks == 1 or mode.v else mode.looped
    assert schedule is not None  # _chunks gives a mode without a one-chunk schedule two or more
    schedule = _fit_micro_batches(configs, schedule, via, pp, chunks, context, notes)
    return {"pp_degree": pp, "micro_batch_size": configs.micro_batch_size, "accumulate_steps": configs.accumulate_steps,
            "virtual_pp_degree": chunks, "schedule": schedule, "placement": "v" if mode.v else "loop",
            "shapes": _shapes(configs, pp_configs), "dp_comm_overlap": pp_configs["dp_comm_overlap"],
            "delay_scale_loss": pp_configs["delay_scale_loss"], "timer": pp_configs["enable_timer"],
            "profiling": pp_configs["profiling"]}


def _shapes(configs: PipelineConfig, pp_configs: dict[str, Any]) -> str:
    """How the stages follow batches whose shape changes (PipelineSettings.shapes)."""
    if pp_configs["clear_every_step_cache"]:
        return "every_step"
    if pp_configs["enable_dynamic_shape"] or not configs.p2p_cache_shape:
        return "per_shape"
    return "fixed"


def _mode(configs: PipelineConfig, pp_configs: dict[str, Any], context: _Context, policy: str,
          notes: list[Note]) -> tuple[Mode, str]:
    """The mode to run and the setting that chose it ('pipeline_configs.schedule_mode "1F1B"')."""
    plan = _plan()
    path = _MODE
    name = configs.schedule_mode
    if pp_configs["use_dualpipev"]:
        switch = _DUALPIPEV
        if configs.HasField("schedule_mode"):
            notes.append(Note(path, Kind.NO_EFFECT, f"{switch} runs {DUALPIPEV.single} (Paddle checks use_dualpipev "
                              "first too)", value=f'"{name}"'))
        return DUALPIPEV, f"{switch}: true"
    if name not in MODES:
        same = [m for m in MODES if m.lower() == name.lower()]  # Paddle's names are case-sensitive; torch's are not
        close = f"; did you mean '{same[0]}'?" if same else schema.did_you_mean(name, list(MODES))
        close = close if close.startswith("; did") else ""
        text = f'{path} "{name}" is not a schedule torch.distributed.pipelining runs; use {_choices()}{close}'
        if policy == "warn":
            warn(context.positions.get(path) or Location(context.source),
                 f'{text}; running "{plan.default_mode}" (policy \'warn\')', stacklevel=6)
        else:
            context.fail((path,), text)
        name = plan.default_mode
    return MODES[name], f'{path} "{name}"'


def _choices() -> str:
    """Every schedule_mode with what it runs, and the DualPipeV switch (for the error naming an unknown one)."""
    modes = ", ".join(f'"{name}" ({describe(mode)})' for name, mode in MODES.items())
    return f"{modes}, or {_DUALPIPEV}: true ({describe(DUALPIPEV)})"


def describe(mode: Mode) -> str:
    """What a mode runs, in words: "Schedule1F1B; ScheduleInterleaved1F1B at virtual_pp_degree >= 2"."""
    if mode.v:
        return f"{mode.single}, two chunks per rank in a V"
    if mode.single is None:
        return f"{mode.looped}, virtual_pp_degree >= 2"
    if mode.single == mode.looped:
        return mode.single
    return f"{mode.single}; {mode.looped} at virtual_pp_degree >= 2"


def _chunks(mode: Mode, via: str, virtual: int, context: _Context) -> tuple[Mode, int]:
    """Model chunks per pp rank: virtual_pp_degree, or two for a V; an error where the schedule cannot run it."""
    plan = _plan()
    path, mode_path = f"{_PP_CONFIGS}.virtual_pp_degree", _MODE
    if mode.v:
        if virtual > 2:
            context.fail((path,), f"{path} = {virtual} does not fit {mode.single} ({via}), which runs exactly two "
                                  "chunks per rank in a V; set virtual_pp_degree: 2, or leave it at 1")
        return mode, 2
    if mode.single is None and virtual < 2:
        context.fail((mode_path,), f"{via} runs {mode.looped}, which needs at least two model chunks per rank, but "
                                   f'{path} is {virtual}; set virtual_pp_degree: 2 (or more), or schedule_mode: '
                                   f'"{plan.default_mode}"')
        return MODES[plan.default_mode], virtual
    return mode, virtual


def _fit_micro_batches(configs: PipelineConfig, schedule: str, via: str, pp: int, chunks: int, context: _Context,
                       notes: list[Note]) -> str:
    """The schedule that runs this many micro-batches: `schedule`, or for too few its equivalent that takes them
    (`FEW_MICRO_BATCHES`, with a located warning and a note saying what the bubble costs). Too few where nothing
    equivalent runs them, or a count the rounds do not divide: an error naming what works."""
    plan = _plan()
    path = _STEPS
    n, stages = configs.accumulate_steps, pp * chunks
    given = f"{path} = {n}" + ("" if configs.HasField("accumulate_steps") else " (its default)")
    at = f"{schedule} ({via}) at {plan.degree_path} {pp}"
    if schedule in _ONE_PER_STAGE and n < stages:
        if schedule in FEW_MICRO_BATCHES:
            instead = FEW_MICRO_BATCHES[schedule]
            text = (f"{given} is fewer micro-batches than the {stages} stages of {at}, so it runs as {instead} (every "
                    "forward, then every backward), whose bubble is the one 1F1B has with so few: (pp_degree - 1) / "
                    f"(accumulate_steps + pp_degree - 1) = {_bubble(n, pp)} of each step, the stages waiting on each "
                    f"other; set {path}: {stages} or more to run 1F1B (at {4 * stages}: {_bubble(4 * stages, pp)})")
            notes.append(Note(path, Kind.INFO, "fewer micro-batches than stages", text=text))
            if context.problems is None:  # explain shows the note; resolve and validate warn
                warn(context.where((path, plan.degree_path)), text, stacklevel=6)
            return instead
        per = f" ({chunks} chunks per rank × pp_degree {pp})" if chunks > 1 else ""
        zbv = next(name for name, m in MODES.items() if m.v)  # the same V of stages, run for any count
        other = (f', or {_MODE}: "{zbv}" with {_DUALPIPEV} off (the same V of '
                 "stages, any count)") if schedule == DUALPIPEV.single else ""
        context.fail((path, plan.degree_path), f"{given} is too few micro-batches for {at}: it needs one per stage, "
                                               f"at least {stages}{per}; set {path}: {stages} or more{other}")
    elif schedule in _IN_ROUNDS and not _fits_rounds(n, pp):
        below = max(k for k in range(1, n) if _fits_rounds(k, pp))
        above = next(k for k in itertools.count(n + 1) if _fits_rounds(k, pp))
        context.fail((path, plan.degree_path), f"{given} does not suit {at}: it runs the micro-batches in max(1, {n} "
                                               f"// {pp}) = {n // pp} rounds, and {n} is not a multiple of {n // pp}; "
                                               f"set {path}: {below} or {above}")
    return schedule


def _bubble(n: int, pp: int) -> str:
    """The idle share of a GPipe or 1F1B step of n micro-batches over pp stages: "3/4 = 75%"."""
    return f"{pp - 1}/{n + pp - 1} = {(pp - 1) / (n + pp - 1):.0%}"


def _fits_rounds(n: int, pp: int) -> bool:
    return n % max(1, n // pp) == 0
