"""Config path benchmark: our load + validate + resolve per file, next to PaddlePaddle's own loader.

Run: .venv/bin/python bench/config_load.py [--json OUT]   (Paddle's column needs `pip install paddlepaddle==3.3.1`)
Both are timed in this process, interleaved round by round, so machine drift hits both alike; medians.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import strategy

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT.parent / "shared" / "fixtures" / "paddle"
ROUNDS, CALLS = 25, 200


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


def ours(path: Path) -> object:
    """Load and resolve as a run does: strict, or for a file that sets what is not implemented (strict rejects
    it, naming each setting), the warn policy that resolves it anyway."""
    if path.stem in _NEEDS_WARN:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", strategy.StrategyWarning)
            return strategy.resolve(strategy.load(path, policy="warn"), world_size=None, policy="warn")
    return strategy.resolve(strategy.load(path), world_size=None)


def _strict_fails(path: Path) -> bool:
    try:
        strategy.resolve(strategy.load(path), world_size=None)
    except strategy.StrategyError:
        return True
    return False


_NEEDS_WARN = {p.stem for p in FIXTURES.glob("*.prototxt") if _strict_fails(p)}


def per_call_us(fn: Callable[[Path], object], path: Path) -> float:
    start = time.perf_counter()
    for _ in range(CALLS):
        fn(path)
    return (time.perf_counter() - start) / CALLS * 1e6


def measure(path: Path, paddle: Callable[[Path], object] | None) -> dict:
    contenders = {"ours": ours} | ({"paddle": paddle} if paddle and path.suffix == ".prototxt" else {})
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for fn in contenders.values():
        fn(path)  # warm up
    for _ in range(ROUNDS):
        for name, fn in contenders.items():
            samples[name].append(per_call_us(fn, path))
    return {"file": path.name} | {f"{name}_us": statistics.median(v) for name, v in samples.items()}


def cli_wall_time(path: Path, runs: int = 21) -> dict:
    """`python -m strategy validate FILE` from process start to exit: median, min and max in ms."""
    cmd = [sys.executable, "-m", "strategy", "validate", str(path)]
    subprocess.run(cmd, capture_output=True, check=True)  # warm the file cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append((time.perf_counter() - start) * 1e3)
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    wall = cli_wall_time(FIXTURES / "tp2_async_skip.prototxt")
    paddle, paddle_note = paddle_loader()
    files = [p for p in sorted(FIXTURES.iterdir()) if p.suffix in strategy.EXTENSIONS and not p.name.endswith("-schema.json")]
    rows = [measure(p, paddle) for p in files]
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, {paddle_note}; "
          f"median of {ROUNDS} interleaved rounds x {CALLS} calls")
    print(f"(files resolved under policy 'warn', as strict rejects them: {', '.join(sorted(_NEEDS_WARN))})")
    print(f"| {'file':30} | {'ours: load+validate+resolve':>27} | {'paddle load_from_prototxt':>25} | {'ratio':>5} |")
    print(f"|{'-' * 32}|{'-' * 29}:|{'-' * 27}:|{'-' * 6}:|")
    for r in rows:
        theirs = r.get("paddle_us")
        ratio = f"{r['ours_us'] / theirs:.2f}" if theirs else "-"
        theirs_text = f"{theirs:.1f} µs" if theirs else "-"
        print(f"| {r['file']:30} | {r['ours_us']:>24.1f} µs | {theirs_text:>25} | {ratio:>5} |")
    print()
    print(f"python -m strategy validate tp2_async_skip.prototxt: median {wall['median_ms']:.0f} ms "
          f"(min {wall['min_ms']:.0f}, max {wall['max_ms']:.0f}) over {wall['runs']} runs, process start to exit")
    out = args.json or Path(__file__).resolve().parent / "results" / "config_load.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"paddle": paddle_note, "rows": rows, "cli_validate": wall}, indent=2) + "\n")


if __name__ == "__main__":
    main()
