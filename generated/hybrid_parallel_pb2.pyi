from . import strategy_options_pb2 as _strategy_options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TpStyle(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TP_STYLE_UNSPECIFIED: _ClassVar[TpStyle]
    COLWISE: _ClassVar[TpStyle]
    COLWISE_GATHER_OUTPUT: _ClassVar[TpStyle]
    COLWISE_REP: _ClassVar[TpStyle]
    ROWWISE: _ClassVar[TpStyle]
    ROWWISE_SPLIT_INPUT: _ClassVar[TpStyle]
    EMBEDDING_ROWWISE: _ClassVar[TpStyle]
    REPLICATE: _ClassVar[TpStyle]
    SEQUENCE_PARALLEL: _ClassVar[TpStyle]
    REPLICATED_WITH_GRAD_ALLREDUCE: _ClassVar[TpStyle]
TP_STYLE_UNSPECIFIED: TpStyle
COLWISE: TpStyle
COLWISE_GATHER_OUTPUT: TpStyle
COLWISE_REP: TpStyle
ROWWISE: TpStyle
ROWWISE_SPLIT_INPUT: TpStyle
EMBEDDING_ROWWISE: TpStyle
REPLICATE: TpStyle
SEQUENCE_PARALLEL: TpStyle
REPLICATED_WITH_GRAD_ALLREDUCE: TpStyle

class HybridConfig(_message.Message):
    __slots__ = ("dp_degree", "mp_degree", "pp_degree", "sharding_degree", "sep_degree", "mp_configs", "pp_configs", "sharding_configs", "enable_optimizer_timer", "split_norm_comm", "ep_degree", "moe_sharding_degree", "dp_configs", "sep_configs", "dp_sep_configs", "pp_tp_configs", "ep_configs", "moe_sharding_configs", "default_comm_group_configs", "cp_degree", "cp_sharding_degree", "cp_configs", "cp_sharding_configs", "dp_cp_configs", "cp_mp_configs", "order")
    DP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    MP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    PP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    SHARDING_DEGREE_FIELD_NUMBER: _ClassVar[int]
    SEP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    MP_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    PP_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    SHARDING_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_OPTIMIZER_TIMER_FIELD_NUMBER: _ClassVar[int]
    SPLIT_NORM_COMM_FIELD_NUMBER: _ClassVar[int]
    EP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    MOE_SHARDING_DEGREE_FIELD_NUMBER: _ClassVar[int]
    DP_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    SEP_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    DP_SEP_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    PP_TP_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    EP_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    MOE_SHARDING_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_COMM_GROUP_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    CP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    CP_SHARDING_DEGREE_FIELD_NUMBER: _ClassVar[int]
    CP_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    CP_SHARDING_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    DP_CP_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    CP_MP_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    dp_degree: int
    mp_degree: int
    pp_degree: int
    sharding_degree: int
    sep_degree: int
    mp_configs: MpConfig
    pp_configs: PpConfig
    sharding_configs: DygraphShardingConfig
    enable_optimizer_timer: bool
    split_norm_comm: bool
    ep_degree: int
    moe_sharding_degree: int
    dp_configs: DpConfig
    sep_configs: SepConfig
    dp_sep_configs: DpSepConfig
    pp_tp_configs: PpTpConfig
    ep_configs: EpConfig
    moe_sharding_configs: MoeShardingConfig
    default_comm_group_configs: DefaultCommGroupConfig
    cp_degree: int
    cp_sharding_degree: int
    cp_configs: CpConfig
    cp_sharding_configs: CpShardingConfig
    dp_cp_configs: DpCpConfig
    cp_mp_configs: CpMpConfig
    order: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, dp_degree: _Optional[int] = ..., mp_degree: _Optional[int] = ..., pp_degree: _Optional[int] = ..., sharding_degree: _Optional[int] = ..., sep_degree: _Optional[int] = ..., mp_configs: _Optional[_Union[MpConfig, _Mapping]] = ..., pp_configs: _Optional[_Union[PpConfig, _Mapping]] = ..., sharding_configs: _Optional[_Union[DygraphShardingConfig, _Mapping]] = ..., enable_optimizer_timer: _Optional[bool] = ..., split_norm_comm: _Optional[bool] = ..., ep_degree: _Optional[int] = ..., moe_sharding_degree: _Optional[int] = ..., dp_configs: _Optional[_Union[DpConfig, _Mapping]] = ..., sep_configs: _Optional[_Union[SepConfig, _Mapping]] = ..., dp_sep_configs: _Optional[_Union[DpSepConfig, _Mapping]] = ..., pp_tp_configs: _Optional[_Union[PpTpConfig, _Mapping]] = ..., ep_configs: _Optional[_Union[EpConfig, _Mapping]] = ..., moe_sharding_configs: _Optional[_Union[MoeShardingConfig, _Mapping]] = ..., default_comm_group_configs: _Optional[_Union[DefaultCommGroupConfig, _Mapping]] = ..., cp_degree: _Optional[int] = ..., cp_sharding_degree: _Optional[int] = ..., cp_configs: _Optional[_Union[CpConfig, _Mapping]] = ..., cp_sharding_configs: _Optional[_Union[CpShardingConfig, _Mapping]] = ..., dp_cp_configs: _Optional[_Union[DpCpConfig, _Mapping]] = ..., cp_mp_configs: _Optional[_Union[CpMpConfig, _Mapping]] = ..., order: _Optional[_Iterable[str]] = ...) -> None: ...

