from . import strategy_options_pb2 as _strategy_options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TableType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PS_SPARSE_TABLE: _ClassVar[TableType]
    PS_DENSE_TABLE: _ClassVar[TableType]
PS_SPARSE_TABLE: TableType
PS_DENSE_TABLE: TableType

class AsyncConfig(_message.Message):
    __slots__ = ("k_steps", "max_merge_var_num", "send_queue_size", "independent_recv_thread", "min_send_grad_num_before_recv", "thread_pool_size", "send_wait_times", "runtime_split_send_recv", "launch_barrier", "heter_worker_device_guard", "lr_decay_steps", "use_ps_gpu", "use_gpu_graph")
    K_STEPS_FIELD_NUMBER: _ClassVar[int]
    MAX_MERGE_VAR_NUM_FIELD_NUMBER: _ClassVar[int]
    SEND_QUEUE_SIZE_FIELD_NUMBER: _ClassVar[int]
    INDEPENDENT_RECV_THREAD_FIELD_NUMBER: _ClassVar[int]
    MIN_SEND_GRAD_NUM_BEFORE_RECV_FIELD_NUMBER: _ClassVar[int]
    THREAD_POOL_SIZE_FIELD_NUMBER: _ClassVar[int]
    SEND_WAIT_TIMES_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_SPLIT_SEND_RECV_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_BARRIER_FIELD_NUMBER: _ClassVar[int]
    HETER_WORKER_DEVICE_GUARD_FIELD_NUMBER: _ClassVar[int]
    LR_DECAY_STEPS_FIELD_NUMBER: _ClassVar[int]
    USE_PS_GPU_FIELD_NUMBER: _ClassVar[int]
    USE_GPU_GRAPH_FIELD_NUMBER: _ClassVar[int]
    k_steps: int
    max_merge_var_num: int
    send_queue_size: int
    independent_recv_thread: bool
    min_send_grad_num_before_recv: int
    thread_pool_size: int
    send_wait_times: int
    runtime_split_send_recv: bool
    launch_barrier: bool
    heter_worker_device_guard: str
    lr_decay_steps: int
    use_ps_gpu: int
    use_gpu_graph: int
    def __init__(self, k_steps: _Optional[int] = ..., max_merge_var_num: _Optional[int] = ..., send_queue_size: _Optional[int] = ..., independent_recv_thread: _Optional[bool] = ..., min_send_grad_num_before_recv: _Optional[int] = ..., thread_pool_size: _Optional[int] = ..., send_wait_times: _Optional[int] = ..., runtime_split_send_recv: _Optional[bool] = ..., launch_barrier: _Optional[bool] = ..., heter_worker_device_guard: _Optional[str] = ..., lr_decay_steps: _Optional[int] = ..., use_ps_gpu: _Optional[int] = ..., use_gpu_graph: _Optional[int] = ...) -> None: ...

class TrainerDescConfig(_message.Message):
    __slots__ = ("dump_fields_path", "dump_fields", "dump_param", "stat_var_names", "trainer", "device_worker", "local_sparse", "remote_sparse")
    DUMP_FIELDS_PATH_FIELD_NUMBER: _ClassVar[int]
    DUMP_FIELDS_FIELD_NUMBER: _ClassVar[int]
    DUMP_PARAM_FIELD_NUMBER: _ClassVar[int]
    STAT_VAR_NAMES_FIELD_NUMBER: _ClassVar[int]
    TRAINER_FIELD_NUMBER: _ClassVar[int]
    DEVICE_WORKER_FIELD_NUMBER: _ClassVar[int]
    LOCAL_SPARSE_FIELD_NUMBER: _ClassVar[int]
    REMOTE_SPARSE_FIELD_NUMBER: _ClassVar[int]
    dump_fields_path: str
    dump_fields: _containers.RepeatedScalarFieldContainer[str]
    dump_param: _containers.RepeatedScalarFieldContainer[str]
    stat_var_names: _containers.RepeatedScalarFieldContainer[str]
    trainer: str
    device_worker: str
    local_sparse: _containers.RepeatedScalarFieldContainer[str]
    remote_sparse: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, dump_fields_path: _Optional[str] = ..., dump_fields: _Optional[_Iterable[str]] = ..., dump_param: _Optional[_Iterable[str]] = ..., stat_var_names: _Optional[_Iterable[str]] = ..., trainer: _Optional[str] = ..., device_worker: _Optional[str] = ..., local_sparse: _Optional[_Iterable[str]] = ..., remote_sparse: _Optional[_Iterable[str]] = ...) -> None: ...

