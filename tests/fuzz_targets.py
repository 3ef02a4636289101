"""The fuzzing property, shared by the hypothesis suite (make test) and the atheris run (make fuzz):
whatever the input, `loads` / `from_dict` / overrides either succeed or raise StrategyError with a message.
"""

from __future__ import annotations

import json
import warnings

import strategy

MODES = ("prototxt", "json", "yaml", "binary", "dict", "override")


def check(mode: str, data: bytes) -> None:
    """Feed `data` to one entry point; any exception but a non-empty StrategyError propagates."""
    try:
        if mode in strategy.FORMATS:
            strategy.loads(data, format=mode)
        elif mode == "dict":
            try:
                value = json.loads(data)
            except (ValueError, RecursionError):
                return  # not a JSON document: nothing to hand to from_dict
            strategy.from_dict(value) if isinstance(value, dict) else None
        else:
            strategy.loads("", overrides=[data.decode("utf-8", "replace")])
    except strategy.StrategyError as e:
        assert e.message and str(e), f"empty StrategyError for {mode} input {data[:80]!r}"


def one_input(data: bytes) -> None:
    """libFuzzer-style entry point: the first byte picks the entry point, the rest is the input."""
    if data:
        check(MODES[data[0] % len(MODES)], data[1:])


def seeds() -> list[bytes]:
    """Valid documents in every format (from the Paddle fixtures and a few of our own) as starting points."""
    from conftest import PADDLE_FILES

    out: list[bytes] = []
    for path in PADDLE_FILES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", strategy.StrategyWarning)
            s = strategy.load(path, policy="warn")  # llama's sequence-parallel flags lack this project's switch
        for i, fmt in enumerate(MODES[:4]):
            text = strategy.dumps(s, format=fmt)
            out.append(bytes([i]) + (text if isinstance(text, bytes) else text.encode()))
        out.append(bytes([4]) + strategy.dumps(s, format="json").encode())
    out.append(bytes([5]) + b"hybrid_configs.mp_configs.mp_async_allreduce=true")
    return out
