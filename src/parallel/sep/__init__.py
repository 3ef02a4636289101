"""Sequence (segment) parallelism, sep_degree > 1: each rank holds a contiguous chunk of every row; attention
exchanges chunks for head groups (Ulysses all-to-all) over the mesh's sep axis; gradients are summed over sep.

`split_sequence` cuts rows for cp too (its load-balanced chunks), and the first-forward check and the switch of a
Hugging Face model's attention (transformers' AttentionInterface) serve cp's kernel as well. Builds on `topology`;
`compose.parallelize` switches Hugging Face models' attention to it.
"""

from .attention import sep_attention
from .split import sequence_positions, split_sequence

__all__ = ["sep_attention", "sequence_positions", "split_sequence"]
