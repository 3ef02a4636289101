from . import strategy_options_pb2 as _strategy_options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AMPConfig(_message.Message):
    __slots__ = ("init_loss_scaling", "incr_every_n_steps", "decr_every_n_nan_or_inf", "incr_ratio", "decr_ratio", "use_dynamic_loss_scaling", "custom_white_list", "custom_black_list", "custom_black_varnames", "use_pure_fp16", "use_fp16_guard", "use_optimizer_fp16", "use_pure_bf16", "dtype")
    INIT_LOSS_SCALING_FIELD_NUMBER: _ClassVar[int]
    INCR_EVERY_N_STEPS_FIELD_NUMBER: _ClassVar[int]
    DECR_EVERY_N_NAN_OR_INF_FIELD_NUMBER: _ClassVar[int]
    INCR_RATIO_FIELD_NUMBER: _ClassVar[int]
    DECR_RATIO_FIELD_NUMBER: _ClassVar[int]
    USE_DYNAMIC_LOSS_SCALING_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_WHITE_LIST_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_BLACK_LIST_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_BLACK_VARNAMES_FIELD_NUMBER: _ClassVar[int]
    USE_PURE_FP16_FIELD_NUMBER: _ClassVar[int]
    USE_FP16_GUARD_FIELD_NUMBER: _ClassVar[int]
    USE_OPTIMIZER_FP16_FIELD_NUMBER: _ClassVar[int]
    USE_PURE_BF16_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    init_loss_scaling: float
    incr_every_n_steps: int
    decr_every_n_nan_or_inf: int
    incr_ratio: float
    decr_ratio: float
    use_dynamic_loss_scaling: bool
    custom_white_list: _containers.RepeatedScalarFieldContainer[str]
    custom_black_list: _containers.RepeatedScalarFieldContainer[str]
    custom_black_varnames: _containers.RepeatedScalarFieldContainer[str]
    use_pure_fp16: bool
    use_fp16_guard: bool
    use_optimizer_fp16: bool
    use_pure_bf16: bool
    dtype: str
    def __init__(self, init_loss_scaling: _Optional[float] = ..., incr_every_n_steps: _Optional[int] = ..., decr_every_n_nan_or_inf: _Optional[int] = ..., incr_ratio: _Optional[float] = ..., decr_ratio: _Optional[float] = ..., use_dynamic_loss_scaling: _Optional[bool] = ..., custom_white_list: _Optional[_Iterable[str]] = ..., custom_black_list: _Optional[_Iterable[str]] = ..., custom_black_varnames: _Optional[_Iterable[str]] = ..., use_pure_fp16: _Optional[bool] = ..., use_fp16_guard: _Optional[bool] = ..., use_optimizer_fp16: _Optional[bool] = ..., use_pure_bf16: _Optional[bool] = ..., dtype: _Optional[str] = ...) -> None: ...

class RecomputeConfig(_message.Message):
    __slots__ = ("checkpoints", "enable_offload", "checkpoint_shape", "enable_tuning", "refined_ops_patterns")
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_OFFLOAD_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_SHAPE_FIELD_NUMBER: _ClassVar[int]
    ENABLE_TUNING_FIELD_NUMBER: _ClassVar[int]
    REFINED_OPS_PATTERNS_FIELD_NUMBER: _ClassVar[int]
    checkpoints: _containers.RepeatedScalarFieldContainer[str]
    enable_offload: bool
    checkpoint_shape: _containers.RepeatedScalarFieldContainer[int]
    enable_tuning: bool
    refined_ops_patterns: _containers.RepeatedCompositeFieldContainer[RefinedOpsPattern]
    def __init__(self, checkpoints: _Optional[_Iterable[str]] = ..., enable_offload: _Optional[bool] = ..., checkpoint_shape: _Optional[_Iterable[int]] = ..., enable_tuning: _Optional[bool] = ..., refined_ops_patterns: _Optional[_Iterable[_Union[RefinedOpsPattern, _Mapping]]] = ...) -> None: ...

class RefinedOpsPattern(_message.Message):
    __slots__ = ("main_ops", "num", "pre_ops", "suf_ops")
    MAIN_OPS_FIELD_NUMBER: _ClassVar[int]
    NUM_FIELD_NUMBER: _ClassVar[int]
    PRE_OPS_FIELD_NUMBER: _ClassVar[int]
    SUF_OPS_FIELD_NUMBER: _ClassVar[int]
    main_ops: _containers.RepeatedScalarFieldContainer[str]
    num: int
    pre_ops: _containers.RepeatedScalarFieldContainer[str]
    suf_ops: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, main_ops: _Optional[_Iterable[str]] = ..., num: _Optional[int] = ..., pre_ops: _Optional[_Iterable[str]] = ..., suf_ops: _Optional[_Iterable[str]] = ...) -> None: ...

class GradientMergeConfig(_message.Message):
    __slots__ = ("k_steps", "avg")
    K_STEPS_FIELD_NUMBER: _ClassVar[int]
    AVG_FIELD_NUMBER: _ClassVar[int]
    k_steps: int
    avg: bool
    def __init__(self, k_steps: _Optional[int] = ..., avg: _Optional[bool] = ...) -> None: ...

