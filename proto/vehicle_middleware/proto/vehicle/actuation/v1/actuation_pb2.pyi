from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ActuateRequest(_message.Message):
    __slots__ = ("targets",)
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    targets: _containers.RepeatedCompositeFieldContainer[Target]
    def __init__(self, targets: _Optional[_Iterable[_Union[Target, _Mapping]]] = ...) -> None: ...

class Target(_message.Message):
    __slots__ = ("name", "data")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    data: bytes
    def __init__(self, name: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class ActuateResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ProviderMessage(_message.Message):
    __slots__ = ("claim", "answer")
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    claim: Claim
    answer: Answer
    def __init__(self, claim: _Optional[_Union[Claim, _Mapping]] = ..., answer: _Optional[_Union[Answer, _Mapping]] = ...) -> None: ...

class Claim(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class Answer(_message.Message):
    __slots__ = ("request_id", "refused")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    refused: str
    def __init__(self, request_id: _Optional[int] = ..., refused: _Optional[str] = ...) -> None: ...

class ProviderInstruction(_message.Message):
    __slots__ = ("claimed", "request")
    CLAIMED_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    claimed: Claimed
    request: ActuationRequest
    def __init__(self, claimed: _Optional[_Union[Claimed, _Mapping]] = ..., request: _Optional[_Union[ActuationRequest, _Mapping]] = ...) -> None: ...

class Claimed(_message.Message):
    __slots__ = ("actuators",)
    ACTUATORS_FIELD_NUMBER: _ClassVar[int]
    actuators: _containers.RepeatedCompositeFieldContainer[ClaimedActuator]
    def __init__(self, actuators: _Optional[_Iterable[_Union[ClaimedActuator, _Mapping]]] = ...) -> None: ...

class ClaimedActuator(_message.Message):
    __slots__ = ("name", "id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: int
    def __init__(self, name: _Optional[str] = ..., id: _Optional[int] = ...) -> None: ...

class ActuationRequest(_message.Message):
    __slots__ = ("request_id", "targets")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    targets: _containers.RepeatedCompositeFieldContainer[ActuationTarget]
    def __init__(self, request_id: _Optional[int] = ..., targets: _Optional[_Iterable[_Union[ActuationTarget, _Mapping]]] = ...) -> None: ...

class ActuationTarget(_message.Message):
    __slots__ = ("name", "id", "data")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: int
    data: bytes
    def __init__(self, name: _Optional[str] = ..., id: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...
