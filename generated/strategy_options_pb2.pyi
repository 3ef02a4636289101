from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor

class Support(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    IMPLEMENTED: _ClassVar[Support]
    NO_EFFECT: _ClassVar[Support]
    NOT_IMPLEMENTED: _ClassVar[Support]
    DECIDED_HERE: _ClassVar[Support]
IMPLEMENTED: Support
NO_EFFECT: Support
NOT_IMPLEMENTED: Support
DECIDED_HERE: Support
REQUIRES_FIELD_NUMBER: _ClassVar[int]
requires: _descriptor.FieldDescriptor
LEGACY_ENV_FIELD_NUMBER: _ClassVar[int]
legacy_env: _descriptor.FieldDescriptor
MIN_VALUE_FIELD_NUMBER: _ClassVar[int]
min_value: _descriptor.FieldDescriptor
MAX_VALUE_FIELD_NUMBER: _ClassVar[int]
max_value: _descriptor.FieldDescriptor
INFER_VALUE_FIELD_NUMBER: _ClassVar[int]
infer_value: _descriptor.FieldDescriptor
ALLOWED_FIELD_NUMBER: _ClassVar[int]
allowed: _descriptor.FieldDescriptor
AXIS_FIELD_NUMBER: _ClassVar[int]
axis: _descriptor.FieldDescriptor
ACTIVE_WHEN_PARALLEL_FIELD_NUMBER: _ClassVar[int]
active_when_parallel: _descriptor.FieldDescriptor
SUPPORT_FIELD_NUMBER: _ClassVar[int]
support: _descriptor.FieldDescriptor
HINT_FIELD_NUMBER: _ClassVar[int]
hint: _descriptor.FieldDescriptor
ACTIVE_WHEN_FIELD_NUMBER: _ClassVar[int]
active_when: _descriptor.FieldDescriptor
MUST_SET_FIELD_NUMBER: _ClassVar[int]
must_set: _descriptor.FieldDescriptor
DISTINCT_FIELD_NUMBER: _ClassVar[int]
distinct: _descriptor.FieldDescriptor
AXIS_ORDER_FIELD_NUMBER: _ClassVar[int]
axis_order: _descriptor.FieldDescriptor
GROUP_FIELD_NUMBER: _ClassVar[int]
group: _descriptor.FieldDescriptor
ALWAYS_ON_FIELD_NUMBER: _ClassVar[int]
always_on: _descriptor.FieldDescriptor
DECIDES_FIELD_NUMBER: _ClassVar[int]
decides: _descriptor.FieldDescriptor
EXCLUDES_FIELD_NUMBER: _ClassVar[int]
excludes: _descriptor.FieldDescriptor
EXPERT_AXIS_FIELD_NUMBER: _ClassVar[int]
expert_axis: _descriptor.FieldDescriptor
FIELDS_HINT_FIELD_NUMBER: _ClassVar[int]
fields_hint: _descriptor.FieldDescriptor
