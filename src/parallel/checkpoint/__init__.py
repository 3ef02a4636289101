"""Checkpoints on torch's DCP: every rank saves its shards as DTensors over the hybrid mesh, so any layout loads them.

Builds on `topology` and `tensor`; `Checkpointer` runs the strategy's checkpoint_configs (periodic saves, resume after
a restart); `paddle` reads a Paddle run's checkpoint into one (`import_paddle`); `cli` is the `strategy checkpoint`
command.
"""

from .checkpointer import Checkpointer
from .paddle.convert import import_paddle
from .save_load import Checkpoint, full_state_dict, load, save

__all__ = ["Checkpoint", "Checkpointer", "full_state_dict", "import_paddle", "load", "save"]