class TableParameter(_message.Message):
    __slots__ = ("table_id", "table_name", "table_class", "shard_num", "type", "accessor", "compress_in_save", "enable_sparse_table_cache", "sparse_table_cache_rate", "sparse_table_cache_file_num", "enable_revert", "shard_merge_rate", "use_gpu_graph")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    TABLE_CLASS_FIELD_NUMBER: _ClassVar[int]
    SHARD_NUM_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ACCESSOR_FIELD_NUMBER: _ClassVar[int]
    COMPRESS_IN_SAVE_FIELD_NUMBER: _ClassVar[int]
    ENABLE_SPARSE_TABLE_CACHE_FIELD_NUMBER: _ClassVar[int]
    SPARSE_TABLE_CACHE_RATE_FIELD_NUMBER: _ClassVar[int]
    SPARSE_TABLE_CACHE_FILE_NUM_FIELD_NUMBER: _ClassVar[int]
    ENABLE_REVERT_FIELD_NUMBER: _ClassVar[int]
    SHARD_MERGE_RATE_FIELD_NUMBER: _ClassVar[int]
    USE_GPU_GRAPH_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    table_name: str
    table_class: str
    shard_num: int
    type: TableType
    accessor: TableAccessorParameter
    compress_in_save: bool
    enable_sparse_table_cache: bool
    sparse_table_cache_rate: float
    sparse_table_cache_file_num: int
    enable_revert: bool
    shard_merge_rate: float
    use_gpu_graph: bool
    def __init__(self, table_id: _Optional[int] = ..., table_name: _Optional[str] = ..., table_class: _Optional[str] = ..., shard_num: _Optional[int] = ..., type: _Optional[_Union[TableType, str]] = ..., accessor: _Optional[_Union[TableAccessorParameter, _Mapping]] = ..., compress_in_save: _Optional[bool] = ..., enable_sparse_table_cache: _Optional[bool] = ..., sparse_table_cache_rate: _Optional[float] = ..., sparse_table_cache_file_num: _Optional[int] = ..., enable_revert: _Optional[bool] = ..., shard_merge_rate: _Optional[float] = ..., use_gpu_graph: _Optional[bool] = ...) -> None: ...