class LocalSGDConfig(_message.Message):
    __slots__ = ("k_steps", "begin_step")
    K_STEPS_FIELD_NUMBER: _ClassVar[int]
    BEGIN_STEP_FIELD_NUMBER: _ClassVar[int]
    k_steps: int
    begin_step: int
    def __init__(self, k_steps: _Optional[int] = ..., begin_step: _Optional[int] = ...) -> None: ...

class AdaptiveLocalSGDConfig(_message.Message):
    __slots__ = ("init_k_steps", "begin_step")
    INIT_K_STEPS_FIELD_NUMBER: _ClassVar[int]
    BEGIN_STEP_FIELD_NUMBER: _ClassVar[int]
    init_k_steps: int
    begin_step: int
    def __init__(self, init_k_steps: _Optional[int] = ..., begin_step: _Optional[int] = ...) -> None: ...

class DGCConfig(_message.Message):
    __slots__ = ("rampup_begin_step", "rampup_step", "sparsity")
    RAMPUP_BEGIN_STEP_FIELD_NUMBER: _ClassVar[int]
    RAMPUP_STEP_FIELD_NUMBER: _ClassVar[int]
    SPARSITY_FIELD_NUMBER: _ClassVar[int]
    rampup_begin_step: int
    rampup_step: int
    sparsity: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, rampup_begin_step: _Optional[int] = ..., rampup_step: _Optional[int] = ..., sparsity: _Optional[_Iterable[float]] = ...) -> None: ...

class LarsConfig(_message.Message):
    __slots__ = ("lars_coeff", "lars_weight_decay", "epsilon", "exclude_from_weight_decay")
    LARS_COEFF_FIELD_NUMBER: _ClassVar[int]
    LARS_WEIGHT_DECAY_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FROM_WEIGHT_DECAY_FIELD_NUMBER: _ClassVar[int]
    lars_coeff: float
    lars_weight_decay: float
    epsilon: float
    exclude_from_weight_decay: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, lars_coeff: _Optional[float] = ..., lars_weight_decay: _Optional[float] = ..., epsilon: _Optional[float] = ..., exclude_from_weight_decay: _Optional[_Iterable[str]] = ...) -> None: ...

class LambConfig(_message.Message):
    __slots__ = ("lamb_weight_decay", "exclude_from_weight_decay")
    LAMB_WEIGHT_DECAY_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FROM_WEIGHT_DECAY_FIELD_NUMBER: _ClassVar[int]
    lamb_weight_decay: float
    exclude_from_weight_decay: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, lamb_weight_decay: _Optional[float] = ..., exclude_from_weight_decay: _Optional[_Iterable[str]] = ...) -> None: ...

class QatConfig(_message.Message):
    __slots__ = ("channel_wise_abs_max", "weight_bits", "activation_bits", "not_quant_pattern", "algo")
    CHANNEL_WISE_ABS_MAX_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BITS_FIELD_NUMBER: _ClassVar[int]
    ACTIVATION_BITS_FIELD_NUMBER: _ClassVar[int]
    NOT_QUANT_PATTERN_FIELD_NUMBER: _ClassVar[int]
    ALGO_FIELD_NUMBER: _ClassVar[int]
    channel_wise_abs_max: bool
    weight_bits: int
    activation_bits: int
    not_quant_pattern: _containers.RepeatedScalarFieldContainer[str]
    algo: str
    def __init__(self, channel_wise_abs_max: _Optional[bool] = ..., weight_bits: _Optional[int] = ..., activation_bits: _Optional[int] = ..., not_quant_pattern: _Optional[_Iterable[str]] = ..., algo: _Optional[str] = ...) -> None: ...

class CheckpointConfig(_message.Message):
    __slots__ = ("dir", "every_steps", "keep_last", "async_save", "resume")
    DIR_FIELD_NUMBER: _ClassVar[int]
    EVERY_STEPS_FIELD_NUMBER: _ClassVar[int]
    KEEP_LAST_FIELD_NUMBER: _ClassVar[int]
    ASYNC_SAVE_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    dir: str
    every_steps: int
    keep_last: int
    async_save: bool
    resume: str
    def __init__(self, dir: _Optional[str] = ..., every_steps: _Optional[int] = ..., keep_last: _Optional[int] = ..., async_save: _Optional[bool] = ..., resume: _Optional[str] = ...) -> None: ...

class MetricsConfig(_message.Message):
    __slots__ = ("log_interval", "dir", "tensorboard", "peak_flops", "straggler_threshold")
    LOG_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    DIR_FIELD_NUMBER: _ClassVar[int]
    TENSORBOARD_FIELD_NUMBER: _ClassVar[int]
    PEAK_FLOPS_FIELD_NUMBER: _ClassVar[int]
    STRAGGLER_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    log_interval: int
    dir: str
    tensorboard: bool
    peak_flops: float
    straggler_threshold: float
    def __init__(self, log_interval: _Optional[int] = ..., dir: _Optional[str] = ..., tensorboard: _Optional[bool] = ..., peak_flops: _Optional[float] = ..., straggler_threshold: _Optional[float] = ...) -> None: ...
