"""PaddleFormers 1.x trainer arguments (`paddleformers-cli train` YAML or JSON): the rules of PaddleFormers 1.2.0, each
citing its source.

Sources, at the commit of the 1.2.0 wheel (d46aa49a): `paddleformers/trainer/training_args.py` (`__post_init__`: the
renamed degrees PF:2758-2886, the order PF:2146-2174, the pipeline switches PF:1951-2050, the tensor switches and the
seed PF:2053-2118, the sharding switches PF:2225-2347, the ConfigConflict checks PF:1831-1933), and the CLI's parser
(`cli/hparams/parser.py`: an argument 1.2.0 does not know rejects the file, after the strategy was built). 1.2.0 keeps
the `*_parallel_config` words only to warn that they are deprecated: its boolean switches act instead, with defaults of
their own (sharding "stage1", split_param, amp_master_grad). Checked against the library: shared/fixtures/paddlenlp.
"""

from __future__ import annotations

from typing import Any

from .common import SELECTIVE, Nothing, Rule, Tool, choice, integer, truth
from .paddle_launch import LAUNCHED_WORLD, file_leaves, leaves as launched
from .paddle_rules import finisher
from .paddle import _MP, _PP, _SD, Trainer, at_most_one, common_rules, degree, granularity, sources, word_rules

__all__ = ["TOOL"]

_COMMIT = "d46aa49accaaeb9b8cc3598737bf6c62b816c63f"
_SRC = f"https://github.com/PaddlePaddle/PaddleFormers/blob/{_COMMIT}/paddleformers/"
SOURCES = sources(_SRC, "degrees 2758-2886 order 2146-2174 pipeline 1951-2050 tensor 2053-2118 sharding 2225-2347 "
                  "conflict 1831-1933 auto 2364-2608 context 2977-2995", cli="cli/hparams/parser.py#L140-L142",
                  trainer="trainer/trainer.py#L3822-L3870", model="trainer/training_args.py")

_OFF = Nothing("off: not written")
_CP = ("context parallelism: PaddleFormers 1.2.0 on Paddle 3.3.1 builds a context group only in the expert topology, "
       "out of each sharding group, and asserts \"context_parallel_size > 1 requires 'get_context_parallel_world_size' "
       "in hcg\" without experts; this runtime runs cp as an axis of its own and not beside ep (split long "
       "sequences with sep_parallel_size instead)")


def _switch(key: str, path: str, cite: str, *, written: bool = False) -> Rule:
    """A boolean switch of 1.2.0's: true sets `path`; false writes false where the trainer always writes the field."""
    return Rule(key=key, means=path, read=truth(True, False if written else _OFF), cite=cite)


_RENAMED = {"tensor_parallel_degree": "tensor_model_parallel_size",
            "pipeline_parallel_degree": "pipeline_model_parallel_size",
            "sharding_parallel_degree": "sharding_parallel_size", "sharding_degree": "sharding_parallel_size",
            "sep_parallel_degree": "sep_parallel_size", "context_parallel_degree": "context_parallel_size",
            "expert_parallel_degree": "expert_model_parallel_size",
            "expert_tensor_parallel_degree": "expert_tensor_model_parallel_size",
            "virtual_pp_degree": "virtual_pipeline_model_parallel_size", "recompute": "recompute_granularity"}
_REJECTS = "paddleformers-cli rejects the file, after building the strategy this import reproduces"

