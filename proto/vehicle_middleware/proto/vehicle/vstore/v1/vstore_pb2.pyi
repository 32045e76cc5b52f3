from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AddKeysRequest(_message.Message):
    __slots__ = ("names", "claim")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    claim: bool
    def __init__(self, names: _Optional[_Iterable[str]] = ..., claim: _Optional[bool] = ...) -> None: ...

class KeyId(_message.Message):
    __slots__ = ("name", "id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: int
    def __init__(self, name: _Optional[str] = ..., id: _Optional[int] = ...) -> None: ...

class AddKeysResponse(_message.Message):
    __slots__ = ("keys", "keys_version", "head")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    KEYS_VERSION_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[KeyId]
    keys_version: str
    head: str
    def __init__(self, keys: _Optional[_Iterable[_Union[KeyId, _Mapping]]] = ..., keys_version: _Optional[str] = ..., head: _Optional[str] = ...) -> None: ...

class RemoveKeysRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class RemoveKeysResponse(_message.Message):
    __slots__ = ("removed", "not_found", "head")
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    removed: _containers.RepeatedCompositeFieldContainer[KeyId]
    not_found: _containers.RepeatedScalarFieldContainer[str]
    head: str
    def __init__(self, removed: _Optional[_Iterable[_Union[KeyId, _Mapping]]] = ..., not_found: _Optional[_Iterable[str]] = ..., head: _Optional[str] = ...) -> None: ...

class Update(_message.Message):
    __slots__ = ("name", "id", "data", "time_ns", "if_version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TIME_NS_FIELD_NUMBER: _ClassVar[int]
    IF_VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: int
    data: bytes
    time_ns: int
    if_version: int
    def __init__(self, name: _Optional[str] = ..., id: _Optional[int] = ..., data: _Optional[bytes] = ..., time_ns: _Optional[int] = ..., if_version: _Optional[int] = ...) -> None: ...

class SetRequest(_message.Message):
    __slots__ = ("updates", "if_head")
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    IF_HEAD_FIELD_NUMBER: _ClassVar[int]
    updates: _containers.RepeatedCompositeFieldContainer[Update]
    if_head: str
    def __init__(self, updates: _Optional[_Iterable[_Union[Update, _Mapping]]] = ..., if_head: _Optional[str] = ...) -> None: ...

class SetResult(_message.Message):
    __slots__ = ("key_id", "version", "conflict", "head_conflict", "head")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_FIELD_NUMBER: _ClassVar[int]
    HEAD_CONFLICT_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    key_id: int
    version: int
    conflict: bool
    head_conflict: bool
    head: str
    def __init__(self, key_id: _Optional[int] = ..., version: _Optional[int] = ..., conflict: _Optional[bool] = ..., head_conflict: _Optional[bool] = ..., head: _Optional[str] = ...) -> None: ...

class SetResponse(_message.Message):
    __slots__ = ("results", "head")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SetResult]
    head: str
    def __init__(self, results: _Optional[_Iterable[_Union[SetResult, _Mapping]]] = ..., head: _Optional[str] = ...) -> None: ...

class IdUpdate(_message.Message):
    __slots__ = ("id", "data", "time_ns")
    ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TIME_NS_FIELD_NUMBER: _ClassVar[int]
    id: int
    data: bytes
    time_ns: int
    def __init__(self, id: _Optional[int] = ..., data: _Optional[bytes] = ..., time_ns: _Optional[int] = ...) -> None: ...

class PublishRequest(_message.Message):
    __slots__ = ("updates", "flushing")
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    FLUSHING_FIELD_NUMBER: _ClassVar[int]
    updates: _containers.RepeatedCompositeFieldContainer[IdUpdate]
    flushing: bool
    def __init__(self, updates: _Optional[_Iterable[_Union[IdUpdate, _Mapping]]] = ..., flushing: _Optional[bool] = ...) -> None: ...

class PublishSummary(_message.Message):
    __slots__ = ("batches", "updates", "head")
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    batches: int
    updates: int
    head: str
    def __init__(self, batches: _Optional[int] = ..., updates: _Optional[int] = ..., head: _Optional[str] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class Value(_message.Message):
    __slots__ = ("name", "id", "data", "version", "time_ns", "no_provider")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TIME_NS_FIELD_NUMBER: _ClassVar[int]
    NO_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: int
    data: bytes
    version: int
    time_ns: int
    no_provider: bool
    def __init__(self, name: _Optional[str] = ..., id: _Optional[int] = ..., data: _Optional[bytes] = ..., version: _Optional[int] = ..., time_ns: _Optional[int] = ..., no_provider: _Optional[bool] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("values", "not_found", "head")
    VALUES_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[Value]
    not_found: _containers.RepeatedScalarFieldContainer[str]
    head: str
    def __init__(self, values: _Optional[_Iterable[_Union[Value, _Mapping]]] = ..., not_found: _Optional[_Iterable[str]] = ..., head: _Optional[str] = ...) -> None: ...

class ListKeysRequest(_message.Message):
    __slots__ = ("prefix", "limit", "start_after")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    START_AFTER_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    limit: int
    start_after: str
    def __init__(self, prefix: _Optional[str] = ..., limit: _Optional[int] = ..., start_after: _Optional[str] = ...) -> None: ...

class ListKeysResponse(_message.Message):
    __slots__ = ("keys", "next_start_after")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    NEXT_START_AFTER_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[KeyId]
    next_start_after: str
    def __init__(self, keys: _Optional[_Iterable[_Union[KeyId, _Mapping]]] = ..., next_start_after: _Optional[str] = ...) -> None: ...

class WatchDemandRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class KeyDemand(_message.Message):
    __slots__ = ("key", "name", "watched", "min_interval_ms")
    KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    WATCHED_FIELD_NUMBER: _ClassVar[int]
    MIN_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    key: int
    name: str
    watched: bool
    min_interval_ms: int
    def __init__(self, key: _Optional[int] = ..., name: _Optional[str] = ..., watched: _Optional[bool] = ..., min_interval_ms: _Optional[int] = ...) -> None: ...

class DemandUpdate(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[KeyDemand]
    def __init__(self, keys: _Optional[_Iterable[_Union[KeyDemand, _Mapping]]] = ...) -> None: ...
