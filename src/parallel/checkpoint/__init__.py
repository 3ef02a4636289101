"""Checkpoints on torch's DCP: every rank saves its shards as DTensors over the hybrid mesh, so any layout loads them.

Builds on `topology` and `tensor`; `cli` is the `strategy checkpoint` command.
"""

from .save_load import Checkpoint, full_state_dict, load, save

__all__ = ["Checkpoint", "full_state_dict", "load", "save"]