RULES = (
    Rule(key="tensor_model_parallel_size", means="tp", read=degree(), cite="degrees"),
    Rule(key="pipeline_model_parallel_size", means="pp", read=degree(), cite="degrees"),
    Rule(key="sep_parallel_size", means="sep", read=degree(), cite="degrees"),
    Rule(key="context_parallel_size", means="cp", read=at_most_one(_CP), cite="context"),
    Rule(key="sharding_parallel_size", means="shard_group", cite="degrees",
         read=degree(off="the data ranks left, when sharding is set")),
    Rule(key="expert_model_parallel_size", means="ep", read=degree(), cite="degrees"),
    Rule(key="expert_tensor_model_parallel_size", means="checked", cite="degrees",
         read=at_most_one("expert tensor parallelism: the trainer asserts expert_tensor_model_parallel_size <= 1")),
    Rule(key="virtual_pipeline_model_parallel_size", means=_PP + "virtual_pp_degree", read=integer(), cite="model"),
    *(Rule(key=old, reason=f"PaddleNLP's name, unknown to PaddleFormers 1.2.0 (it reads {new}): {_REJECTS}",
           cite="cli") for old, new in _RENAMED.items()),
    *(Rule(key=key, reason=f"not an argument of PaddleFormers 1.2.0: {_REJECTS}", cite="cli") for key in (
        "attn_impl", "benchmark", "offload_optim", "save_safetensors", "use_flash_attention", "zero_padding",
        "tp_delay_scale_loss")),
    Rule(key="recompute_granularity", means="granularity", read=granularity(), cite="model"),
    Rule(key="recompute_method", means="checked", cite="model", read=choice({
        "uniform": Nothing("uniform: recompute_num_layers blocks at a time; 1 is every block, as here"),
        "block": Nothing("block: the first recompute_num_layers blocks only (their line says whether that is all)")})),
    Rule(key="recompute_num_layers", means="checked", cite="model", read=integer(scale=lambda n: Nothing("1: each block on its own") if
                                                                n == 1 else _grouped(n))),
    Rule(key="recompute_modules", reason=SELECTIVE, cite="model"),
    _switch("mp_async_allreduce", _MP + "mp_async_allreduce", "tensor"),
    _switch("mp_skip_c_identity", _MP + "mp_skip_c_identity", "tensor"),
    _switch("mp_fused_linear_param_grad_add", _MP + "mp_fused_linear_param_grad_add", "tensor"),
    _switch("sp_async_reduce_scatter", _MP + "sp_async_reduce_scatter", "tensor"),
    _switch("tp_sync_param", _MP + "sync_param", "tensor"),
    _switch("sync_grad", _MP + "sync_grad", "tensor"),
    _switch("tp_sync_moment", _MP + "sync_moment", "tensor"),
    Rule(key="tp_async_allreduce", reason="not read by 1.2.0's strategy code (mp_async_allreduce is)", cite="tensor"),
    _switch("partial_send_recv", "pipeline_configs.enable_partial_send_recv", "pipeline", written=True),
    _switch("p2p_cache_shape", "pipeline_configs.p2p_cache_shape", "pipeline", written=True),
    _switch("dp_comm_overlap", _PP + "dp_comm_overlap", "pipeline", written=True),
    _switch("pp_sharding_comm_overlap", _PP + "sharding_comm_overlap", "pipeline", written=True),
    _switch("timer", _PP + "enable_timer", "pipeline", written=True),
    _switch("pp_release_grads", _PP + "release_gradients", "pipeline", written=True),
    _switch("overlap_p2p_comm", _PP + "overlap_p2p_comm", "pipeline", written=True),
    _switch("clear_every_step_cache", _PP + "clear_every_step_cache", "pipeline", written=True),
    _switch("batch_p2p_comm", _PP + "use_batch_p2p_comm", "pipeline", written=True),
    _switch("best_unbalanced_scheduler", _PP + "best_unbalanced_scheduler", "pipeline", written=True),
    _switch("use_dualpipev", _PP + "use_dualpipev", "pipeline", written=True),
    _switch("offload_queue", _PP + "enable_offload_queue", "pipeline", written=True),
    _switch("forward_backward_overlap_scheduler", _PP + "forward_backward_overlap_scheduler", "pipeline",
            written=True),
    _switch("variable_seq_lengths", _PP + "enable_dynamic_shape", "pipeline", written=True),
    _switch("pp_sync_param", _PP + "sync_param", "pipeline"),
    _switch("pp_sync_moment", _PP + "sync_moment", "pipeline"),
    Rule(key="pp_delay_scale_loss", reason="not read by 1.2.0: delay_scale_loss is written true under every pipeline",
         cite="pipeline"),
    Rule(key="stage1_reduce_avg", means=_SD + "use_reduce_avg", read=truth(Nothing("true: not written"), False),
         cite="sharding"),
    Rule(key="sharding_offload_opt_buffersize_GB", means=_SD + "offload_opt_buffer_size", read=integer(-1),
         cite="sharding"),
    Rule(key="sharding_comm_group_call_opt", cite="sharding", reason="its field is absent from Paddle 3.3.1's proto "
         "(the trainer catches the AttributeError and warns)"),
    _switch("split_param", _SD + "split_param", "sharding"),
    _switch("sd_release_grads", _SD + "release_gradients", "sharding"),
    _switch("fuse_optimizer_states", _SD + "enable_fuse_optimizer_states", "sharding"),
    _switch("stage1_tensor_fusion", _SD + "tensor_fusion", "sharding", written=True),
    _switch("stage1_overlap", _SD + "comm_overlap", "sharding"),
    *(Rule(key=key, means=key, cite="sharding", read=truth(True, Nothing("off"))) for key in (
        "stage2_overlap", "stage1_broadcast_overlap", "stage1_allgather_overlap")),
    _switch("split_norm_comm", "hybrid_configs.split_norm_comm", "degrees"),
    Rule(key="nccl_comm_group_config", reason="per-group NCCL settings from a file: set each group's nccl_config",
         cite="args"),
    *word_rules({"pipeline_parallel_config": "pipeline", "tensor_parallel_config": "tensor",
                 "sharding_parallel_config": "sharding", "auto": "auto"},
                ignored=lambda config: f"PaddleFormers 1.2.0 checks the words of {config} but ignores them (a "
                                       "deprecation warning): its boolean switches act instead"),
    *common_rules("args", "trainer"),
)


def _grouped(n: int) -> Any:
    from .common import NoCounterpart

    return NoCounterpart(f"{n} blocks recomputed as one group; the strategy's recompute is each block on its own")


DEFAULTS = (
    ("sharding", "stage1"),
    ("hybrid_parallel_topo_order", "sharding_first"),
    ("seed", 42),
    ("per_device_train_batch_size", 8),
    ("gradient_accumulation_steps", 1),
    ("save_steps", 500),
    ("nnodes", 1),
    ("amp_master_grad", True),
    ("split_param", True),
    ("sharding_offload_opt_buffersize_GB", -1),
    ("stage1_tensor_fusion", False),
    # the pipeline switches 1.2.0 writes under every pipeline, at their defaults
    *((key, key in ("partial_send_recv", "p2p_cache_shape", "batch_p2p_comm")) for key in (
        "partial_send_recv", "p2p_cache_shape", "dp_comm_overlap", "pp_sharding_comm_overlap", "timer",
        "pp_release_grads", "overlap_p2p_comm", "clear_every_step_cache", "batch_p2p_comm", "best_unbalanced_scheduler",
        "use_dualpipev", "offload_queue", "forward_backward_overlap_scheduler", "variable_seq_lengths")),
)

TOOL = Tool(script=launched, world_hint=LAUNCHED_WORLD, experts_span_tp=True, kind="paddleformers", name="PaddleFormers", sources=SOURCES, rules=RULES, leaves=file_leaves, defaults=DEFAULTS,
            finish=finisher(Trainer(name="PaddleFormers", expert_order="pf", master_grad_needs_amp=True, eval_batch=True,
                           eval_needs_strategy=True,
                           granularity_switches=True, pp_always={_PP + "delay_scale_loss": True})))
