"""Which Paddle trainer a file of arguments is for, told from its argument names (PaddleFormers renamed the degrees).

A JSON or YAML whose top-level keys are trainer arguments is PaddleNLP's or PaddleFormers', never DeepSpeed's (whose
keys are train_micro_batch_size_per_gpu, zero_optimization, ...): any of PaddleFormers' renamed degrees makes it
PaddleFormers' (PaddleNLP has none of them), any of PaddleNLP's makes it PaddleNLP's, and a file with only the
arguments both spell alike is PaddleNLP's as JSON and PaddleFormers' as YAML (the format each one's examples use).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["trainer_kind"]

PF_ONLY = frozenset({"tensor_model_parallel_size", "pipeline_model_parallel_size", "sharding_parallel_size",
                     "sep_parallel_size", "context_parallel_size", "expert_model_parallel_size",
                     "expert_tensor_model_parallel_size", "virtual_pipeline_model_parallel_size"})
PN_ONLY = frozenset({"tensor_parallel_degree", "pipeline_parallel_degree", "sharding_parallel_degree",
                     "sep_parallel_degree", "context_parallel_degree", "expert_parallel_degree", "virtual_pp_degree",
                     "tensor_parallel_config", "pipeline_parallel_config", "sharding_parallel_config"})
BOTH = frozenset({"per_device_train_batch_size", "output_dir", "model_name_or_path", "do_train", "fp16_opt_level",
                  "sharding", "hybrid_parallel_topo_order", "use_expert_parallel", "recompute_granularity"})
DEEPSPEED = frozenset({"train_micro_batch_size_per_gpu", "train_batch_size", "zero_optimization",
                       "gradient_clipping", "steps_per_print", "wall_clock_breakdown"})


def trainer_kind(keys: Iterable[str], *, yaml: bool) -> str | None:
    """"paddleformers", "paddlenlp" or None (not trainer arguments)."""
    names = set(keys)
    if names & PF_ONLY:
        return "paddleformers"
    if names & PN_ONLY:
        return "paddleformers" if yaml else "paddlenlp"
    if names & BOTH and not names & DEEPSPEED:
        return "paddleformers" if yaml else "paddlenlp"
    return None
