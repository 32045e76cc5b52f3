from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FailureCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAILURE_CODE_UNSPECIFIED: _ClassVar[FailureCode]
    FAILURE_CODE_SENSOR_FAULT: _ClassVar[FailureCode]
    FAILURE_CODE_OUT_OF_RANGE: _ClassVar[FailureCode]
    FAILURE_CODE_NOT_AVAILABLE: _ClassVar[FailureCode]
    FAILURE_CODE_NETWORK_ERROR: _ClassVar[FailureCode]
    FAILURE_CODE_OVERLOAD: _ClassVar[FailureCode]
FAILURE_CODE_UNSPECIFIED: FailureCode
FAILURE_CODE_SENSOR_FAULT: FailureCode
FAILURE_CODE_OUT_OF_RANGE: FailureCode
FAILURE_CODE_NOT_AVAILABLE: FailureCode
FAILURE_CODE_NETWORK_ERROR: FailureCode
FAILURE_CODE_OVERLOAD: FailureCode

class Value(_message.Message):
    __slots__ = ("bool", "int", "float", "string", "uint", "float32", "bools", "ints", "uints", "floats32", "floats", "strings", "failure")
    BOOL_FIELD_NUMBER: _ClassVar[int]
    INT_FIELD_NUMBER: _ClassVar[int]
    FLOAT_FIELD_NUMBER: _ClassVar[int]
    STRING_FIELD_NUMBER: _ClassVar[int]
    UINT_FIELD_NUMBER: _ClassVar[int]
    FLOAT32_FIELD_NUMBER: _ClassVar[int]
    BOOLS_FIELD_NUMBER: _ClassVar[int]
    INTS_FIELD_NUMBER: _ClassVar[int]
    UINTS_FIELD_NUMBER: _ClassVar[int]
    FLOATS32_FIELD_NUMBER: _ClassVar[int]
    FLOATS_FIELD_NUMBER: _ClassVar[int]
    STRINGS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    bool: bool
    int: int
    float: float
    string: str
    uint: int
    float32: float
    bools: BoolArray
    ints: IntArray
    uints: UintArray
    floats32: Float32Array
    floats: DoubleArray
    strings: StringArray
    failure: Failure
    def __init__(self, bool: _Optional[bool] = ..., int: _Optional[int] = ..., float: _Optional[float] = ..., string: _Optional[str] = ..., uint: _Optional[int] = ..., float32: _Optional[float] = ..., bools: _Optional[_Union[BoolArray, _Mapping]] = ..., ints: _Optional[_Union[IntArray, _Mapping]] = ..., uints: _Optional[_Union[UintArray, _Mapping]] = ..., floats32: _Optional[_Union[Float32Array, _Mapping]] = ..., floats: _Optional[_Union[DoubleArray, _Mapping]] = ..., strings: _Optional[_Union[StringArray, _Mapping]] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ...) -> None: ...

class Failure(_message.Message):
    __slots__ = ("code", "detail")
    CODE_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    code: FailureCode
    detail: str
    def __init__(self, code: _Optional[_Union[FailureCode, str]] = ..., detail: _Optional[str] = ...) -> None: ...

class BoolArray(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, values: _Optional[_Iterable[bool]] = ...) -> None: ...

class IntArray(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, values: _Optional[_Iterable[int]] = ...) -> None: ...

class UintArray(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, values: _Optional[_Iterable[int]] = ...) -> None: ...

class Float32Array(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class DoubleArray(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class StringArray(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...
