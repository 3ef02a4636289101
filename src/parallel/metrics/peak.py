"""One device's peak FLOP/s, for MFU: the dense tensor-core figure of each known GPU for the dtype a run computes in
(bfloat16/float16 under amp, else TF32 where the GPU has it), from the vendors' data sheets. None for a CPU or an
unknown device: the log then gives TFLOP/s and no MFU, rather than a ratio to a guessed peak."""

from __future__ import annotations

import torch

__all__ = ["device_peak_flops"]

# Name fragment (as torch.cuda.get_device_name spells it) -> (16-bit dense, TF32 dense) FLOP/s. Checked in order: the
# more specific names first.
_GPUS: tuple[tuple[str, float, float], ...] = (
    ("H200", 989e12, 494.5e12),
    ("H100 PCIe", 756e12, 378e12),
    ("H100", 989e12, 494.5e12),  # SXM; NVL is listed per GPU pair
    ("H800", 989e12, 494.5e12),
    ("H20", 148e12, 74e12),
    ("B200", 2250e12, 1100e12),
    ("A100", 312e12, 156e12),
    ("A800", 312e12, 156e12),
    ("A10G", 70e12, 35e12),
    ("L40S", 362e12, 183e12),
    ("L4", 121e12, 60e12),
    ("V100", 125e12, 15.7e12),  # no TF32: FP32 listed
)


def device_peak_flops(device: torch.device, amp_dtype: str | None) -> float | None:
    """The peak FLOP/s of `device` for 16-bit compute (`amp_dtype` "bfloat16"/"float16") or TF32/FP32 (None)."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(device)
    for fragment, half, tf32 in _GPUS:
        if fragment in name:
            return half if amp_dtype in ("bfloat16", "float16") else tf32
    return None
