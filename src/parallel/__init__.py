"""Tensor-parallel runtime on torch.distributed, driven by a resolved strategy.

Process groups, parallel layers and the optimizer wrapper land here (see the runtime issue).
"""