class MpConfig(_message.Message):
    __slots__ = ("sync_param", "sync_grad", "sync_moment", "sync_mode", "mp_async_allreduce", "mp_skip_c_identity", "mp_fused_linear_param_grad_add", "need_broadcast_data", "recompute_allgather", "sp_async_reduce_scatter", "nccl_config", "sequence_parallel", "tp_plan")
    SYNC_PARAM_FIELD_NUMBER: _ClassVar[int]
    SYNC_GRAD_FIELD_NUMBER: _ClassVar[int]
    SYNC_MOMENT_FIELD_NUMBER: _ClassVar[int]
    SYNC_MODE_FIELD_NUMBER: _ClassVar[int]
    MP_ASYNC_ALLREDUCE_FIELD_NUMBER: _ClassVar[int]
    MP_SKIP_C_IDENTITY_FIELD_NUMBER: _ClassVar[int]
    MP_FUSED_LINEAR_PARAM_GRAD_ADD_FIELD_NUMBER: _ClassVar[int]
    NEED_BROADCAST_DATA_FIELD_NUMBER: _ClassVar[int]
    RECOMPUTE_ALLGATHER_FIELD_NUMBER: _ClassVar[int]
    SP_ASYNC_REDUCE_SCATTER_FIELD_NUMBER: _ClassVar[int]
    NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    TP_PLAN_FIELD_NUMBER: _ClassVar[int]
    sync_param: bool
    sync_grad: bool
    sync_moment: bool
    sync_mode: str
    mp_async_allreduce: bool
    mp_skip_c_identity: bool
    mp_fused_linear_param_grad_add: bool
    need_broadcast_data: bool
    recompute_allgather: bool
    sp_async_reduce_scatter: bool
    nccl_config: NCCLConfig
    sequence_parallel: bool
    tp_plan: _containers.RepeatedCompositeFieldContainer[TpRule]
    def __init__(self, sync_param: _Optional[bool] = ..., sync_grad: _Optional[bool] = ..., sync_moment: _Optional[bool] = ..., sync_mode: _Optional[str] = ..., mp_async_allreduce: _Optional[bool] = ..., mp_skip_c_identity: _Optional[bool] = ..., mp_fused_linear_param_grad_add: _Optional[bool] = ..., need_broadcast_data: _Optional[bool] = ..., recompute_allgather: _Optional[bool] = ..., sp_async_reduce_scatter: _Optional[bool] = ..., nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ..., sequence_parallel: _Optional[bool] = ..., tp_plan: _Optional[_Iterable[_Union[TpRule, _Mapping]]] = ...) -> None: ...

