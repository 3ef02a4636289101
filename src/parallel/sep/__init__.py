"""Sequence (segment) parallelism, sep_degree > 1: each rank holds a contiguous chunk of every row; attention
exchanges chunks for head groups (Ulysses all-to-all) over the mesh's sep axis; gradients are summed over sep.

Builds on `topology`; `compose.parallelize` switches Hugging Face models' attention to it.
"""

from .attention import sep_attention
from .split import split_sequence

__all__ = ["sep_attention", "split_sequence"]
