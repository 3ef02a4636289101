"""Pipeline parallelism (pp_degree > 1) on torch.distributed.pipelining: the model cut by module names into chunks,
run by the strategy's schedule (1F1B, GPipe, interleaved, zero-bubble, DualPipeV) over the mesh's pp axis.

Builds on `topology`, `tensor` and `blocks`; `compose.parallelize` applies it after tensor parallelism and recompute.
"""

from .runner import PipelineModel, next_token_loss, pipeline_stages, split_model

__all__ = ["PipelineModel", "next_token_loss", "pipeline_stages", "split_model"]
