from . import strategy_options_pb2 as _strategy_options_pb2
from . import hybrid_parallel_pb2 as _hybrid_parallel_pb2
from . import training_pb2 as _training_pb2
from . import static_graph_pb2 as _static_graph_pb2
from . import parameter_server_pb2 as _parameter_server_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COLLECTIVE: _ClassVar[Mode]
    PS: _ClassVar[Mode]
    PIPELINE: _ClassVar[Mode]
    HETER: _ClassVar[Mode]
COLLECTIVE: Mode
PS: Mode
PIPELINE: Mode
HETER: Mode

class DistributedStrategy(_message.Message):
    __slots__ = ("mode", "amp", "recompute", "localsgd", "dgc", "gradient_merge", "lars", "lamb", "pipeline", "elastic", "auto", "a_sync", "sync_nccl_allreduce", "nccl_comm_num", "use_hierarchical_allreduce", "hierarchical_allreduce_inter_nranks", "sync_batch_norm", "fuse_all_reduce_ops", "fuse_grad_size_in_MB", "fuse_grad_size_in_TFLOPS", "cudnn_exhaustive_search", "conv_workspace_size_limit", "cudnn_batchnorm_spatial_persistent", "adaptive_localsgd", "fp16_allreduce", "sharding", "last_comm_group_size_MB", "find_unused_parameters", "tensor_parallel", "without_graph_optimization", "fuse_grad_size_in_num", "calc_comm_same_stream", "asp", "fuse_grad_merge", "semi_auto", "adam_d2sum", "auto_search", "heter_ccl_mode", "is_fl_ps_mode", "with_coordinator", "qat", "split_data", "recompute_configs", "amp_configs", "localsgd_configs", "gradient_merge_configs", "dgc_configs", "pipeline_configs", "a_sync_configs", "lars_configs", "lamb_configs", "adaptive_localsgd_configs", "sharding_configs", "hybrid_configs", "tensor_parallel_configs", "trainer_desc_configs", "downpour_table_param", "fs_client_param", "qat_configs", "build_strategy", "gradient_scale_configs", "checkpoint_configs", "metrics_configs")
    MODE_FIELD_NUMBER: _ClassVar[int]
    AMP_FIELD_NUMBER: _ClassVar[int]
    RECOMPUTE_FIELD_NUMBER: _ClassVar[int]
    LOCALSGD_FIELD_NUMBER: _ClassVar[int]
    DGC_FIELD_NUMBER: _ClassVar[int]
    GRADIENT_MERGE_FIELD_NUMBER: _ClassVar[int]
    LARS_FIELD_NUMBER: _ClassVar[int]
    LAMB_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    ELASTIC_FIELD_NUMBER: _ClassVar[int]
    AUTO_FIELD_NUMBER: _ClassVar[int]
    A_SYNC_FIELD_NUMBER: _ClassVar[int]
    SYNC_NCCL_ALLREDUCE_FIELD_NUMBER: _ClassVar[int]
    NCCL_COMM_NUM_FIELD_NUMBER: _ClassVar[int]
    USE_HIERARCHICAL_ALLREDUCE_FIELD_NUMBER: _ClassVar[int]
    HIERARCHICAL_ALLREDUCE_INTER_NRANKS_FIELD_NUMBER: _ClassVar[int]
    SYNC_BATCH_NORM_FIELD_NUMBER: _ClassVar[int]
    FUSE_ALL_REDUCE_OPS_FIELD_NUMBER: _ClassVar[int]
    FUSE_GRAD_SIZE_IN_MB_FIELD_NUMBER: _ClassVar[int]
    FUSE_GRAD_SIZE_IN_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    CUDNN_EXHAUSTIVE_SEARCH_FIELD_NUMBER: _ClassVar[int]
    CONV_WORKSPACE_SIZE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    CUDNN_BATCHNORM_SPATIAL_PERSISTENT_FIELD_NUMBER: _ClassVar[int]
    ADAPTIVE_LOCALSGD_FIELD_NUMBER: _ClassVar[int]
    FP16_ALLREDUCE_FIELD_NUMBER: _ClassVar[int]
    SHARDING_FIELD_NUMBER: _ClassVar[int]
    LAST_COMM_GROUP_SIZE_MB_FIELD_NUMBER: _ClassVar[int]
    FIND_UNUSED_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    WITHOUT_GRAPH_OPTIMIZATION_FIELD_NUMBER: _ClassVar[int]
    FUSE_GRAD_SIZE_IN_NUM_FIELD_NUMBER: _ClassVar[int]
    CALC_COMM_SAME_STREAM_FIELD_NUMBER: _ClassVar[int]
    ASP_FIELD_NUMBER: _ClassVar[int]
    FUSE_GRAD_MERGE_FIELD_NUMBER: _ClassVar[int]
    SEMI_AUTO_FIELD_NUMBER: _ClassVar[int]
    ADAM_D2SUM_FIELD_NUMBER: _ClassVar[int]
    AUTO_SEARCH_FIELD_NUMBER: _ClassVar[int]
    HETER_CCL_MODE_FIELD_NUMBER: _ClassVar[int]
    IS_FL_PS_MODE_FIELD_NUMBER: _ClassVar[int]
    WITH_COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    QAT_FIELD_NUMBER: _ClassVar[int]
    SPLIT_DATA_FIELD_NUMBER: _ClassVar[int]
    RECOMPUTE_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    AMP_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    LOCALSGD_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    GRADIENT_MERGE_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    DGC_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    A_SYNC_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    LARS_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    LAMB_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    ADAPTIVE_LOCALSGD_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    SHARDING_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    HYBRID_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    TRAINER_DESC_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    DOWNPOUR_TABLE_PARAM_FIELD_NUMBER: _ClassVar[int]
    FS_CLIENT_PARAM_FIELD_NUMBER: _ClassVar[int]
    QAT_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    BUILD_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    GRADIENT_SCALE_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    METRICS_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    mode: Mode
    amp: bool
    recompute: bool
    localsgd: bool
    dgc: bool
    gradient_merge: bool
    lars: bool
    lamb: bool
    pipeline: bool
    elastic: bool
    auto: bool
    a_sync: bool
    sync_nccl_allreduce: bool
    nccl_comm_num: int
    use_hierarchical_allreduce: bool
    hierarchical_allreduce_inter_nranks: int
    sync_batch_norm: bool
    fuse_all_reduce_ops: bool
    fuse_grad_size_in_MB: int
    fuse_grad_size_in_TFLOPS: float
    cudnn_exhaustive_search: bool
    conv_workspace_size_limit: int
    cudnn_batchnorm_spatial_persistent: bool
    adaptive_localsgd: bool
    fp16_allreduce: bool
    sharding: bool
    last_comm_group_size_MB: float
    find_unused_parameters: bool
    tensor_parallel: bool
    without_graph_optimization: bool
    fuse_grad_size_in_num: int
    calc_comm_same_stream: bool
    asp: bool
    fuse_grad_merge: bool
    semi_auto: bool
    adam_d2sum: bool
    auto_search: bool
    heter_ccl_mode: bool
    is_fl_ps_mode: bool
    with_coordinator: bool
    qat: bool
    split_data: bool
    recompute_configs: _training_pb2.RecomputeConfig
    amp_configs: _training_pb2.AMPConfig
    localsgd_configs: _training_pb2.LocalSGDConfig
    gradient_merge_configs: _training_pb2.GradientMergeConfig
    dgc_configs: _training_pb2.DGCConfig
    pipeline_configs: _static_graph_pb2.PipelineConfig
    a_sync_configs: _parameter_server_pb2.AsyncConfig
    lars_configs: _training_pb2.LarsConfig
    lamb_configs: _training_pb2.LambConfig
    adaptive_localsgd_configs: _training_pb2.AdaptiveLocalSGDConfig
    sharding_configs: _static_graph_pb2.ShardingConfig
    hybrid_configs: _hybrid_parallel_pb2.HybridConfig
    tensor_parallel_configs: _static_graph_pb2.TensorParallelConfig
    trainer_desc_configs: _parameter_server_pb2.TrainerDescConfig
    downpour_table_param: _containers.RepeatedCompositeFieldContainer[_parameter_server_pb2.TableParameter]
    fs_client_param: _parameter_server_pb2.FsClientParameter
    qat_configs: _training_pb2.QatConfig
    build_strategy: _static_graph_pb2.BuildStrategy
    gradient_scale_configs: _static_graph_pb2.GradientScaleConfig
    checkpoint_configs: _training_pb2.CheckpointConfig
    metrics_configs: _training_pb2.MetricsConfig
    def __init__(self, mode: _Optional[_Union[Mode, str]] = ..., amp: _Optional[bool] = ..., recompute: _Optional[bool] = ..., localsgd: _Optional[bool] = ..., dgc: _Optional[bool] = ..., gradient_merge: _Optional[bool] = ..., lars: _Optional[bool] = ..., lamb: _Optional[bool] = ..., pipeline: _Optional[bool] = ..., elastic: _Optional[bool] = ..., auto: _Optional[bool] = ..., a_sync: _Optional[bool] = ..., sync_nccl_allreduce: _Optional[bool] = ..., nccl_comm_num: _Optional[int] = ..., use_hierarchical_allreduce: _Optional[bool] = ..., hierarchical_allreduce_inter_nranks: _Optional[int] = ..., sync_batch_norm: _Optional[bool] = ..., fuse_all_reduce_ops: _Optional[bool] = ..., fuse_grad_size_in_MB: _Optional[int] = ..., fuse_grad_size_in_TFLOPS: _Optional[float] = ..., cudnn_exhaustive_search: _Optional[bool] = ..., conv_workspace_size_limit: _Optional[int] = ..., cudnn_batchnorm_spatial_persistent: _Optional[bool] = ..., adaptive_localsgd: _Optional[bool] = ..., fp16_allreduce: _Optional[bool] = ..., sharding: _Optional[bool] = ..., last_comm_group_size_MB: _Optional[float] = ..., find_unused_parameters: _Optional[bool] = ..., tensor_parallel: _Optional[bool] = ..., without_graph_optimization: _Optional[bool] = ..., fuse_grad_size_in_num: _Optional[int] = ..., calc_comm_same_stream: _Optional[bool] = ..., asp: _Optional[bool] = ..., fuse_grad_merge: _Optional[bool] = ..., semi_auto: _Optional[bool] = ..., adam_d2sum: _Optional[bool] = ..., auto_search: _Optional[bool] = ..., heter_ccl_mode: _Optional[bool] = ..., is_fl_ps_mode: _Optional[bool] = ..., with_coordinator: _Optional[bool] = ..., qat: _Optional[bool] = ..., split_data: _Optional[bool] = ..., recompute_configs: _Optional[_Union[_training_pb2.RecomputeConfig, _Mapping]] = ..., amp_configs: _Optional[_Union[_training_pb2.AMPConfig, _Mapping]] = ..., localsgd_configs: _Optional[_Union[_training_pb2.LocalSGDConfig, _Mapping]] = ..., gradient_merge_configs: _Optional[_Union[_training_pb2.GradientMergeConfig, _Mapping]] = ..., dgc_configs: _Optional[_Union[_training_pb2.DGCConfig, _Mapping]] = ..., pipeline_configs: _Optional[_Union[_static_graph_pb2.PipelineConfig, _Mapping]] = ..., a_sync_configs: _Optional[_Union[_parameter_server_pb2.AsyncConfig, _Mapping]] = ..., lars_configs: _Optional[_Union[_training_pb2.LarsConfig, _Mapping]] = ..., lamb_configs: _Optional[_Union[_training_pb2.LambConfig, _Mapping]] = ..., adaptive_localsgd_configs: _Optional[_Union[_training_pb2.AdaptiveLocalSGDConfig, _Mapping]] = ..., sharding_configs: _Optional[_Union[_static_graph_pb2.ShardingConfig, _Mapping]] = ..., hybrid_configs: _Optional[_Union[_hybrid_parallel_pb2.HybridConfig, _Mapping]] = ..., tensor_parallel_configs: _Optional[_Union[_static_graph_pb2.TensorParallelConfig, _Mapping]] = ..., trainer_desc_configs: _Optional[_Union[_parameter_server_pb2.TrainerDescConfig, _Mapping]] = ..., downpour_table_param: _Optional[_Iterable[_Union[_parameter_server_pb2.TableParameter, _Mapping]]] = ..., fs_client_param: _Optional[_Union[_parameter_server_pb2.FsClientParameter, _Mapping]] = ..., qat_configs: _Optional[_Union[_training_pb2.QatConfig, _Mapping]] = ..., build_strategy: _Optional[_Union[_static_graph_pb2.BuildStrategy, _Mapping]] = ..., gradient_scale_configs: _Optional[_Union[_static_graph_pb2.GradientScaleConfig, _Mapping]] = ..., checkpoint_configs: _Optional[_Union[_training_pb2.CheckpointConfig, _Mapping]] = ..., metrics_configs: _Optional[_Union[_training_pb2.MetricsConfig, _Mapping]] = ...) -> None: ...

