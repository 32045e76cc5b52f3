from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RecoveryReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RECOVERY_REASON_UNSPECIFIED: _ClassVar[RecoveryReason]
    RECOVERY_REASON_NOT_IN_HISTORY: _ClassVar[RecoveryReason]
    RECOVERY_REASON_BOOT_ENDED: _ClassVar[RecoveryReason]
    RECOVERY_REASON_BOOT_NOT_HELD: _ClassVar[RecoveryReason]
    RECOVERY_REASON_CUT_LOOSE: _ClassVar[RecoveryReason]
RECOVERY_REASON_UNSPECIFIED: RecoveryReason
RECOVERY_REASON_NOT_IN_HISTORY: RecoveryReason
RECOVERY_REASON_BOOT_ENDED: RecoveryReason
RECOVERY_REASON_BOOT_NOT_HELD: RecoveryReason
RECOVERY_REASON_CUT_LOOSE: RecoveryReason

class RegisterConsumerRequest(_message.Message):
    __slots__ = ("component", "from_newest")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    FROM_NEWEST_FIELD_NUMBER: _ClassVar[int]
    component: str
    from_newest: bool
    def __init__(self, component: _Optional[str] = ..., from_newest: _Optional[bool] = ...) -> None: ...

class Position(_message.Message):
    __slots__ = ("boot_id", "offset")
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    boot_id: str
    offset: int
    def __init__(self, boot_id: _Optional[str] = ..., offset: _Optional[int] = ...) -> None: ...

class RegisterConsumerResponse(_message.Message):
    __slots__ = ("created", "position", "vehicle_id", "boot_id")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    VEHICLE_ID_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    created: bool
    position: Position
    vehicle_id: str
    boot_id: str
    def __init__(self, created: _Optional[bool] = ..., position: _Optional[_Union[Position, _Mapping]] = ..., vehicle_id: _Optional[str] = ..., boot_id: _Optional[str] = ...) -> None: ...

class UnregisterConsumerRequest(_message.Message):
    __slots__ = ("component",)
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    component: str
    def __init__(self, component: _Optional[str] = ...) -> None: ...

class UnregisterConsumerResponse(_message.Message):
    __slots__ = ("was_registered",)
    WAS_REGISTERED_FIELD_NUMBER: _ClassVar[int]
    was_registered: bool
    def __init__(self, was_registered: _Optional[bool] = ...) -> None: ...

class ListConsumersRequest(_message.Message):
    __slots__ = ("all_apps",)
    ALL_APPS_FIELD_NUMBER: _ClassVar[int]
    all_apps: bool
    def __init__(self, all_apps: _Optional[bool] = ...) -> None: ...

class ConsumerInfo(_message.Message):
    __slots__ = ("app", "component", "position", "registered_ns", "acknowledged_ns", "unacknowledged_bytes", "cuts", "lost")
    APP_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_NS_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGED_NS_FIELD_NUMBER: _ClassVar[int]
    UNACKNOWLEDGED_BYTES_FIELD_NUMBER: _ClassVar[int]
    CUTS_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    app: str
    component: str
    position: Position
    registered_ns: int
    acknowledged_ns: int
    unacknowledged_bytes: int
    cuts: int
    lost: _containers.RepeatedCompositeFieldContainer[LostRange]
    def __init__(self, app: _Optional[str] = ..., component: _Optional[str] = ..., position: _Optional[_Union[Position, _Mapping]] = ..., registered_ns: _Optional[int] = ..., acknowledged_ns: _Optional[int] = ..., unacknowledged_bytes: _Optional[int] = ..., cuts: _Optional[int] = ..., lost: _Optional[_Iterable[_Union[LostRange, _Mapping]]] = ...) -> None: ...

class ListConsumersResponse(_message.Message):
    __slots__ = ("consumers", "vehicle_id", "boot_id")
    CONSUMERS_FIELD_NUMBER: _ClassVar[int]
    VEHICLE_ID_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    consumers: _containers.RepeatedCompositeFieldContainer[ConsumerInfo]
    vehicle_id: str
    boot_id: str
    def __init__(self, consumers: _Optional[_Iterable[_Union[ConsumerInfo, _Mapping]]] = ..., vehicle_id: _Optional[str] = ..., boot_id: _Optional[str] = ...) -> None: ...

