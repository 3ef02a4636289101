from . import strategy_options_pb2 as _strategy_options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class BuildStrategy(_message.Message):
    __slots__ = ("fuse_elewise_add_act_ops", "fuse_bn_act_ops", "fuse_relu_depthwise_conv", "fuse_broadcast_ops", "fuse_all_optimizer_ops", "enable_inplace", "enable_backward_optimizer_op_deps", "cache_runtime_context", "fuse_bn_add_act_ops", "enable_auto_fusion", "enable_addto", "allow_cuda_graph_capture", "reduce_strategy", "fuse_gemm_epilogue", "debug_graphviz_path", "fused_attention", "fused_feedforward", "fuse_dot_product_attention", "fuse_resunit")
    FUSE_ELEWISE_ADD_ACT_OPS_FIELD_NUMBER: _ClassVar[int]
    FUSE_BN_ACT_OPS_FIELD_NUMBER: _ClassVar[int]
    FUSE_RELU_DEPTHWISE_CONV_FIELD_NUMBER: _ClassVar[int]
    FUSE_BROADCAST_OPS_FIELD_NUMBER: _ClassVar[int]
    FUSE_ALL_OPTIMIZER_OPS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_INPLACE_FIELD_NUMBER: _ClassVar[int]
    ENABLE_BACKWARD_OPTIMIZER_OP_DEPS_FIELD_NUMBER: _ClassVar[int]
    CACHE_RUNTIME_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    FUSE_BN_ADD_ACT_OPS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_AUTO_FUSION_FIELD_NUMBER: _ClassVar[int]
    ENABLE_ADDTO_FIELD_NUMBER: _ClassVar[int]
    ALLOW_CUDA_GRAPH_CAPTURE_FIELD_NUMBER: _ClassVar[int]
    REDUCE_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    FUSE_GEMM_EPILOGUE_FIELD_NUMBER: _ClassVar[int]
    DEBUG_GRAPHVIZ_PATH_FIELD_NUMBER: _ClassVar[int]
    FUSED_ATTENTION_FIELD_NUMBER: _ClassVar[int]
    FUSED_FEEDFORWARD_FIELD_NUMBER: _ClassVar[int]
    FUSE_DOT_PRODUCT_ATTENTION_FIELD_NUMBER: _ClassVar[int]
    FUSE_RESUNIT_FIELD_NUMBER: _ClassVar[int]
    fuse_elewise_add_act_ops: bool
    fuse_bn_act_ops: bool
    fuse_relu_depthwise_conv: bool
    fuse_broadcast_ops: bool
    fuse_all_optimizer_ops: bool
    enable_inplace: bool
    enable_backward_optimizer_op_deps: bool
    cache_runtime_context: bool
    fuse_bn_add_act_ops: bool
    enable_auto_fusion: bool
    enable_addto: bool
    allow_cuda_graph_capture: bool
    reduce_strategy: int
    fuse_gemm_epilogue: bool
    debug_graphviz_path: str
    fused_attention: bool
    fused_feedforward: bool
    fuse_dot_product_attention: bool
    fuse_resunit: bool
    def __init__(self, fuse_elewise_add_act_ops: _Optional[bool] = ..., fuse_bn_act_ops: _Optional[bool] = ..., fuse_relu_depthwise_conv: _Optional[bool] = ..., fuse_broadcast_ops: _Optional[bool] = ..., fuse_all_optimizer_ops: _Optional[bool] = ..., enable_inplace: _Optional[bool] = ..., enable_backward_optimizer_op_deps: _Optional[bool] = ..., cache_runtime_context: _Optional[bool] = ..., fuse_bn_add_act_ops: _Optional[bool] = ..., enable_auto_fusion: _Optional[bool] = ..., enable_addto: _Optional[bool] = ..., allow_cuda_graph_capture: _Optional[bool] = ..., reduce_strategy: _Optional[int] = ..., fuse_gemm_epilogue: _Optional[bool] = ..., debug_graphviz_path: _Optional[str] = ..., fused_attention: _Optional[bool] = ..., fused_feedforward: _Optional[bool] = ..., fuse_dot_product_attention: _Optional[bool] = ..., fuse_resunit: _Optional[bool] = ...) -> None: ...

