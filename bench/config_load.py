"""Config path benchmark: our load, and load + validate + resolve, per file, next to PaddlePaddle's own loader;
and `strategy validate FILE` from process start to exit next to `python -c pass`.

Run: .venv/bin/python bench/config_load.py [--json OUT]   (Paddle's column needs `pip install paddlepaddle==3.3.1`)
Everything is timed in this process (the CLI in child processes), interleaved round by round, so machine drift
hits every contender alike; medians. Paddle reads only the text format: every row is compared with Paddle loading
the same strategy's .prototxt (for .prototxt rows, the same file).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import strategy

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT.parent / "shared" / "fixtures" / "paddle"
ALL_AXES = Path(__file__).resolve().parent / "strategies" / "all_axes.prototxt"  # every hybrid axis set
ROUNDS, CALLS = int(os.environ.get("BENCH_ROUNDS", 25)), 100
FORMATS = {".prototxt": "prototxt", ".json": "json", ".yaml": "yaml", ".binpb": "binary"}


def paddle_loader() -> tuple[Callable[[Path], object] | None, str]:
    try:
        import paddle
        from paddle.distributed import fleet
        from paddle.distributed.fleet.utils.log_util import logger
    except ImportError:
        return None, "paddlepaddle not installed"
    logger.setLevel(logging.WARNING)  # it logs a line per DistributedStrategy(); don't time the terminal

    def load(path: Path) -> object:
        s = fleet.DistributedStrategy()
        s.load_from_prototxt(str(path))
        return s

    return load, f"paddle {paddle.__version__}"


def _policy(path: Path) -> str:
    """Strict, or for a file that sets what is not implemented (strict rejects it, naming each setting), "warn",
    which resolves it anyway, as a run would be told to."""
    return "warn" if path.stem in _NEEDS_WARN else "strict"


def ours_load(path: Path) -> object:
    """File -> checked, typed message (`strategy.load`: the peer of Paddle's load_from_prototxt). Files loaded under
    "warn" still issue their warnings (located, formatted); `main` has them not printed, as Paddle's log line is not."""
    if path.stem in _NEEDS_WARN:
        return strategy.load(path, policy="warn")
    return strategy.load(path)


def ours_resolved(path: Path) -> object:
    """Load, validate and resolve, as a run does."""
    if path.stem in _NEEDS_WARN:
        return strategy.resolve(strategy.load(path, policy="warn"), world_size=None, policy="warn")
    return strategy.resolve(strategy.load(path), world_size=None)


def _strict_fails(path: Path) -> bool:
    try:
        strategy.resolve(strategy.load(path), world_size=None)
    except strategy.StrategyError:
        return True
    return False


_NEEDS_WARN = {p.stem for p in [*FIXTURES.glob("*.prototxt"), ALL_AXES] if _strict_fails(p)}


def strategies(workdir: Path) -> dict[Path, list[Path]]:
    """Each strategy's .prototxt -> its files in every format: the fixtures' own, the rest written by `strategy.dump`
    into `workdir` (the fixtures have no YAML; the all-axes strategy is only a prototxt)."""
    out: dict[Path, list[Path]] = {}
    for text in [*sorted(FIXTURES.glob("*.prototxt")), ALL_AXES]:
        files = []
        for ext, fmt in FORMATS.items():
            given = text.with_suffix(ext)
            if not given.exists():
                given = workdir / f"{text.stem}{ext}"
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", strategy.StrategyWarning)
                    strategy.dump(strategy.load(text, policy=_policy(text)), given, format=fmt)
            files.append(given)
        out[text] = files
    return out


def per_call_us(fn: Callable[[Path], object], path: Path) -> float:
    start = time.perf_counter()
    for _ in range(CALLS):
        fn(path)
    return (time.perf_counter() - start) / CALLS * 1e6


def measure(text: Path, files: list[Path], paddle: Callable[[Path], object] | None) -> list[dict]:
    """Per file: our load and load + resolve; Paddle's load of the strategy's .prototxt; interleaved each round."""
    timed: list[tuple[str, Callable[[Path], object], Path]] = []
    for path in files:
        timed += [(f"{path.name}:load", ours_load, path), (f"{path.name}:resolved", ours_resolved, path)]
    if paddle:
        timed.append(("paddle", paddle, text))
    samples: dict[str, list[float]] = {name: [] for name, _, _ in timed}
    for _, fn, path in timed:
        fn(path)  # warm up
    for _ in range(ROUNDS):
        for name, fn, path in timed:
            samples[name].append(per_call_us(fn, path))
    theirs = statistics.median(samples["paddle"]) if paddle else None
    return [{"file": p.name, "load_us": statistics.median(samples[f"{p.name}:load"]),
             "resolved_us": statistics.median(samples[f"{p.name}:resolved"]), "paddle_us": theirs} for p in files]


def _command() -> list[str]:
    """`strategy` as installed next to this interpreter (the console script), else `python -m strategy`."""
    script = Path(sys.executable).with_name("strategy")
    return [str(script)] if script.exists() else [sys.executable, "-m", "strategy"]


def cli_wall_time(path: Path, runs: int = 31) -> dict:
    """`strategy validate FILE` and `python -c pass`, alternating, from process start to exit: medians in ms.

    Both run as a user's would: with Python's bytecode caches (PYTHONDONTWRITEBYTECODE unset; the warm-up writes them).
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    commands = {"validate": [*_command(), "validate", str(path)], "pass": [sys.executable, "-c", "pass"]}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for cmd in commands.values():
        subprocess.run(cmd, capture_output=True, check=True, env=env)  # warm the file cache, write bytecode
    for _ in range(runs):
        for name, cmd in commands.items():
            start = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True, env=env)
            times[name].append((time.perf_counter() - start) * 1e3)
    out = {f"{name}_ms": statistics.median(t) for name, t in times.items()}
    return out | {"ratio": out["validate_ms"] / out["pass_ms"], "runs": runs, "command": " ".join(commands["validate"][:-2])}


def _ratio(ours: float, theirs: float | None) -> str:
    return f"{ours / theirs:.2f}" if theirs else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    warnings.simplefilter("ignore", strategy.StrategyWarning)  # issued on every call; printing them is not timed
    wall = cli_wall_time(FIXTURES / "tp2_async_skip.prototxt")
    paddle, paddle_note = paddle_loader()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [row for text, files in strategies(Path(tmp)).items() for row in measure(text, files, paddle)]
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, {paddle_note}; "
          f"median of {ROUNDS} interleaved rounds x {CALLS} calls")
    print(f"(resolved under policy 'warn', as strict rejects them: {', '.join(sorted(_NEEDS_WARN))}; "
          "Paddle loads the same strategy's .prototxt)")
    print(f"| {'file':30} | {'ours: load':>10} | {'vs Paddle':>9} | {'ours: load+validate+resolve':>27} | {'vs Paddle':>9} "
          f"| {'Paddle load_from_prototxt':>25} |")
    print(f"|{'-' * 32}|{'-' * 11}:|{'-' * 10}:|{'-' * 28}:|{'-' * 10}:|{'-' * 26}:|")
    for r in rows:
        theirs = r["paddle_us"]
        theirs_text = f"{theirs:.1f} µs" if theirs else "-"
        print(f"| {r['file']:30} | {r['load_us']:>7.1f} µs | {_ratio(r['load_us'], theirs):>9} | "
              f"{r['resolved_us']:>24.1f} µs | {_ratio(r['resolved_us'], theirs):>9} | {theirs_text:>25} |")
    print()
    print(f"`{wall['command']} validate tp2_async_skip.prototxt`: median {wall['validate_ms']:.1f} ms; `python -c pass`: "
          f"{wall['pass_ms']:.1f} ms; ratio {wall['ratio']:.2f} ({wall['runs']} alternating runs each, process start to exit)")
    out = args.json or Path(__file__).resolve().parent / "results" / "config_load.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"paddle": paddle_note, "rows": rows, "cli_validate": wall}, indent=2) + "\n")


if __name__ == "__main__":
    main()