class PollRequest(_message.Message):
    __slots__ = ("component", "boot_id", "offset", "want", "max", "ack")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    WANT_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    component: str
    boot_id: str
    offset: int
    want: _containers.RepeatedScalarFieldContainer[str]
    max: int
    ack: Position
    def __init__(self, component: _Optional[str] = ..., boot_id: _Optional[str] = ..., offset: _Optional[int] = ..., want: _Optional[_Iterable[str]] = ..., max: _Optional[int] = ..., ack: _Optional[_Union[Position, _Mapping]] = ...) -> None: ...

class PollResponse(_message.Message):
    __slots__ = ("records", "nothing_new", "recovery", "vehicle_id")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    NOTHING_NEW_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_FIELD_NUMBER: _ClassVar[int]
    VEHICLE_ID_FIELD_NUMBER: _ClassVar[int]
    records: Records
    nothing_new: NothingNew
    recovery: Recovery
    vehicle_id: str
    def __init__(self, records: _Optional[_Union[Records, _Mapping]] = ..., nothing_new: _Optional[_Union[NothingNew, _Mapping]] = ..., recovery: _Optional[_Union[Recovery, _Mapping]] = ..., vehicle_id: _Optional[str] = ...) -> None: ...

class Records(_message.Message):
    __slots__ = ("boot_id", "lines", "last_offset", "newest_boot_id", "newest_offset", "caught_up")
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    NEWEST_BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    NEWEST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    boot_id: str
    lines: _containers.RepeatedScalarFieldContainer[bytes]
    last_offset: int
    newest_boot_id: str
    newest_offset: int
    caught_up: bool
    def __init__(self, boot_id: _Optional[str] = ..., lines: _Optional[_Iterable[bytes]] = ..., last_offset: _Optional[int] = ..., newest_boot_id: _Optional[str] = ..., newest_offset: _Optional[int] = ..., caught_up: _Optional[bool] = ...) -> None: ...

class NothingNew(_message.Message):
    __slots__ = ("boot_id", "offset")
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    boot_id: str
    offset: int
    def __init__(self, boot_id: _Optional[str] = ..., offset: _Optional[int] = ...) -> None: ...

class Recovery(_message.Message):
    __slots__ = ("boot_id", "n0", "n1", "reason", "message", "lost", "current_boot_id")
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    N0_FIELD_NUMBER: _ClassVar[int]
    N1_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    CURRENT_BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    boot_id: str
    n0: int
    n1: int
    reason: RecoveryReason
    message: str
    lost: _containers.RepeatedCompositeFieldContainer[LostRange]
    current_boot_id: str
    def __init__(self, boot_id: _Optional[str] = ..., n0: _Optional[int] = ..., n1: _Optional[int] = ..., reason: _Optional[_Union[RecoveryReason, str]] = ..., message: _Optional[str] = ..., lost: _Optional[_Iterable[_Union[LostRange, _Mapping]]] = ..., current_boot_id: _Optional[str] = ...) -> None: ...

class LostRange(_message.Message):
    __slots__ = ("boot_id", "from_offset", "to_offset", "count", "reason")
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TO_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    boot_id: str
    from_offset: int
    to_offset: int
    count: int
    reason: str
    def __init__(self, boot_id: _Optional[str] = ..., from_offset: _Optional[int] = ..., to_offset: _Optional[int] = ..., count: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class FollowRequest(_message.Message):
    __slots__ = ("start", "ack")
    START_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    start: FollowStart
    ack: FollowAck
    def __init__(self, start: _Optional[_Union[FollowStart, _Mapping]] = ..., ack: _Optional[_Union[FollowAck, _Mapping]] = ...) -> None: ...

class FollowStart(_message.Message):
    __slots__ = ("component", "boot_id", "offset", "want", "max", "window")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    WANT_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    component: str
    boot_id: str
    offset: int
    want: _containers.RepeatedScalarFieldContainer[str]
    max: int
    window: int
    def __init__(self, component: _Optional[str] = ..., boot_id: _Optional[str] = ..., offset: _Optional[int] = ..., want: _Optional[_Iterable[str]] = ..., max: _Optional[int] = ..., window: _Optional[int] = ...) -> None: ...

class FollowAck(_message.Message):
    __slots__ = ("seq",)
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...

class FollowBatch(_message.Message):
    __slots__ = ("seq", "records", "recovery", "vehicle_id")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_FIELD_NUMBER: _ClassVar[int]
    VEHICLE_ID_FIELD_NUMBER: _ClassVar[int]
    seq: int
    records: Records
    recovery: Recovery
    vehicle_id: str
    def __init__(self, seq: _Optional[int] = ..., records: _Optional[_Union[Records, _Mapping]] = ..., recovery: _Optional[_Union[Recovery, _Mapping]] = ..., vehicle_id: _Optional[str] = ...) -> None: ...