class ShardingConfig(_message.Message):
    __slots__ = ("sharding_segment_strategy", "segment_broadcast_MB", "segment_anchors", "sharding_degree", "mp_degree", "dp_degree", "hybrid_dp", "gradient_merge_acc_step", "optimize_offload", "pp_allreduce_in_optimize", "pp_degree", "optimize_cast", "_dp_as_optimizer_sharding", "stage", "enable_tuning", "use_calc_stream")
    SHARDING_SEGMENT_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_BROADCAST_MB_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_ANCHORS_FIELD_NUMBER: _ClassVar[int]
    SHARDING_DEGREE_FIELD_NUMBER: _ClassVar[int]
    MP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    DP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    HYBRID_DP_FIELD_NUMBER: _ClassVar[int]
    GRADIENT_MERGE_ACC_STEP_FIELD_NUMBER: _ClassVar[int]
    OPTIMIZE_OFFLOAD_FIELD_NUMBER: _ClassVar[int]
    PP_ALLREDUCE_IN_OPTIMIZE_FIELD_NUMBER: _ClassVar[int]
    PP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    OPTIMIZE_CAST_FIELD_NUMBER: _ClassVar[int]
    _DP_AS_OPTIMIZER_SHARDING_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    ENABLE_TUNING_FIELD_NUMBER: _ClassVar[int]
    USE_CALC_STREAM_FIELD_NUMBER: _ClassVar[int]
    sharding_segment_strategy: str
    segment_broadcast_MB: float
    segment_anchors: _containers.RepeatedScalarFieldContainer[str]
    sharding_degree: int
    mp_degree: int
    dp_degree: int
    hybrid_dp: bool
    gradient_merge_acc_step: int
    optimize_offload: bool
    pp_allreduce_in_optimize: bool
    pp_degree: int
    optimize_cast: bool
    _dp_as_optimizer_sharding: bool
    stage: int
    enable_tuning: bool
    use_calc_stream: bool
    def __init__(self, sharding_segment_strategy: _Optional[str] = ..., segment_broadcast_MB: _Optional[float] = ..., segment_anchors: _Optional[_Iterable[str]] = ..., sharding_degree: _Optional[int] = ..., mp_degree: _Optional[int] = ..., dp_degree: _Optional[int] = ..., hybrid_dp: _Optional[bool] = ..., gradient_merge_acc_step: _Optional[int] = ..., optimize_offload: _Optional[bool] = ..., pp_allreduce_in_optimize: _Optional[bool] = ..., pp_degree: _Optional[int] = ..., optimize_cast: _Optional[bool] = ..., _dp_as_optimizer_sharding: _Optional[bool] = ..., stage: _Optional[int] = ..., enable_tuning: _Optional[bool] = ..., use_calc_stream: _Optional[bool] = ...) -> None: ...

class PipelineConfig(_message.Message):
    __slots__ = ("micro_batch_size", "accumulate_steps", "schedule_mode", "p2p_cache_shape", "enable_partial_send_recv")
    MICRO_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    ACCUMULATE_STEPS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_MODE_FIELD_NUMBER: _ClassVar[int]
    P2P_CACHE_SHAPE_FIELD_NUMBER: _ClassVar[int]
    ENABLE_PARTIAL_SEND_RECV_FIELD_NUMBER: _ClassVar[int]
    micro_batch_size: int
    accumulate_steps: int
    schedule_mode: str
    p2p_cache_shape: bool
    enable_partial_send_recv: bool
    def __init__(self, micro_batch_size: _Optional[int] = ..., accumulate_steps: _Optional[int] = ..., schedule_mode: _Optional[str] = ..., p2p_cache_shape: _Optional[bool] = ..., enable_partial_send_recv: _Optional[bool] = ...) -> None: ...

class TensorParallelConfig(_message.Message):
    __slots__ = ("tensor_parallel_degree", "tensor_init_seed")
    TENSOR_PARALLEL_DEGREE_FIELD_NUMBER: _ClassVar[int]
    TENSOR_INIT_SEED_FIELD_NUMBER: _ClassVar[int]
    tensor_parallel_degree: int
    tensor_init_seed: int
    def __init__(self, tensor_parallel_degree: _Optional[int] = ..., tensor_init_seed: _Optional[int] = ...) -> None: ...

class GradientScaleConfig(_message.Message):
    __slots__ = ("scale_strategy", "scale_gradient")
    SCALE_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    SCALE_GRADIENT_FIELD_NUMBER: _ClassVar[int]
    scale_strategy: str
    scale_gradient: bool
    def __init__(self, scale_strategy: _Optional[str] = ..., scale_gradient: _Optional[bool] = ...) -> None: ...
