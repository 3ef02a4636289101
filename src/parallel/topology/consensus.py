"""Make sure every rank resolved the same strategy before any collective can hang on a mismatch."""

from __future__ import annotations

import dataclasses

import torch.distributed as dist

from strategy import Resolved, StrategyError

from .guard import guard

__all__ = ["agree"]


def _flatten(resolved: Resolved) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in dataclasses.asdict(resolved).items():
        if key == "notes":
            continue
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def agree(resolved: Resolved | None, error: StrategyError | None, *, rank: int, world_size: int) -> None:
    """Exchange each rank's settings (or its error) and raise the same StrategyError on every rank on mismatch.

    Uses one all_gather_object on the default group; call it before creating subgroups.
    """
    mine = {"error": str(error)} if error is not None else {"settings": _flatten(resolved)}  # type: ignore[arg-type]
    everyone: list[dict | None] = [None] * world_size
    with guard("strategy check (all_gather_object)", None):
        dist.all_gather_object(everyone, mine)
    failed = {r: e["error"] for r, e in enumerate(everyone) if e and "error" in e}
    if error is not None:
        raise error
    if failed:
        first = min(failed)
        raise StrategyError(f"rank {first} could not use its strategy ({failed[first]}); every rank stops", source=f"rank {first}")
    reference = everyone[0]["settings"]  # type: ignore[index]
    diffs: dict[str, list[str]] = {}
    for r, entry in enumerate(everyone[1:], start=1):
        for key, value in entry["settings"].items():  # type: ignore[index]
            if value != reference[key]:
                diffs.setdefault(key, []).append(f"rank {r}: {value!r}")
    if diffs:
        differing = sorted({int(part.split(":")[0].split()[1]) for parts in diffs.values() for part in parts})
        details = "; ".join(f"{key}: rank 0: {reference[key]!r}, {', '.join(parts)}" for key, parts in sorted(diffs.items()))
        raise StrategyError(
            f"ranks disagree on the strategy: ranks {differing} differ from rank 0 ({details}); "
            "give every rank the same strategy file and overrides"
        )