class PpConfig(_message.Message):
    __slots__ = ("dp_comm_overlap", "delay_scale_loss", "enable_timer", "sharding_comm_overlap", "profiling", "release_gradients", "overlap_p2p_comm", "clear_every_step_cache", "use_batch_p2p_comm", "best_unbalanced_scheduler", "enable_offload_queue", "enable_dynamic_shape", "use_dualpipev", "forward_backward_overlap_scheduler", "coll_nccl_config", "p2p_nccl_config", "shared_nccl_config", "sync_param", "sync_moment", "sync_mode", "virtual_pp_degree")
    DP_COMM_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    DELAY_SCALE_LOSS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_TIMER_FIELD_NUMBER: _ClassVar[int]
    SHARDING_COMM_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    PROFILING_FIELD_NUMBER: _ClassVar[int]
    RELEASE_GRADIENTS_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_P2P_COMM_FIELD_NUMBER: _ClassVar[int]
    CLEAR_EVERY_STEP_CACHE_FIELD_NUMBER: _ClassVar[int]
    USE_BATCH_P2P_COMM_FIELD_NUMBER: _ClassVar[int]
    BEST_UNBALANCED_SCHEDULER_FIELD_NUMBER: _ClassVar[int]
    ENABLE_OFFLOAD_QUEUE_FIELD_NUMBER: _ClassVar[int]
    ENABLE_DYNAMIC_SHAPE_FIELD_NUMBER: _ClassVar[int]
    USE_DUALPIPEV_FIELD_NUMBER: _ClassVar[int]
    FORWARD_BACKWARD_OVERLAP_SCHEDULER_FIELD_NUMBER: _ClassVar[int]
    COLL_NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    P2P_NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    SHARED_NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    SYNC_PARAM_FIELD_NUMBER: _ClassVar[int]
    SYNC_MOMENT_FIELD_NUMBER: _ClassVar[int]
    SYNC_MODE_FIELD_NUMBER: _ClassVar[int]
    VIRTUAL_PP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    dp_comm_overlap: bool
    delay_scale_loss: bool
    enable_timer: bool
    sharding_comm_overlap: bool
    profiling: bool
    release_gradients: bool
    overlap_p2p_comm: bool
    clear_every_step_cache: bool
    use_batch_p2p_comm: bool
    best_unbalanced_scheduler: bool
    enable_offload_queue: bool
    enable_dynamic_shape: bool
    use_dualpipev: bool
    forward_backward_overlap_scheduler: bool
    coll_nccl_config: NCCLConfig
    p2p_nccl_config: NCCLConfig
    shared_nccl_config: NCCLConfig
    sync_param: bool
    sync_moment: bool
    sync_mode: str
    virtual_pp_degree: int
    def __init__(self, dp_comm_overlap: _Optional[bool] = ..., delay_scale_loss: _Optional[bool] = ..., enable_timer: _Optional[bool] = ..., sharding_comm_overlap: _Optional[bool] = ..., profiling: _Optional[bool] = ..., release_gradients: _Optional[bool] = ..., overlap_p2p_comm: _Optional[bool] = ..., clear_every_step_cache: _Optional[bool] = ..., use_batch_p2p_comm: _Optional[bool] = ..., best_unbalanced_scheduler: _Optional[bool] = ..., enable_offload_queue: _Optional[bool] = ..., enable_dynamic_shape: _Optional[bool] = ..., use_dualpipev: _Optional[bool] = ..., forward_backward_overlap_scheduler: _Optional[bool] = ..., coll_nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ..., p2p_nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ..., shared_nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ..., sync_param: _Optional[bool] = ..., sync_moment: _Optional[bool] = ..., sync_mode: _Optional[str] = ..., virtual_pp_degree: _Optional[int] = ...) -> None: ...

class DygraphShardingConfig(_message.Message):
    __slots__ = ("tensor_fusion", "accumulate_steps", "comm_overlap", "split_param", "fuse_optimizer", "use_reduce_avg", "comm_buffer_size_MB", "release_gradients", "free_grads_in_comm", "enable_fuse_optimizer_states", "nccl_config", "check_nccl_config", "offload_opt_buffer_size", "stage")
    TENSOR_FUSION_FIELD_NUMBER: _ClassVar[int]
    ACCUMULATE_STEPS_FIELD_NUMBER: _ClassVar[int]
    COMM_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    SPLIT_PARAM_FIELD_NUMBER: _ClassVar[int]
    FUSE_OPTIMIZER_FIELD_NUMBER: _ClassVar[int]
    USE_REDUCE_AVG_FIELD_NUMBER: _ClassVar[int]
    COMM_BUFFER_SIZE_MB_FIELD_NUMBER: _ClassVar[int]
    RELEASE_GRADIENTS_FIELD_NUMBER: _ClassVar[int]
    FREE_GRADS_IN_COMM_FIELD_NUMBER: _ClassVar[int]
    ENABLE_FUSE_OPTIMIZER_STATES_FIELD_NUMBER: _ClassVar[int]
    NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    CHECK_NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    OFFLOAD_OPT_BUFFER_SIZE_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    tensor_fusion: bool
    accumulate_steps: int
    comm_overlap: bool
    split_param: bool
    fuse_optimizer: bool
    use_reduce_avg: bool
    comm_buffer_size_MB: int
    release_gradients: bool
    free_grads_in_comm: bool
    enable_fuse_optimizer_states: bool
    nccl_config: NCCLConfig
    check_nccl_config: NCCLConfig
    offload_opt_buffer_size: int
    stage: int
    def __init__(self, tensor_fusion: _Optional[bool] = ..., accumulate_steps: _Optional[int] = ..., comm_overlap: _Optional[bool] = ..., split_param: _Optional[bool] = ..., fuse_optimizer: _Optional[bool] = ..., use_reduce_avg: _Optional[bool] = ..., comm_buffer_size_MB: _Optional[int] = ..., release_gradients: _Optional[bool] = ..., free_grads_in_comm: _Optional[bool] = ..., enable_fuse_optimizer_states: _Optional[bool] = ..., nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ..., check_nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ..., offload_opt_buffer_size: _Optional[int] = ..., stage: _Optional[int] = ...) -> None: ...

