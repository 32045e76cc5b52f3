from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Trigger(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRIGGER_ON_CHANGE: _ClassVar[Trigger]
    TRIGGER_ON_UPDATE: _ClassVar[Trigger]

class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STATUS_OK: _ClassVar[Status]
    STATUS_NOT_FOUND: _ClassVar[Status]
    STATUS_PERMISSION_DENIED: _ClassVar[Status]
    STATUS_INVALID_ARGUMENT: _ClassVar[Status]
TRIGGER_ON_CHANGE: Trigger
TRIGGER_ON_UPDATE: Trigger
STATUS_OK: Status
STATUS_NOT_FOUND: Status
STATUS_PERMISSION_DENIED: Status
STATUS_INVALID_ARGUMENT: Status

class QueueConfig(_message.Message):
    __slots__ = ("queue", "min_length", "max_length")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    MIN_LENGTH_FIELD_NUMBER: _ClassVar[int]
    MAX_LENGTH_FIELD_NUMBER: _ClassVar[int]
    queue: int
    min_length: int
    max_length: int
    def __init__(self, queue: _Optional[int] = ..., min_length: _Optional[int] = ..., max_length: _Optional[int] = ...) -> None: ...

class GetEventsRequest(_message.Message):
    __slots__ = ("queues",)
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueConfig]
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueConfig, _Mapping]]] = ...) -> None: ...

class EventsRequest(_message.Message):
    __slots__ = ("open", "read")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    open: OpenEvents
    read: int
    def __init__(self, open: _Optional[_Union[OpenEvents, _Mapping]] = ..., read: _Optional[int] = ...) -> None: ...

class OpenEvents(_message.Message):
    __slots__ = ("queues", "window")
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueConfig]
    window: int
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueConfig, _Mapping]]] = ..., window: _Optional[int] = ...) -> None: ...

class StreamStarted(_message.Message):
    __slots__ = ("boot_id", "queues", "head", "window")
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    boot_id: str
    queues: _containers.RepeatedCompositeFieldContainer[QueueConfig]
    head: str
    window: int
    def __init__(self, boot_id: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[QueueConfig, _Mapping]]] = ..., head: _Optional[str] = ..., window: _Optional[int] = ...) -> None: ...

class DataUpdated(_message.Message):
    __slots__ = ("key", "seq", "time_ns", "data", "queue", "writes")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_NS_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    WRITES_FIELD_NUMBER: _ClassVar[int]
    key: int
    seq: int
    time_ns: int
    data: bytes
    queue: int
    writes: int
    def __init__(self, key: _Optional[int] = ..., seq: _Optional[int] = ..., time_ns: _Optional[int] = ..., data: _Optional[bytes] = ..., queue: _Optional[int] = ..., writes: _Optional[int] = ...) -> None: ...

