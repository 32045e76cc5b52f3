from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetStatsRequest(_message.Message):
    __slots__ = ("top_keys", "keys")
    TOP_KEYS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    top_keys: int
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, top_keys: _Optional[int] = ..., keys: _Optional[_Iterable[str]] = ...) -> None: ...

class Stats(_message.Message):
    __slots__ = ("boot_id", "time_ns", "process", "apps", "keys", "rate_window_s", "extra")
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_NS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_FIELD_NUMBER: _ClassVar[int]
    APPS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    RATE_WINDOW_S_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    boot_id: str
    time_ns: int
    process: Process
    apps: _containers.RepeatedCompositeFieldContainer[AppStats]
    keys: _containers.RepeatedCompositeFieldContainer[KeyStats]
    rate_window_s: float
    extra: _containers.RepeatedCompositeFieldContainer[Figure]
    def __init__(self, boot_id: _Optional[str] = ..., time_ns: _Optional[int] = ..., process: _Optional[_Union[Process, _Mapping]] = ..., apps: _Optional[_Iterable[_Union[AppStats, _Mapping]]] = ..., keys: _Optional[_Iterable[_Union[KeyStats, _Mapping]]] = ..., rate_window_s: _Optional[float] = ..., extra: _Optional[_Iterable[_Union[Figure, _Mapping]]] = ...) -> None: ...

class Process(_message.Message):
    __slots__ = ("apps", "publish_streams", "keys", "watched_keys", "subscriptions", "event_budget_total", "event_budget_used", "queued_events", "journal", "journal_records_written", "journal_records_dropped", "cpu_seconds", "rss_bytes", "uptime_s")
    APPS_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_STREAMS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    WATCHED_KEYS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    EVENT_BUDGET_TOTAL_FIELD_NUMBER: _ClassVar[int]
    EVENT_BUDGET_USED_FIELD_NUMBER: _ClassVar[int]
    QUEUED_EVENTS_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_RECORDS_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_RECORDS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    apps: int
    publish_streams: int
    keys: int
    watched_keys: int
    subscriptions: int
    event_budget_total: int
    event_budget_used: int
    queued_events: int
    journal: bool
    journal_records_written: int
    journal_records_dropped: int
    cpu_seconds: float
    rss_bytes: int
    uptime_s: float
    def __init__(self, apps: _Optional[int] = ..., publish_streams: _Optional[int] = ..., keys: _Optional[int] = ..., watched_keys: _Optional[int] = ..., subscriptions: _Optional[int] = ..., event_budget_total: _Optional[int] = ..., event_budget_used: _Optional[int] = ..., queued_events: _Optional[int] = ..., journal: _Optional[bool] = ..., journal_records_written: _Optional[int] = ..., journal_records_dropped: _Optional[int] = ..., cpu_seconds: _Optional[float] = ..., rss_bytes: _Optional[int] = ..., uptime_s: _Optional[float] = ...) -> None: ...

class QueueStats(_message.Message):
    __slots__ = ("queue", "depth", "high_water", "min_length", "max_length", "delivered", "evicted", "lost", "discarded", "oldest_age_s")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATER_FIELD_NUMBER: _ClassVar[int]
    MIN_LENGTH_FIELD_NUMBER: _ClassVar[int]
    MAX_LENGTH_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    EVICTED_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    DISCARDED_FIELD_NUMBER: _ClassVar[int]
    OLDEST_AGE_S_FIELD_NUMBER: _ClassVar[int]
    queue: int
    depth: int
    high_water: int
    min_length: int
    max_length: int
    delivered: int
    evicted: int
    lost: int
    discarded: int
    oldest_age_s: float
    def __init__(self, queue: _Optional[int] = ..., depth: _Optional[int] = ..., high_water: _Optional[int] = ..., min_length: _Optional[int] = ..., max_length: _Optional[int] = ..., delivered: _Optional[int] = ..., evicted: _Optional[int] = ..., lost: _Optional[int] = ..., discarded: _Optional[int] = ..., oldest_age_s: _Optional[float] = ...) -> None: ...

class AppStats(_message.Message):
    __slots__ = ("app", "queues", "bytes_sent", "subscriptions", "lifecycle_pending", "dropping")
    APP_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_PENDING_FIELD_NUMBER: _ClassVar[int]
    DROPPING_FIELD_NUMBER: _ClassVar[int]
    app: str
    queues: _containers.RepeatedCompositeFieldContainer[QueueStats]
    bytes_sent: int
    subscriptions: int
    lifecycle_pending: int
    dropping: bool
    def __init__(self, app: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[QueueStats, _Mapping]]] = ..., bytes_sent: _Optional[int] = ..., subscriptions: _Optional[int] = ..., lifecycle_pending: _Optional[int] = ..., dropping: _Optional[bool] = ...) -> None: ...

class KeyStats(_message.Message):
    __slots__ = ("name", "key_id", "writes_per_s", "writes", "subscribers")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    WRITES_PER_S_FIELD_NUMBER: _ClassVar[int]
    WRITES_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    key_id: int
    writes_per_s: float
    writes: int
    subscribers: int
    def __init__(self, name: _Optional[str] = ..., key_id: _Optional[int] = ..., writes_per_s: _Optional[float] = ..., writes: _Optional[int] = ..., subscribers: _Optional[int] = ...) -> None: ...

class Figure(_message.Message):
    __slots__ = ("name", "help", "kind", "labels", "value")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    HELP_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    help: str
    kind: str
    labels: _containers.ScalarMap[str, str]
    value: float
    def __init__(self, name: _Optional[str] = ..., help: _Optional[str] = ..., kind: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., value: _Optional[float] = ...) -> None: ...
