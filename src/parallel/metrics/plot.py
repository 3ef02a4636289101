"""metrics.png: a run's metrics over its steps, drawn from the ranks' metrics_rankR.jsonl (matplotlib, optional):
step time per rank, tokens/s per device, peak memory per rank."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from strategy.atomic import write_atomic

__all__ = ["plot_metrics", "read_records"]


def read_records(folder: str | os.PathLike[str]) -> list[dict]:
    """Rank 0's records (each holds every rank's figures), in step order; [] when there are none."""
    path = Path(folder) / "metrics_rank0.jsonl"
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a run killed while appending: its last line cut short
    return records


def plot_metrics(folder: str | os.PathLike[str], out: str | os.PathLike[str]) -> bool:
    """Draw `folder`'s records into `out` (a PNG, written beside and moved into place); False when there are none."""
    records = read_records(folder)
    if not records:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in records]
    ranks = len(records[0]["per_rank"]["step_seconds"])
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for rank in range(ranks):
        axes[0].plot(steps, [r["per_rank"]["step_seconds"][rank] * 1e3 for r in records], label=f"rank {rank}")
        axes[2].plot(steps, [r["per_rank"]["memory_peak_bytes"][rank] / 2**20 for r in records], label=f"rank {rank}")
    axes[1].plot(steps, [r["tokens_per_second_per_device"] for r in records])
    axes[0].set(xlabel="step", ylabel="ms", title="step time per rank")
    axes[1].set(xlabel="step", ylabel="tokens/s", title="tokens/s per device")
    axes[2].set(xlabel="step", ylabel="MiB", title="peak memory per rank")
    for ax in (axes[0], axes[2]):
        ax.legend()
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    write_atomic(out, png.getvalue())
    return True