class DistributedJobInfo(_message.Message):
    __slots__ = ("worker_num", "server_num", "worker_ips", "server_endpoints", "origin_startup", "origin_main", "distributed_main", "optimizer_name", "strategy")
    WORKER_NUM_FIELD_NUMBER: _ClassVar[int]
    SERVER_NUM_FIELD_NUMBER: _ClassVar[int]
    WORKER_IPS_FIELD_NUMBER: _ClassVar[int]
    SERVER_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_STARTUP_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_MAIN_FIELD_NUMBER: _ClassVar[int]
    DISTRIBUTED_MAIN_FIELD_NUMBER: _ClassVar[int]
    OPTIMIZER_NAME_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    worker_num: int
    server_num: int
    worker_ips: _containers.RepeatedScalarFieldContainer[str]
    server_endpoints: _containers.RepeatedScalarFieldContainer[str]
    origin_startup: str
    origin_main: str
    distributed_main: str
    optimizer_name: str
    strategy: DistributedStrategy
    def __init__(self, worker_num: _Optional[int] = ..., server_num: _Optional[int] = ..., worker_ips: _Optional[_Iterable[str]] = ..., server_endpoints: _Optional[_Iterable[str]] = ..., origin_startup: _Optional[str] = ..., origin_main: _Optional[str] = ..., distributed_main: _Optional[str] = ..., optimizer_name: _Optional[str] = ..., strategy: _Optional[_Union[DistributedStrategy, _Mapping]] = ...) -> None: ...