class TableAccessorParameter(_message.Message):
    __slots__ = ("accessor_class", "fea_dim", "embedx_dim", "embedx_threshold", "ctr_accessor_param", "table_accessor_save_param", "embed_sgd_param", "embedx_sgd_param", "graph_sgd_param")
    ACCESSOR_CLASS_FIELD_NUMBER: _ClassVar[int]
    FEA_DIM_FIELD_NUMBER: _ClassVar[int]
    EMBEDX_DIM_FIELD_NUMBER: _ClassVar[int]
    EMBEDX_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    CTR_ACCESSOR_PARAM_FIELD_NUMBER: _ClassVar[int]
    TABLE_ACCESSOR_SAVE_PARAM_FIELD_NUMBER: _ClassVar[int]
    EMBED_SGD_PARAM_FIELD_NUMBER: _ClassVar[int]
    EMBEDX_SGD_PARAM_FIELD_NUMBER: _ClassVar[int]
    GRAPH_SGD_PARAM_FIELD_NUMBER: _ClassVar[int]
    accessor_class: str
    fea_dim: int
    embedx_dim: int
    embedx_threshold: int
    ctr_accessor_param: CtrAccessorParameter
    table_accessor_save_param: _containers.RepeatedCompositeFieldContainer[TableAccessorSaveParameter]
    embed_sgd_param: SGDParameter
    embedx_sgd_param: SGDParameter
    graph_sgd_param: GraphSGDParameter
    def __init__(self, accessor_class: _Optional[str] = ..., fea_dim: _Optional[int] = ..., embedx_dim: _Optional[int] = ..., embedx_threshold: _Optional[int] = ..., ctr_accessor_param: _Optional[_Union[CtrAccessorParameter, _Mapping]] = ..., table_accessor_save_param: _Optional[_Iterable[_Union[TableAccessorSaveParameter, _Mapping]]] = ..., embed_sgd_param: _Optional[_Union[SGDParameter, _Mapping]] = ..., embedx_sgd_param: _Optional[_Union[SGDParameter, _Mapping]] = ..., graph_sgd_param: _Optional[_Union[GraphSGDParameter, _Mapping]] = ...) -> None: ...

class CtrAccessorParameter(_message.Message):
    __slots__ = ("nonclk_coeff", "click_coeff", "base_threshold", "delta_threshold", "delta_keep_days", "show_click_decay_rate", "delete_threshold", "delete_after_unseen_days", "ssd_unseenday_threshold", "show_scale", "zero_init", "load_filter_slots", "save_filter_slots")
    NONCLK_COEFF_FIELD_NUMBER: _ClassVar[int]
    CLICK_COEFF_FIELD_NUMBER: _ClassVar[int]
    BASE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    DELTA_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    DELTA_KEEP_DAYS_FIELD_NUMBER: _ClassVar[int]
    SHOW_CLICK_DECAY_RATE_FIELD_NUMBER: _ClassVar[int]
    DELETE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    DELETE_AFTER_UNSEEN_DAYS_FIELD_NUMBER: _ClassVar[int]
    SSD_UNSEENDAY_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    SHOW_SCALE_FIELD_NUMBER: _ClassVar[int]
    ZERO_INIT_FIELD_NUMBER: _ClassVar[int]
    LOAD_FILTER_SLOTS_FIELD_NUMBER: _ClassVar[int]
    SAVE_FILTER_SLOTS_FIELD_NUMBER: _ClassVar[int]
    nonclk_coeff: float
    click_coeff: float
    base_threshold: float
    delta_threshold: float
    delta_keep_days: float
    show_click_decay_rate: float
    delete_threshold: float
    delete_after_unseen_days: float
    ssd_unseenday_threshold: int
    show_scale: bool
    zero_init: bool
    load_filter_slots: _containers.RepeatedScalarFieldContainer[float]
    save_filter_slots: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, nonclk_coeff: _Optional[float] = ..., click_coeff: _Optional[float] = ..., base_threshold: _Optional[float] = ..., delta_threshold: _Optional[float] = ..., delta_keep_days: _Optional[float] = ..., show_click_decay_rate: _Optional[float] = ..., delete_threshold: _Optional[float] = ..., delete_after_unseen_days: _Optional[float] = ..., ssd_unseenday_threshold: _Optional[int] = ..., show_scale: _Optional[bool] = ..., zero_init: _Optional[bool] = ..., load_filter_slots: _Optional[_Iterable[float]] = ..., save_filter_slots: _Optional[_Iterable[float]] = ...) -> None: ...

class TableAccessorSaveParameter(_message.Message):
    __slots__ = ("param", "converter", "deconverter")
    PARAM_FIELD_NUMBER: _ClassVar[int]
    CONVERTER_FIELD_NUMBER: _ClassVar[int]
    DECONVERTER_FIELD_NUMBER: _ClassVar[int]
    param: int
    converter: str
    deconverter: str
    def __init__(self, param: _Optional[int] = ..., converter: _Optional[str] = ..., deconverter: _Optional[str] = ...) -> None: ...

