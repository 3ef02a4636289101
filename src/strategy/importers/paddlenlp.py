"""PaddleNLP's trainer arguments (`llm/config/*/…_argument.json`, or the flags of `run_pretrain.py`): the rules of
PaddleNLP 3.0.0b4, each citing its source.

Sources, at the commit of the 3.0.0b4 wheel (a286abc1): `paddlenlp/trainer/training_args.py` (`__post_init__`: the
degrees PN:1111-1204, the order PN:1416-1427, the pipeline words PN:1255-1321, the tensor words and the seed
PN:1338-1405, the sharding words PN:1454-1566, the auto-parallel path PN:1574-1794), `trainer_utils.py` (how a
`*_parallel_config` string splits into words), `trainer/trainer.py` (the sharding stage and amp the Trainer applies
outside the strategy) and `transformers/configuration_utils.py` (recompute, sequence_parallel and virtual_pp_degree,
which go to the model config). Read and checked against the library itself: shared/fixtures/paddlenlp/MAPPING.md.
"""

from __future__ import annotations

from .common import SELECTIVE, Nothing, Reader, Rule, Tool, integer, truth
from .paddle_launch import LAUNCHED_WORLD, file_leaves, leaves as launched
from .paddle_rules import finisher
from .paddle import PP_WORDS, Trainer, at_most_one, common_rules, degree, granularity, sources, word_rules

__all__ = ["TOOL"]

_COMMIT = "a286abc1063e516ed56b746fcca33bedce5fcef3"
_SRC = f"https://github.com/PaddlePaddle/PaddleNLP/blob/{_COMMIT}/paddlenlp/"
SOURCES = sources(_SRC, "degrees 1111-1204 order 1416-1427 pipeline 1255-1321 tensor 1338-1405 sharding 1454-1566 "
                  "auto 1574-1794", words="trainer/trainer_utils.py#L1204", trainer="trainer/trainer.py#L2204-L2255",
                  model="transformers/configuration_utils.py#L214-L279")
_WORD_CITES = {"pipeline_parallel_config": "pipeline", "tensor_parallel_config": "tensor",
               "sharding_parallel_config": "sharding", "auto": "auto"}

RULES = (
    Rule(key="tensor_parallel_degree", means="tp", read=degree(), cite="degrees"),
    Rule(key="pipeline_parallel_degree", means="pp", read=degree(), cite="degrees"),
    Rule(key="sep_parallel_degree", means="sep", read=degree(), cite="degrees"),
    Rule(key="context_parallel_degree", means="sep", read=degree(), cite="degrees",
         reason="PaddleNLP puts the context-parallel degree on sep_degree: both share the sep axis"),
    Rule(key="sharding_parallel_degree", means="shard_group", cite="degrees",
         read=degree(off="the data ranks left, when sharding is set")),
    Rule(key="sharding_degree", means="shard_group", cite="degrees",
         read=degree(off="the data ranks left, when sharding is set"),
         reason="the deprecated spelling of sharding_parallel_degree"),
    Rule(key="expert_parallel_degree", means="ep", read=degree(), cite="degrees"),
    Rule(key="expert_tensor_parallel_degree", means="checked", cite="degrees",
         read=at_most_one("expert tensor parallelism: the trainer asserts expert_tensor_parallel_degree <= 1")),
    Rule(key="data_parallel_degree", cite="degrees", reason="not an argument of PaddleNLP 3.0.0b4's TrainingArguments "
         "(ignored there): the data degree is the world over the others"),
    Rule(key="virtual_pp_degree", means="hybrid_configs.pp_configs.virtual_pp_degree", read=integer(), cite="model"),
    Rule(key="recompute", means="recompute", read=truth(True, False), cite="model"),
    Rule(key="recompute_granularity", means="granularity", read=granularity(), cite="model"),
    Rule(key="recompute_use_reentrant", cite="model",
         read=Reader("nothing to set", lambda v: Nothing("how torch.utils.checkpoint recomputes is the runtime's")),
         means="checked"),
    Rule(key="refined_recompute", reason=SELECTIVE, cite="model"),
    Rule(key="parallel_mode", reason="which path the script takes; enable_auto_parallel says it to the trainer",
         cite="auto"),
    *word_rules(_WORD_CITES),
    *common_rules("args", "trainer"),
)

DEFAULTS = (
    ("hybrid_parallel_topo_order", "pp_first"),
    ("seed", 42),
    ("per_device_train_batch_size", 8),
    ("gradient_accumulation_steps", 1),
    ("save_steps", 500),
    ("nnodes", 1),
    *((f"pipeline_parallel_config.{word}", False) for word in PP_WORDS),
    ("sharding_parallel_config.enable_stage1_tensor_fusion", False),
)

TOOL = Tool(script=launched, world_hint=LAUNCHED_WORLD, kind="paddlenlp", name="PaddleNLP", sources=SOURCES, rules=RULES, leaves=file_leaves, defaults=DEFAULTS,
            finish=finisher(Trainer(name="PaddleNLP", expert_order="pn", master_grad_needs_amp=False)))
