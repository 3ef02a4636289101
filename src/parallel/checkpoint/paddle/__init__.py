"""PaddleFormers checkpoints (weights, AdamW state, tensor-parallel shards) read into torch: a Paddle run continues
in PyTorch."""

from .reader import PaddleCheckpoint, read_paddle

__all__ = ["PaddleCheckpoint", "read_paddle"]