class SGDParameter(_message.Message):
    __slots__ = ("name", "naive", "adagrad", "adam")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAIVE_FIELD_NUMBER: _ClassVar[int]
    ADAGRAD_FIELD_NUMBER: _ClassVar[int]
    ADAM_FIELD_NUMBER: _ClassVar[int]
    name: str
    naive: SparseNaiveSGDRuleParameter
    adagrad: SparseAdagradSGDRuleParameter
    adam: SparseAdamSGDParameter
    def __init__(self, name: _Optional[str] = ..., naive: _Optional[_Union[SparseNaiveSGDRuleParameter, _Mapping]] = ..., adagrad: _Optional[_Union[SparseAdagradSGDRuleParameter, _Mapping]] = ..., adam: _Optional[_Union[SparseAdamSGDParameter, _Mapping]] = ...) -> None: ...

class SparseNaiveSGDRuleParameter(_message.Message):
    __slots__ = ("learning_rate", "initial_range", "weight_bounds")
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    INITIAL_RANGE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    learning_rate: float
    initial_range: float
    weight_bounds: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, learning_rate: _Optional[float] = ..., initial_range: _Optional[float] = ..., weight_bounds: _Optional[_Iterable[float]] = ...) -> None: ...

class SparseAdagradSGDRuleParameter(_message.Message):
    __slots__ = ("learning_rate", "initial_g2sum", "initial_range", "weight_bounds")
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    INITIAL_G2SUM_FIELD_NUMBER: _ClassVar[int]
    INITIAL_RANGE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    learning_rate: float
    initial_g2sum: float
    initial_range: float
    weight_bounds: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, learning_rate: _Optional[float] = ..., initial_g2sum: _Optional[float] = ..., initial_range: _Optional[float] = ..., weight_bounds: _Optional[_Iterable[float]] = ...) -> None: ...

class SparseAdamSGDParameter(_message.Message):
    __slots__ = ("learning_rate", "initial_range", "beta1_decay_rate", "beta2_decay_rate", "ada_epsilon", "weight_bounds")
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    INITIAL_RANGE_FIELD_NUMBER: _ClassVar[int]
    BETA1_DECAY_RATE_FIELD_NUMBER: _ClassVar[int]
    BETA2_DECAY_RATE_FIELD_NUMBER: _ClassVar[int]
    ADA_EPSILON_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    learning_rate: float
    initial_range: float
    beta1_decay_rate: float
    beta2_decay_rate: float
    ada_epsilon: float
    weight_bounds: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, learning_rate: _Optional[float] = ..., initial_range: _Optional[float] = ..., beta1_decay_rate: _Optional[float] = ..., beta2_decay_rate: _Optional[float] = ..., ada_epsilon: _Optional[float] = ..., weight_bounds: _Optional[_Iterable[float]] = ...) -> None: ...

class GraphSGDParameter(_message.Message):
    __slots__ = ("nodeid_slot", "feature_learning_rate")
    NODEID_SLOT_FIELD_NUMBER: _ClassVar[int]
    FEATURE_LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    nodeid_slot: int
    feature_learning_rate: float
    def __init__(self, nodeid_slot: _Optional[int] = ..., feature_learning_rate: _Optional[float] = ...) -> None: ...

class FsClientParameter(_message.Message):
    __slots__ = ("uri", "user", "passwd", "hadoop_bin")
    URI_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    PASSWD_FIELD_NUMBER: _ClassVar[int]
    HADOOP_BIN_FIELD_NUMBER: _ClassVar[int]
    uri: str
    user: str
    passwd: str
    hadoop_bin: str
    def __init__(self, uri: _Optional[str] = ..., user: _Optional[str] = ..., passwd: _Optional[str] = ..., hadoop_bin: _Optional[str] = ...) -> None: ...
