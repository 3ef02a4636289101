"""`strategy.tune`: the plan checked by short trial runs on the machines it is for, its time model calibrated from
them, the rest re-ranked, until no layout left can beat the best measured (or the budget is spent).

1. The device probe runs under the launcher (`parallel.tune.probe`): this machine's matmul FLOP/s, all-reduce
   bandwidth and latency, memory bandwidth and per-call cost become the cost model's constants, its memory the budget.
2. `plan` lists every layout that fits in memory, each with its predicted step time by term.
3. The shortlist: the `top` fastest predicted, and the fastest of each family (the axes above 1, and the sharding
   stage), so that a bias of the model against one axis cannot hide a family.
4. Each trial (`parallel.tune.trial` under the launcher, or the user's command) runs warm-up steps, then timed steps
   until the median is stable; ok / oom / timeout / error / cut (a step slower than `cut` times the best so far).
5. After each trial the model's terms are fitted to every measured step (`planning.calibration.fit`) and every
   layout re-ranked. After the shortlist, the fastest predicted unmeasured layout runs next, while its prediction,
   less the fit's largest error on the trials so far, beats the best measured.
Each trial is appended to history.jsonl when it starts and ends; a rerun reuses what ended and retries once what was
interrupted.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..planning.calibration import Calibration, fit, mape
from ..planning.search import Candidate, CostModel, plan
from . import launch
from .history import History, context_key, trial_key

__all__ = ["Trial", "TuneResult", "tune", "family"]

# How the history's step times compare: a history written before they were corrected to the probe's speed counts as
# another context (its times are not comparable with the corrected ones).
TIMING = "at the probe's speed"
# The reference workload is itself a noisy measure of the machine's speed, so three quarters of its correction, in
# ratio, is applied: the runs of a layout spread least so, or about as little as at the best weight, on each of five
# recordings (bench/trial_steps.py --truths: the pooled σ of a layout's runs as measured / ½ / ¾ / fully corrected,
# on Qwen3-MoE's ground truth 12.1 / 7.7 / 8.0 / 10.1%, two Llama ones 16.1 / 9.4 / 7.9 / 8.9% and 16.3 / 7.7 / 5.1 /
# 6.2%; and two Llama layouts 8-10% apart in two recordings of eight runs of 20 steps each, in the wrong order
# 22 / 8 / 0 / 6% and 25 / 20 / 8 / 2% of pairs of runs: this VM's speed switches between states 1.8× apart).
SPEED_WEIGHT = 0.75
NEIGHBOURS_AFTER = 2  # the best's neighbours are searched once this many layouts are measured
# Measured layouts this close to the best are measured again, up to CONFIRM_RUNS times each, with the trials of the
# budget kept for it (a third of a budget above 6, at most CONFIRM_RESERVE). Chosen by replaying the policy against the
# recorded ground truths (bench/tune_replay.py, 100 replays each, choices within 5% of the best;
# bench/results/tune_replay.md): Qwen3-MoE 87% with 2 kept, 95% with 3; the examples' Llama 100% with either; 20%
# and 30% alike on both (30%: contenders the machine's noise, 11-12% on this VM, can reorder).
CONFIRM_WITHIN = 0.30
CONFIRM_RUNS = 3
CONFIRM_RESERVE = 3
# The device probe's limit, whatever the trials' is: it runs a fixed set of measurements (8 s on this VM, one rank),
# and a short trial_timeout, meant to end hung trials soon, ended it on a loaded CI machine before it had started.
PROBE_TIMEOUT = 300.0


@dataclass
class Trial:
    """One candidate, and what its trial measured (`status` "" while unmeasured)."""

    candidate: Candidate
    key: str
    family: str
    number: int = 0
    status: str = ""
    step_seconds: float | None = None
    memory_bytes: float | None = None
    estimate_bytes: float | None = None  # estimate_memory's figure for what the trial measured (see trial.json)
    predicted: float = 0.0  # the prediction of the latest fit (the plan's before any trial)
    uncalibrated: float = 0.0  # the plan's, with the probed constants
    chosen_at: float = 0.0  # the prediction when it was chosen: fitted on the trials before it only
    wall_seconds: float = 0.0
    error: str = ""
    reused: bool = False  # from the history of an earlier run
    samples: list[float] = field(default_factory=list)  # each ok run's step seconds (step_seconds: their median)
    speed: float = 1.0  # the first run's correction to the probe's speed (`corrected`): its step seconds × this

    @property
    def measured(self) -> bool:
        return self.status in ("ok", "cut") and self.step_seconds is not None

    def describe(self) -> str:
        c = self.candidate
        stage = f" stage {c.stage}" if c.degrees["sharding"] > 1 else ""
        return (f"{self.family}{stage}, micro-batch {c.micro_batch_size}×{c.accumulate_steps}, recompute "
                f"{'on' if c.recompute else 'off'}")


@dataclass
class TuneResult:
    """The trials in the order they ran (reused ones included), the best, the calibration, the table, the files
    written and why the tune stopped."""

    trials: list[Trial]
    best: Trial | None
    calibration: Calibration
    table: str
    stopped: str
    out: Path
    voided: dict[str, str] = field(default_factory=dict)
    candidates: list[Trial] = field(default_factory=list)  # every layout that fits, with its final prediction


def family(c: Candidate) -> str:
    """The axes above 1 with their degrees ("dp2×mp2"; "single" when none is): what a layout is made of."""
    axes = [a for a in ("dp", "mp", "pp", "sharding", "sep", "cp", "ep") if c.degrees[a] > 1]
    return "×".join(f"{a}{c.degrees[a]}" for a in axes) or "single"


def tune(model: str | os.PathLike[str], *, world_size: int, seq_len: int, global_batch: int,
         out: str | os.PathLike[str], max_trials: int = 12, budget_seconds: float | None = None, top: int = 3,
         trial_timeout: float = 300.0, launcher: Sequence[str] | str | None = None, command: str | None = None,
         gpus_per_node: int | None = None, warmup: int = 2, max_steps: int = 20, tolerance: float = 0.03,
         cut: float = 2.0, headroom: float = 0.1, env: Mapping[str, str] | None = None,
         progress: Callable[[str], None] | None = print, bar: bool | None = None) -> TuneResult:
    """Tune the strategy of `model` (a small model's type, "llama", "qwen3_moe", ...; a Hugging Face directory holding
    config.json; or a config.json) on `world_size` ranks, `global_batch` sequences of `seq_len` tokens a step.

    Args:
        out: the tune's directory: history.jsonl, the probe, each trial's files and log, tune.md (the table),
            best.prototxt and calibration.json. A rerun into the same directory goes on from its history.
        max_trials: trials to run at most (those reused from the history count too).
        budget_seconds: wall-clock seconds to spend at most (a trial is not started past it).
        top: the fastest predicted layouts on the shortlist, beside the best of each family.
        trial_timeout: seconds a trial may take before its whole process tree is ended ("timeout"); the device
            probe has at least PROBE_TIMEOUT.
        launcher: the command that starts the ranks, before `-m parallel.tune.trial ...` (a list, or a string split
            as a shell would); default `python -m torch.distributed.run --standalone --nproc-per-node=N`. For
            several nodes, torchrun's rendezvous arguments.
        command: instead of the built-in trial runner, a user's training command; "{strategy}", "{out}" and
            "{trial}" are replaced by the candidate's file, the trial's directory and its number. The script reads
            --strategy and reports through `parallel.Meter` (metrics_rank0.jsonl under {out}).
        cut: a trial's step slower than this times the best measured step ends it as "cut".
        env: the environment of the trials (default: this process's).
        progress: called with each line of progress (None: silent); `bar` shows an overall bar (default: on a TTY).

    Raises:
        ValueError: arguments that cannot describe a tune, or a probe that failed (its log named).
    """
    _check_arguments(world_size=world_size, seq_len=seq_len, global_batch=global_batch, max_trials=max_trials,
                     top=top, max_steps=max_steps, cut=cut)
    started = time.monotonic()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda line: None)
    prefix = shlex.split(launcher) if isinstance(launcher, str) else list(launcher or launch.default_launcher(world_size))
    runner = _Runner(prefix, command, dict(os.environ if env is None else env), out, out / "probe" / "config.json",
                     seq_len, global_batch, trial_timeout, warmup, max_steps, tolerance, cut)
    probe = _probe(model, seq_len, out / "probe", prefix, runner.env, max(trial_timeout, PROBE_TIMEOUT), say)
    runner = replace(runner, reference=probe.get("reference_seconds"))
    history, trials, cost = _layouts(probe, runner, world_size=world_size, gpus_per_node=gpus_per_node,
                                     headroom=headroom, say=say)
    shortlist = _shortlist(trials, top)
    say(f"tune: {len(trials)} layouts fit ({probe['device']}, {world_size} ranks); shortlist of {len(shortlist)}: "
        f"the {top} fastest predicted and the fastest of each family ({', '.join(sorted({t.family for t in shortlist}))})")
    state = _State(trials, cost, history.context)
    show = _Bar(max_trials, sys.stderr.isatty() if bar is None else bar)
    try:
        ran = _resume(trials, history, state, show, say, runner.reference)
        ran, stopped = _loop(shortlist, state, history, runner, show, say, max_trials=max_trials, ran=ran,
                             deadline=None if budget_seconds is None else started + budget_seconds)
    finally:
        show.close()
    result = TuneResult(ran, state.best(), state.calibration, "", stopped, out, dict(history.voided),
                        sorted(trials, key=lambda t: t.predicted))
    result.table = table(result)
    _write_outputs(result, world_size, seq_len, say)
    return result


def _layouts(probe: Mapping[str, Any], runner: _Runner, *, world_size: int, gpus_per_node: int | None,
             headroom: float, say: Callable[[str], None]) -> tuple[History, list[Trial], CostModel]:
    """The history of this context, every layout the plan fits (fastest predicted first) and the probed cost model."""
    seq_len, global_batch, command = runner.seq_len, runner.global_batch, runner.command
    config = json.loads(runner.model.read_text())
    context = {"model": f"{config.get('model_type', '?')}:{context_key(config)[:16]}", "seq_len": seq_len,
               "global_batch": global_batch, "world_size": world_size, "device": probe["device"],
               "torch": probe["torch"], "timing": TIMING}
    if command:
        context["runner"] = command
    history = History.open(runner.out / "history.jsonl", context)
    if history.voided:
        say(f"history: {len(history.voided)} entries of another context left out "
            f"({'; '.join(sorted(set(history.voided.values())))})")
    cost = cost_model(probe)
    found = plan(str(runner.model), gpus=world_size, gpu_memory=probe["memory_bytes"], seq_len=seq_len,
                 global_batch=global_batch, gpus_per_node=gpus_per_node or world_size, top=10 ** 6, headroom=headroom,
                 cost=cost)
    if not found.candidates:
        raise ValueError(f"nothing to tune: {found.message}")
    trials = [Trial(c, trial_key(c.text, context), family(c), predicted=c.step_seconds, uncalibrated=c.step_seconds)
              for c in found.candidates]
    return history, trials, cost


def _check_arguments(*, cut: float, **counts: int) -> None:
    for name, value in counts.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive whole number, got {value!r}")
    if not cut > 1:
        raise ValueError(f"cut must be above 1 (a multiple of the best step), got {cut!r}")


@dataclass(frozen=True)
class _Runner:
    """How each trial runs: the launcher (or the user's command), the environment, the tune's directory, the model's
    config.json, the batch, and the trial runner's limits."""

    prefix: list[str]
    command: str | None
    env: dict[str, str]
    out: Path
    model: Path
    seq_len: int
    global_batch: int
    timeout: float
    warmup: int
    max_steps: int
    tolerance: float
    cut: float
    reference: float | None = None  # the probe's reference workload seconds: the speed trials are corrected to


def corrected(result: Mapping[str, Any], reference: float | None, *, weight: float | None = None) -> float | None:
    """A trial's step seconds at the probe's speed: the measured step × (the probe's reference workload seconds /
    the trial's, run after each of its steps) ** `weight` (SPEED_WEIGHT). A machine's drift over a tune then reorders
    the layouts less. As measured when either is unknown (a user's own command does not run the reference)."""
    seconds, mine = result.get("step_seconds"), result.get("reference_seconds")
    if seconds is None or not reference or not mine:
        return seconds
    return float(seconds) * (reference / float(mine)) ** (SPEED_WEIGHT if weight is None else weight)


def _resume(trials: list[Trial], history: History, state: "_State", show: "_Bar", say: Callable[[str], None],
            reference: float | None) -> list[Trial]:
    """The trials an earlier run of this tune finished (in their order), taken as measured; the fit made on them."""
    done = sorted((t for t in trials if history.finished(t.key)), key=lambda t: history.entries[t.key].trial)
    for k, t in enumerate(done, 1):
        t.number = k
        for result in history.results(t.key):
            _fill(t, result, reference)
        t.reused = True
    if done:
        state.refit()
        for t in done:
            say(show.line(t))
        show.update(history.runs, state)
    return done


def _loop(shortlist: list[Trial], state: "_State", history: History, runner: _Runner, show: "_Bar",
          say: Callable[[str], None], *, max_trials: int, deadline: float | None,
          ran: list[Trial]) -> tuple[list[Trial], str]:
    """Trials until the budget is spent or no layout left can beat the best, then the close contenders measured again
    (`_after_search`: the neighbours of a best a repeat put first, else `_confirm`): (the trials run, why it
    stopped). A trial an earlier run was killed during goes first (once more: `_measure` gives up on one interrupted
    twice). Every run counts against `max_trials`, repeats and the history's included."""
    ran = list(ran)
    searching = max_trials - (min(CONFIRM_RESERVE, max_trials // 3) if max_trials > 6 else 0)
    stopped = f"the trial budget ({max_trials}) is spent"

    def run(t: Trial, repeat: bool) -> None:
        number = history.runs + 1
        if not repeat:
            t.number = number
            ran.append(t)
        result = _measure(t, history, runner, state, number=number if repeat else None)
        state.refit()
        say(show.line(t, number=number, result=result) if repeat else show.line(t))
        show.update(history.runs, state)

    while True:
        if history.runs >= searching:
            break
        if deadline is not None and time.monotonic() >= deadline:
            return ran, "the time budget is spent"
        retry = [t for t in state.trials if not t.status and history.interrupted(t.key)]
        nxt, why_stop = (retry[0], "") if retry else state.next([t for t in shortlist if not t.status])
        if nxt is None:
            stopped = why_stop
            break
        run(nxt, False)
    searched = state.best()
    while history.runs < max_trials and (deadline is None or time.monotonic() < deadline):
        nxt, repeat = _after_search(state, searched)
        if nxt is None:
            break
        run(nxt, repeat)
    best = state.best()
    if best is not None and len(best.samples) > 1:
        stopped += f"; the best measured {len(best.samples)} times"
    return ran, stopped


def _after_search(state: "_State", searched: Trial | None) -> tuple[Trial | None, bool]:
    """What runs once the search is over, and whether it is a repeat: when a repeat has put first another layout than
    `searched` (the best when the search ended, whose neighbours it looked at), that layout's unmeasured micro-batch
    neighbours; else a close contender again (`_confirm`)."""
    best = state.best()
    near = state.neighbours(best) if best is not None and best is not searched else []
    if near:
        return min(near, key=lambda t: t.predicted), False
    return _confirm(state), True


def _confirm(state: "_State") -> Trial | None:
    """The measured layout to run again: of those within `CONFIRM_WITHIN` of the best (by the median of their runs),
    the one measured fewest times, below `CONFIRM_RUNS`; None when every contender has its runs."""
    best = state.best()
    if best is None or best.step_seconds is None:
        return None
    close = [t for t in state.trials if t.status == "ok" and t.step_seconds is not None
             and t.step_seconds <= best.step_seconds * (1 + CONFIRM_WITHIN)]
    if len(close) < 2:
        return None  # no contender: the best stands alone
    return min((t for t in close if len(t.samples) < CONFIRM_RUNS), key=lambda t: (len(t.samples), t.step_seconds),
               default=None)


def cost_model(probe: Mapping[str, Any]) -> CostModel:
    """The cost constants of the probed machine: its matmul FLOP/s at full use (utilisation 1: the fit scales it),
    its all-reduce bandwidth within and across nodes (one figure: the probe ran where the trials run), a collective's
    latency (the H100's default with one rank, or a probe that predates it), its memory bandwidth and per-call cost."""
    bandwidth = probe.get("bandwidth") or 1e9  # (one rank: no communication to measure, none to predict)
    calls = float(probe["layer_seconds"])
    return CostModel(peak_flops=float(probe["matmul_flops"]), utilisation=1.0, intra_node_bandwidth=float(bandwidth),
                     inter_node_bandwidth=float(bandwidth), memory_bandwidth=float(probe["memory_bandwidth"]),
                     layer_seconds=calls, step_seconds=calls,  # (a step's fixed cost: a call's worth, until fitted)
                     collective_seconds=float(probe.get("collective_seconds") or CostModel().collective_seconds))


def _probe(model: str | os.PathLike[str], seq_len: int, folder: Path, prefix: list[str], env: dict[str, str],
           timeout: float, say: Callable[[str], None]) -> dict[str, Any]:
    """The device probe's figures, measured now (they are the context the history is keyed by)."""
    say("tune: probing the device (matmul, all-reduce, a collective's latency, memory bandwidth, a layer's call)")
    command = [*prefix, "-m", "parallel.tune.probe", "--model", str(Path(model).resolve()) if Path(model).exists()
               else str(model), "--seq-len", str(seq_len), "--out", str(folder.resolve())]
    outcome = launch.run(command, cwd=folder, log=folder / "probe.log", timeout=timeout, env=env)
    found = folder / "probe.json"
    if outcome.returncode != 0 or not found.exists():
        raise ValueError(f"the device probe failed ({outcome.status}: {outcome.error.strip()[-600:]}); its log: "
                         f"{folder / 'probe.log'}")
    probe = json.loads(found.read_text())
    say(f"tune: {probe['device']}: matmul {probe['matmul_flops'] / 1e12:.2f} TFLOP/s a rank, all-reduce "
        f"{(probe.get('bandwidth') or 0) / 1e9:.2f} GB/s, a collective "
        f"{(probe.get('collective_seconds') or 0) * 1e3:.2f} ms, memory {probe['memory_bandwidth'] / 1e9:.1f} GB/s, "
        f"a layer's call {probe['layer_seconds'] * 1e3:.2f} ms, {probe['memory_bytes'] / 2 ** 30:.1f} GiB a rank")
    return probe


def _shortlist(trials: list[Trial], top: int) -> list[Trial]:
    """The `top` fastest predicted, and the fastest predicted of each family (fastest first)."""
    chosen = {id(t): t for t in trials[:top]}
    seen: set[str] = set()
    for t in trials:  # (fastest first)
        name = t.family + (f"/stage{t.candidate.stage}" if t.candidate.degrees["sharding"] > 1 else "")
        if name not in seen:
            seen.add(name)
            chosen.setdefault(id(t), t)
    return sorted(chosen.values(), key=lambda t: t.predicted)


class _State:
    """The trials measured so far, the calibration fitted to them and every layout's prediction under it."""

    def __init__(self, trials: list[Trial], cost: CostModel, context: dict[str, Any]) -> None:
        self.trials, self.cost, self.context = trials, cost, context
        self.calibration = fit([], cost, context=context)
        self.error = 1.0  # the fit's largest relative error on the measured trials (1: nothing known yet)

    def measured(self) -> list[Trial]:
        return [t for t in self.trials if t.measured]

    def neighbours(self, best: Trial) -> list[Trial]:
        """The unmeasured layouts of `best`'s degrees, stage and recompute at half and twice its micro-batch: the
        one dimension the time model cannot rank (its calls' term favours the largest micro-batch; on the
        Qwen3-MoE ground truth the smallest are fastest), searched around the best."""
        c = best.candidate
        return [t for t in self.trials if not t.status and t.candidate.degrees == c.degrees
                and t.candidate.stage == c.stage and t.candidate.recompute == c.recompute
                and t.candidate.micro_batch_size in (c.micro_batch_size // 2, c.micro_batch_size * 2)]

    def best(self) -> Trial | None:
        ok = [t for t in self.trials if t.status == "ok" and t.step_seconds is not None]
        return min(ok, key=lambda t: t.step_seconds or math.inf, default=None)

    def refit(self) -> None:
        rows = [(t.candidate.terms, t.step_seconds) for t in self.measured() if t.step_seconds]
        self.calibration = fit(rows, self.cost, context=self.context)
        for t in self.trials:
            t.predicted = self.calibration.predict(t.candidate.terms) if rows else t.uncalibrated
        if rows:
            self.error = max(abs(self.calibration.predict(terms) - y) / y for terms, y in rows)

    def next(self, pending: list[Trial]) -> tuple[Trial | None, str]:
        """The next trial: the best measured layout's neighbours (its micro-batch halved and doubled), then the fastest
        predicted of the shortlist's pending ones, then the fastest predicted of all unmeasured layouts while it can
        beat the best measured; else None and why the tune stops."""
        best = self.best()
        near = self.neighbours(best) if best is not None and len(self.measured()) >= NEIGHBOURS_AFTER else []
        if near:
            return min(near, key=lambda t: t.predicted), ""
        if pending:
            return min(pending, key=lambda t: t.predicted), ""
        left = [t for t in self.trials if not t.status]
        if not left:
            return None, "every layout that fits is measured"
        nxt = min(left, key=lambda t: t.predicted)
        if best is None:
            return nxt, ""
        margin = max(0.03, min(self.error, 0.5))
        if nxt.predicted * (1 - margin) >= (best.step_seconds or 0):
            return None, (f"no unmeasured layout can beat the best measured ({best.step_seconds:.3f} s): the fastest "
                          f"predicted left is {nxt.predicted:.3f} s, less the fit's error of {margin:.0%}")
        return nxt, ""


def _measure(t: Trial, history: History, runner: _Runner, state: "_State", *,
             number: int | None = None) -> dict[str, Any]:
    """Run the trial of `t` (again, with `number`: a repeat), filling in its status and figures; its result."""
    c = t.candidate
    number = number or t.number
    if number == t.number and history.interrupted(t.key) >= 2:  # it started twice and never ended: what killed the tune may be this trial
        result: dict[str, Any] = {"status": "error", "wall_seconds": 0.0, "estimate_bytes": c.memory.total,
                                  "error": "interrupted twice (the tune was killed during it each time): not retried"}
        _fill(t, result, None)
        history.end(t.key, t.number, result)
        return result
    layout = {"degrees": c.degrees, "sharding_stage": c.stage, "recompute": c.recompute,
              "micro_batch_size": c.micro_batch_size, "accumulate_steps": c.accumulate_steps, "schedule": c.schedule,
              "family": t.family}
    history.start(t.key, number, c.text, layout, {"step_seconds": t.predicted, "uncalibrated_step_seconds":
                                                  t.uncalibrated, "memory_bytes": c.memory.total, "terms": c.terms},
                  repeat=len(t.samples) + 1 if t.status else None)
    if not t.status:
        t.chosen_at = t.predicted
    best = state.best()
    r = runner
    folder = r.out / "trials" / t.key[:12]
    cut = r.cut * best.step_seconds if best and best.step_seconds and not t.status else 0.0  # (a repeat runs whole)
    result = run_trial(c, folder, r.prefix, r.command, r.env, number=number, model=r.model, seq_len=r.seq_len,
                       global_batch=r.global_batch, timeout=r.timeout, warmup=r.warmup, max_steps=r.max_steps,
                       tolerance=r.tolerance, cut_seconds=cut, reference=r.reference)
    result["log"] = str((folder / "log.txt").relative_to(r.out))
    _fill(t, result, r.reference)
    history.end(t.key, number, result)
    return result


def run_trial(c: Candidate, folder: Path, prefix: Sequence[str], command: str | None, env: Mapping[str, str], *,
              number: int, model: Path, seq_len: int, global_batch: int, timeout: float, warmup: int = 2,
              max_steps: int = 20, tolerance: float = 0.03, cut_seconds: float = 0.0,
              reference: float | None = None) -> dict[str, Any]:
    """One trial of `c` in `folder` (its strategy file, trial.json and log.txt): the result record the history keeps
    (the schema's `result`). `cut_seconds` is at the probe's speed, whose reference workload took `reference`."""
    from ..atomic import write_atomic

    folder.mkdir(parents=True, exist_ok=True)
    strategy_file = folder / "strategy.prototxt"
    write_atomic(strategy_file, c.text.encode())
    if command:  # (replaced, not str.format: a command may hold braces of its own)
        filled = command.replace("{strategy}", str(strategy_file.resolve())).replace("{out}", str(folder.resolve()))
        argv = shlex.split(filled.replace("{trial}", str(number)))
    else:
        argv = [*prefix, "-m", "parallel.tune.trial", "--strategy", str(strategy_file.resolve()),
                "--model", str(model.resolve()), "--seq-len", str(seq_len), "--global-batch", str(global_batch),
                "--out", str(folder.resolve()), "--warmup", str(warmup), "--max-steps", str(max_steps),
                "--tolerance", str(tolerance), "--cut-seconds", f"{cut_seconds:.6f}",
                "--probe-reference", f"{reference or 0.0:.9f}"]
    outcome = launch.run(argv, cwd=folder, log=folder / "log.txt", timeout=timeout,
                         env={**env, "STRATEGY_TUNE_TRIAL": str(number)})
    memory = outcome.result.get("memory") or {}
    result = {"status": outcome.status, "step_seconds": outcome.result.get("step_seconds"),
              "reference_seconds": outcome.result.get("reference_seconds"),
              "steps": outcome.result.get("steps", []), "references": outcome.result.get("references", []),
              "memory_bytes": memory.get("peak_bytes"),
              "estimate_bytes": memory.get("estimate_bytes", c.memory.total), "wall_seconds": outcome.wall_seconds}
    if outcome.error:
        result["error"] = outcome.error.strip()[-1500:]
    return result


def _fill(t: Trial, result: Mapping[str, Any], reference: float | None) -> None:
    """`t` after a run: its first run gives its status; a repeat that is ok adds a sample (the step time is the
    median of the samples), one that fails is recorded in the history only. Step times are `corrected` to the
    probe's speed (`reference`)."""
    seconds = corrected(result, reference)
    if t.status == "ok":
        if result["status"] == "ok" and seconds is not None:
            t.samples.append(float(seconds))
            t.step_seconds = statistics.median(t.samples)
            t.wall_seconds += float(result.get("wall_seconds", 0.0))
        return
    t.status = result["status"]
    t.step_seconds = seconds if t.status in ("ok", "cut") else None
    t.speed = seconds / result["step_seconds"] if seconds and result.get("step_seconds") else 1.0
    t.samples = [float(t.step_seconds)] if t.step_seconds is not None else []
    t.memory_bytes = result.get("memory_bytes")
    t.estimate_bytes = result.get("estimate_bytes")
    t.wall_seconds = float(result.get("wall_seconds", 0.0))
    t.error = result.get("error", "")


class _Bar:
    """The overall bar: trials run of the budget, the best so far (tqdm on a terminal; nothing elsewhere)."""

    def __init__(self, total: int, shown: bool) -> None:
        self.total, self.bar = total, None
        if shown:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="tune", unit="trial", dynamic_ncols=True, file=sys.stderr)

    def line(self, t: Trial, *, number: int | None = None, result: Mapping[str, Any] | None = None) -> str:
        c = t.candidate
        if number is not None and result is not None:  # measured again
            head = f"[{number:>2}/{self.total}] again   {t.describe()}"
            if result["status"] != "ok":
                return f"{head}: {result['status']} this time, kept at {t.step_seconds:.3f} s"
            return (f"{head}: {t.samples[-1]:.3f} s/step; the median of its {len(t.samples)} runs "
                    f"{t.step_seconds:.3f} s")
        head = f"[{t.number:>2}/{self.total}] {t.status or '?':7s} {t.describe()}"
        if t.reused:
            head += " (from the history)"
        if t.measured:
            y = t.step_seconds or 1.0
            memory = ""
            estimate = t.estimate_bytes or c.memory.total
            if t.memory_bytes:
                memory = (f", memory {t.memory_bytes / 2 ** 20:.1f} MiB (estimate {estimate / 2 ** 20:.1f}, "
                          f"{(estimate - t.memory_bytes) / t.memory_bytes:+.1%})")
            chosen = "" if t.reused else f", calibrated {t.chosen_at:.3f} s {(t.chosen_at - y) / y:+.0%}"
            drift = 1 / t.speed - 1  # the machine slower (> 0) than at the probe, by the reference workload
            speed = (f"{y / t.speed:.3f} measured, the machine {abs(drift):.0%} {'slower' if drift > 0 else 'faster'} "
                     "than at the probe; " if abs(drift) >= 0.005 and len(t.samples) == 1 else "")
            plan = f"plan {t.uncalibrated:.3f} s {(t.uncalibrated - y) / y:+.0%}"
            return f"{head}: {y:.3f} s/step ({speed}{plan}{chosen}){memory}"
        return f"{head}: {t.error.splitlines()[-1][:200] if t.error else ''}"

    def update(self, done: int, state: _State) -> None:
        if self.bar is not None:
            best = state.best()
            self.bar.n = done
            self.bar.set_postfix_str(f"best {best.step_seconds:.3f} s (trial {best.number})" if best else "no best yet")
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def table(result: TuneResult) -> str:
    """The trials as a Markdown table: the measured step time (corrected to the probe's speed) against the plan's
    prediction (the probed constants, uncalibrated) and against the calibrated prediction when the trial was chosen
    (fitted on the trials before it only: out of sample), and the measured memory against estimate_memory; each error
    as (predicted − measured) / measured."""
    def cell(predicted: float, y: float | None) -> str:
        return f"{predicted:.3f} ({(predicted - y) / y:+.0%})" if y else f"{predicted:.3f}"

    rows = ["| # | layout | status | step s (at the probe's speed) | plan's s (error) | calibrated when chosen s (error) "
            "| memory MiB | estimate MiB (error) |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for t in result.trials:
        c = t.candidate
        y = t.step_seconds if t.measured else None
        runs = f" (median of {len(t.samples)})" if len(t.samples) > 1 else ""
        cells = [f"{y:.3f}{runs}" if y else "—", cell(t.uncalibrated, y), "—" if t.reused else cell(t.chosen_at, y)]
        est = (t.estimate_bytes or c.memory.total) / 2 ** 20
        if t.memory_bytes:
            mem = [f"{t.memory_bytes / 2 ** 20:.1f}", f"{est:.1f} ({(est * 2 ** 20 - t.memory_bytes) / t.memory_bytes:+.1%})"]
        else:
            mem = ["—", f"{est:.1f}"]
        best = " **best**" if result.best is t else ""
        rows.append(f"| {t.number} | {t.describe()}{best} | {t.status} | " + " | ".join(cells + mem) + " |")
    measured = [t for t in result.trials if t.measured and t.step_seconds]
    if not measured:
        return "\n".join([*rows, "", f"Stopped: {result.stopped}."])
    times = [t.step_seconds or 0.0 for t in measured]
    later = [t for t in measured[2:] if not t.reused]  # chosen with at least two trials fitted
    at_choice = (f", the calibrated prediction when chosen {mape([t.chosen_at for t in later], [t.step_seconds or 0.0 for t in later]):.1%} "
                 f"(trials 3 on, fitted on those before each)") if later else ""
    return "\n".join([*rows, "", f"Mean absolute error on the {len(measured)} measured trials: the plan's "
                      f"{mape([t.uncalibrated for t in measured], times):.1%}{at_choice}, the final fit "
                      f"{mape([result.calibration.predict(t.candidate.terms) for t in measured], times):.1%} (in "
                      f"sample). Stopped: {result.stopped}."])


def _write_outputs(result: TuneResult, world_size: int, seq_len: int, say: Callable[[str], None]) -> None:
    """tune.md, calibration.json and best.prototxt (validated strictly at the world size first), each atomically."""
    from .. import loads, resolve
    from ..atomic import write_atomic

    out = result.out
    result.calibration.save(out / "calibration.json")
    write_atomic(out / "tune.md", (f"# strategy tune\n\n{result.table}\n").encode())
    say(result.table)
    best = result.best
    if best is None:
        say(f"tune: no trial succeeded ({result.stopped}); see {out / 'history.jsonl'}")
        return
    path = out / "best.prototxt"
    head = (f"# strategy tune: the fastest of {len(result.trials)} trials on {world_size} ranks, {seq_len} tokens a "
            f"sequence: {best.step_seconds:.4f} s a step measured (at the probe's speed)\n")
    resolve(loads(best.candidate.text), world_size=world_size)  # strict, at the world size: what a run will load
    write_atomic(path, (head + best.candidate.text).encode())
    say(f"tune: best {best.describe()}, {best.step_seconds:.3f} s a step (trial {best.number}); wrote {path}, "
        f"{out / 'calibration.json'} (strategy plan --calibration) and {out / 'tune.md'}")
