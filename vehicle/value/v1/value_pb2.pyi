from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class Value(_message.Message):
    __slots__ = ("bool", "int", "float", "string")
    BOOL_FIELD_NUMBER: _ClassVar[int]
    INT_FIELD_NUMBER: _ClassVar[int]
    FLOAT_FIELD_NUMBER: _ClassVar[int]
    STRING_FIELD_NUMBER: _ClassVar[int]
    bool: bool
    int: int
    float: float
    string: str
    def __init__(self, bool: _Optional[bool] = ..., int: _Optional[int] = ..., float: _Optional[float] = ..., string: _Optional[str] = ...) -> None: ...
