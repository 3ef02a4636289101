"""Coverage-guided fuzzing of the loaders with atheris (libFuzzer): `make fuzz`.

The property is the one `make test` checks with hypothesis (tests/fuzz_targets.py): any input to
`loads` (four formats), `from_dict` or an override either loads or raises a StrategyError with a
message. Starts from valid documents in every format; libFuzzer's "Done N runs" line is the count.
Any other exception stops the run with the input saved as crash-<hash> (keep it as a regression test).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import atheris  # noqa: E402

with atheris.instrument_imports(include=["strategy"]):
    import strategy  # noqa: F401,E402

from fuzz_targets import one_input, seeds  # noqa: E402

COUNT = 0


def target(data: bytes) -> None:
    global COUNT
    COUNT += 1
    one_input(data)
    if COUNT % 50_000 == 0:  # libFuzzer exits without running Python's exit handlers: report as we go
        print(f"fuzz: {COUNT} inputs so far, no exception but StrategyError", file=sys.stderr, flush=True)


def main() -> None:
    runs = int(os.environ.get("FUZZ_RUNS", "100000"))
    corpus = Path(tempfile.mkdtemp(prefix="strategy-fuzz-"))
    for i, seed in enumerate(seeds()):
        (corpus / f"seed{i}").write_bytes(seed)
    argv = [sys.argv[0], f"-runs={runs}", "-max_len=2048", "-timeout=10", "-rss_limit_mb=2048", str(corpus)]
    atheris.Setup(argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
