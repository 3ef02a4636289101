"""Each rank's peak memory since the last log: on CUDA the allocator's max allocated and reserved bytes (reset after
each read); on a CPU the process's peak resident set (Linux's VmHWM, reset through /proc/self/clear_refs where the
kernel allows it, else the peak since the process started)."""

from __future__ import annotations

from pathlib import Path

import torch

__all__ = ["peak_memory", "reset_peak_memory"]

_STATUS = Path("/proc/self/status")
_CLEAR = Path("/proc/self/clear_refs")


def peak_memory(device: torch.device) -> tuple[float, float]:
    """(peak bytes in use, peak bytes held) since the last reset: CUDA's max allocated and max reserved; on a CPU the
    peak resident set, twice."""
    if device.type == "cuda":
        return float(torch.cuda.max_memory_allocated(device)), float(torch.cuda.max_memory_reserved(device))
    rss = _vm_hwm()
    return rss, rss


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        _CLEAR.write_text("5")  # resets the peak resident set to the current one (Linux >= 4.0)
    except OSError:
        pass  # not Linux, or not allowed: the peak since the process started


def _vm_hwm() -> float:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(peak if sys.platform == "darwin" else peak * 1024)
