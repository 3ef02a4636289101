"""Context parallelism, cp_degree > 1: each rank holds two chunks of every row (r and 2·cp − 1 − r of 2·cp, the causal
load balance) and all heads; attention all-gathers keys and values over the mesh's cp axis; gradients are summed over
cp.

Builds on `topology` and on `sep` (the sequence split, the first-forward check, transformers' AttentionInterface);
`compose.parallelize` switches Hugging Face models' attention to it.
"""

from .attention import cp_attention

__all__ = ["cp_attention"]
