from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
REQUIRES_FIELD_NUMBER: _ClassVar[int]
requires: _descriptor.FieldDescriptor
LEGACY_ENV_FIELD_NUMBER: _ClassVar[int]
legacy_env: _descriptor.FieldDescriptor
MIN_VALUE_FIELD_NUMBER: _ClassVar[int]
min_value: _descriptor.FieldDescriptor
INFER_VALUE_FIELD_NUMBER: _ClassVar[int]
infer_value: _descriptor.FieldDescriptor
MAX_SUPPORTED_FIELD_NUMBER: _ClassVar[int]
max_supported: _descriptor.FieldDescriptor
ALLOWED_FIELD_NUMBER: _ClassVar[int]
allowed: _descriptor.FieldDescriptor
AXIS_FIELD_NUMBER: _ClassVar[int]
axis: _descriptor.FieldDescriptor
ACTIVE_WHEN_PARALLEL_FIELD_NUMBER: _ClassVar[int]
active_when_parallel: _descriptor.FieldDescriptor

class DistributedStrategy(_message.Message):
    __slots__ = ("hybrid_configs",)
    HYBRID_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    hybrid_configs: HybridConfig
    def __init__(self, hybrid_configs: _Optional[_Union[HybridConfig, _Mapping]] = ...) -> None: ...

class HybridConfig(_message.Message):
    __slots__ = ("dp_degree", "mp_degree", "pp_degree", "sharding_degree", "sep_degree", "mp_configs")
    DP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    MP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    PP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    SHARDING_DEGREE_FIELD_NUMBER: _ClassVar[int]
    SEP_DEGREE_FIELD_NUMBER: _ClassVar[int]
    MP_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    dp_degree: int
    mp_degree: int
    pp_degree: int
    sharding_degree: int
    sep_degree: int
    mp_configs: MpConfig
    def __init__(self, dp_degree: _Optional[int] = ..., mp_degree: _Optional[int] = ..., pp_degree: _Optional[int] = ..., sharding_degree: _Optional[int] = ..., sep_degree: _Optional[int] = ..., mp_configs: _Optional[_Union[MpConfig, _Mapping]] = ...) -> None: ...

class MpConfig(_message.Message):
    __slots__ = ("sync_param", "sync_grad", "sync_moment", "sync_mode", "mp_async_allreduce", "mp_skip_c_identity", "mp_fused_linear_param_grad_add")
    SYNC_PARAM_FIELD_NUMBER: _ClassVar[int]
    SYNC_GRAD_FIELD_NUMBER: _ClassVar[int]
    SYNC_MOMENT_FIELD_NUMBER: _ClassVar[int]
    SYNC_MODE_FIELD_NUMBER: _ClassVar[int]
    MP_ASYNC_ALLREDUCE_FIELD_NUMBER: _ClassVar[int]
    MP_SKIP_C_IDENTITY_FIELD_NUMBER: _ClassVar[int]
    MP_FUSED_LINEAR_PARAM_GRAD_ADD_FIELD_NUMBER: _ClassVar[int]
    sync_param: bool
    sync_grad: bool
    sync_moment: bool
    sync_mode: str
    mp_async_allreduce: bool
    mp_skip_c_identity: bool
    mp_fused_linear_param_grad_add: bool
    def __init__(self, sync_param: _Optional[bool] = ..., sync_grad: _Optional[bool] = ..., sync_moment: _Optional[bool] = ..., sync_mode: _Optional[str] = ..., mp_async_allreduce: _Optional[bool] = ..., mp_skip_c_identity: _Optional[bool] = ..., mp_fused_linear_param_grad_add: _Optional[bool] = ...) -> None: ...