class KeyAdded(_message.Message):
    __slots__ = ("key", "name")
    KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    key: int
    name: str
    def __init__(self, key: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...

class KeyRemoved(_message.Message):
    __slots__ = ("key", "name")
    KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    key: int
    name: str
    def __init__(self, key: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...

class ResyncRequired(_message.Message):
    __slots__ = ("lost",)
    LOST_FIELD_NUMBER: _ClassVar[int]
    lost: int
    def __init__(self, lost: _Optional[int] = ...) -> None: ...

class KeyStale(_message.Message):
    __slots__ = ("key", "last_write_ns", "period_ns")
    KEY_FIELD_NUMBER: _ClassVar[int]
    LAST_WRITE_NS_FIELD_NUMBER: _ClassVar[int]
    PERIOD_NS_FIELD_NUMBER: _ClassVar[int]
    key: int
    last_write_ns: int
    period_ns: int
    def __init__(self, key: _Optional[int] = ..., last_write_ns: _Optional[int] = ..., period_ns: _Optional[int] = ...) -> None: ...

class KeyFresh(_message.Message):
    __slots__ = ("key", "write_ns")
    KEY_FIELD_NUMBER: _ClassVar[int]
    WRITE_NS_FIELD_NUMBER: _ClassVar[int]
    key: int
    write_ns: int
    def __init__(self, key: _Optional[int] = ..., write_ns: _Optional[int] = ...) -> None: ...

class ProviderGone(_message.Message):
    __slots__ = ("provider", "keys")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    provider: str
    keys: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, provider: _Optional[str] = ..., keys: _Optional[_Iterable[int]] = ...) -> None: ...

class ProviderBack(_message.Message):
    __slots__ = ("provider", "keys")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    provider: str
    keys: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, provider: _Optional[str] = ..., keys: _Optional[_Iterable[int]] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("started", "data_updated", "key_added", "key_removed", "resync", "key_stale", "key_fresh", "provider_gone", "provider_back")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    DATA_UPDATED_FIELD_NUMBER: _ClassVar[int]
    KEY_ADDED_FIELD_NUMBER: _ClassVar[int]
    KEY_REMOVED_FIELD_NUMBER: _ClassVar[int]
    RESYNC_FIELD_NUMBER: _ClassVar[int]
    KEY_STALE_FIELD_NUMBER: _ClassVar[int]
    KEY_FRESH_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_GONE_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_BACK_FIELD_NUMBER: _ClassVar[int]
    started: StreamStarted
    data_updated: DataUpdated
    key_added: KeyAdded
    key_removed: KeyRemoved
    resync: ResyncRequired
    key_stale: KeyStale
    key_fresh: KeyFresh
    provider_gone: ProviderGone
    provider_back: ProviderBack
    def __init__(self, started: _Optional[_Union[StreamStarted, _Mapping]] = ..., data_updated: _Optional[_Union[DataUpdated, _Mapping]] = ..., key_added: _Optional[_Union[KeyAdded, _Mapping]] = ..., key_removed: _Optional[_Union[KeyRemoved, _Mapping]] = ..., resync: _Optional[_Union[ResyncRequired, _Mapping]] = ..., key_stale: _Optional[_Union[KeyStale, _Mapping]] = ..., key_fresh: _Optional[_Union[KeyFresh, _Mapping]] = ..., provider_gone: _Optional[_Union[ProviderGone, _Mapping]] = ..., provider_back: _Optional[_Union[ProviderBack, _Mapping]] = ...) -> None: ...

class EventBatch(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ...) -> None: ...

class Subscription(_message.Message):
    __slots__ = ("key", "queue", "trigger", "want_current", "filter")
    KEY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    WANT_CURRENT_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    key: str
    queue: int
    trigger: Trigger
    want_current: bool
    filter: Filter
    def __init__(self, key: _Optional[str] = ..., queue: _Optional[int] = ..., trigger: _Optional[_Union[Trigger, str]] = ..., want_current: _Optional[bool] = ..., filter: _Optional[_Union[Filter, _Mapping]] = ...) -> None: ...

class Filter(_message.Message):
    __slots__ = ("min_interval_ms", "threshold", "range")
    MIN_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    min_interval_ms: int
    threshold: float
    range: Range
    def __init__(self, min_interval_ms: _Optional[int] = ..., threshold: _Optional[float] = ..., range: _Optional[_Union[Range, _Mapping]] = ...) -> None: ...

class Range(_message.Message):
    __slots__ = ("lo", "hi")
    LO_FIELD_NUMBER: _ClassVar[int]
    HI_FIELD_NUMBER: _ClassVar[int]
    lo: float
    hi: float
    def __init__(self, lo: _Optional[float] = ..., hi: _Optional[float] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("subscriptions",)
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    subscriptions: _containers.RepeatedCompositeFieldContainer[Subscription]
    def __init__(self, subscriptions: _Optional[_Iterable[_Union[Subscription, _Mapping]]] = ...) -> None: ...

class SubscriptionResult(_message.Message):
    __slots__ = ("key", "key_id", "status", "current", "detail", "seq", "no_provider")
    KEY_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    NO_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    key: str
    key_id: int
    status: Status
    current: bytes
    detail: str
    seq: int
    no_provider: bool
    def __init__(self, key: _Optional[str] = ..., key_id: _Optional[int] = ..., status: _Optional[_Union[Status, str]] = ..., current: _Optional[bytes] = ..., detail: _Optional[str] = ..., seq: _Optional[int] = ..., no_provider: _Optional[bool] = ...) -> None: ...

class RegisterResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SubscriptionResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SubscriptionResult, _Mapping]]] = ...) -> None: ...

class DeregisterRequest(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, keys: _Optional[_Iterable[str]] = ...) -> None: ...

class DeregisterResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SubscriptionResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SubscriptionResult, _Mapping]]] = ...) -> None: ...

class GetSubscriptionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SubscriptionInfo(_message.Message):
    __slots__ = ("key", "key_id", "queue", "trigger", "filter")
    KEY_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    key: str
    key_id: int
    queue: int
    trigger: Trigger
    filter: Filter
    def __init__(self, key: _Optional[str] = ..., key_id: _Optional[int] = ..., queue: _Optional[int] = ..., trigger: _Optional[_Union[Trigger, str]] = ..., filter: _Optional[_Union[Filter, _Mapping]] = ...) -> None: ...

class GetSubscriptionsResponse(_message.Message):
    __slots__ = ("subscriptions",)
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    subscriptions: _containers.RepeatedCompositeFieldContainer[SubscriptionInfo]
    def __init__(self, subscriptions: _Optional[_Iterable[_Union[SubscriptionInfo, _Mapping]]] = ...) -> None: ...