class NCCLConfig(_message.Message):
    __slots__ = ("commName", "ll_buffsize", "ll128_buffsize", "simple_buffsize", "buffsize_align", "nchannels", "algoStr", "protoStr")
    COMMNAME_FIELD_NUMBER: _ClassVar[int]
    LL_BUFFSIZE_FIELD_NUMBER: _ClassVar[int]
    LL128_BUFFSIZE_FIELD_NUMBER: _ClassVar[int]
    SIMPLE_BUFFSIZE_FIELD_NUMBER: _ClassVar[int]
    BUFFSIZE_ALIGN_FIELD_NUMBER: _ClassVar[int]
    NCHANNELS_FIELD_NUMBER: _ClassVar[int]
    ALGOSTR_FIELD_NUMBER: _ClassVar[int]
    PROTOSTR_FIELD_NUMBER: _ClassVar[int]
    commName: str
    ll_buffsize: int
    ll128_buffsize: int
    simple_buffsize: int
    buffsize_align: int
    nchannels: int
    algoStr: str
    protoStr: str
    def __init__(self, commName: _Optional[str] = ..., ll_buffsize: _Optional[int] = ..., ll128_buffsize: _Optional[int] = ..., simple_buffsize: _Optional[int] = ..., buffsize_align: _Optional[int] = ..., nchannels: _Optional[int] = ..., algoStr: _Optional[str] = ..., protoStr: _Optional[str] = ...) -> None: ...

class DpConfig(_message.Message):
    __slots__ = ("nccl_config", "check_nccl_config")
    NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    CHECK_NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    nccl_config: NCCLConfig
    check_nccl_config: NCCLConfig
    def __init__(self, nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ..., check_nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ...) -> None: ...

class SepConfig(_message.Message):
    __slots__ = ("nccl_config",)
    NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    nccl_config: NCCLConfig
    def __init__(self, nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ...) -> None: ...

class DpSepConfig(_message.Message):
    __slots__ = ("nccl_config",)
    NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    nccl_config: NCCLConfig
    def __init__(self, nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ...) -> None: ...

class PpTpConfig(_message.Message):
    __slots__ = ("nccl_config",)
    NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    nccl_config: NCCLConfig
    def __init__(self, nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ...) -> None: ...

class EpConfig(_message.Message):
    __slots__ = ("nccl_config", "grad_nccl_config")
    NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    GRAD_NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    nccl_config: NCCLConfig
    grad_nccl_config: NCCLConfig
    def __init__(self, nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ..., grad_nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ...) -> None: ...

class MoeShardingConfig(_message.Message):
    __slots__ = ("nccl_config", "check_nccl_config")
    NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    CHECK_NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    nccl_config: NCCLConfig
    check_nccl_config: NCCLConfig
    def __init__(self, nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ..., check_nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ...) -> None: ...

class CpConfig(_message.Message):
    __slots__ = ("nccl_config",)
    NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    nccl_config: NCCLConfig
    def __init__(self, nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ...) -> None: ...

class CpShardingConfig(_message.Message):
    __slots__ = ("nccl_config",)
    NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    nccl_config: NCCLConfig
    def __init__(self, nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ...) -> None: ...

class DpCpConfig(_message.Message):
    __slots__ = ("nccl_config",)
    NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    nccl_config: NCCLConfig
    def __init__(self, nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ...) -> None: ...

class CpMpConfig(_message.Message):
    __slots__ = ("nccl_config",)
    NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    nccl_config: NCCLConfig
    def __init__(self, nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ...) -> None: ...

class DefaultCommGroupConfig(_message.Message):
    __slots__ = ("nccl_config",)
    NCCL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    nccl_config: NCCLConfig
    def __init__(self, nccl_config: _Optional[_Union[NCCLConfig, _Mapping]] = ...) -> None: ...

class TpRule(_message.Message):
    __slots__ = ("pattern", "style")
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    STYLE_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    style: TpStyle
    def __init__(self, pattern: _Optional[str] = ..., style: _Optional[_Union[TpStyle, str]] = ...) -> None: ...
