from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KIND_WRITE: _ClassVar[Kind]
    KIND_GUARDED: _ClassVar[Kind]
    KIND_VERDICT: _ClassVar[Kind]
KIND_WRITE: Kind
KIND_GUARDED: Kind
KIND_VERDICT: Kind

class Write(_message.Message):
    __slots__ = ("key", "data", "version", "time_ns")
    KEY_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TIME_NS_FIELD_NUMBER: _ClassVar[int]
    key: str
    data: bytes
    version: int
    time_ns: int
    def __init__(self, key: _Optional[str] = ..., data: _Optional[bytes] = ..., version: _Optional[int] = ..., time_ns: _Optional[int] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("origin", "boot", "seq", "prev", "seen", "stamp", "kind", "ref", "won", "writes", "hash")
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    BOOT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PREV_FIELD_NUMBER: _ClassVar[int]
    SEEN_FIELD_NUMBER: _ClassVar[int]
    STAMP_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    WON_FIELD_NUMBER: _ClassVar[int]
    WRITES_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    origin: str
    boot: int
    seq: int
    prev: bytes
    seen: bytes
    stamp: int
    kind: Kind
    ref: bytes
    won: bool
    writes: _containers.RepeatedCompositeFieldContainer[Write]
    hash: bytes
    def __init__(self, origin: _Optional[str] = ..., boot: _Optional[int] = ..., seq: _Optional[int] = ..., prev: _Optional[bytes] = ..., seen: _Optional[bytes] = ..., stamp: _Optional[int] = ..., kind: _Optional[_Union[Kind, str]] = ..., ref: _Optional[bytes] = ..., won: _Optional[bool] = ..., writes: _Optional[_Iterable[_Union[Write, _Mapping]]] = ..., hash: _Optional[bytes] = ...) -> None: ...

class Leaf(_message.Message):
    __slots__ = ("origin", "boot", "seq", "hash")
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    BOOT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    origin: str
    boot: int
    seq: int
    hash: bytes
    def __init__(self, origin: _Optional[str] = ..., boot: _Optional[int] = ..., seq: _Optional[int] = ..., hash: _Optional[bytes] = ...) -> None: ...

class Inv(_message.Message):
    __slots__ = ("leaves",)
    LEAVES_FIELD_NUMBER: _ClassVar[int]
    leaves: _containers.RepeatedCompositeFieldContainer[Leaf]
    def __init__(self, leaves: _Optional[_Iterable[_Union[Leaf, _Mapping]]] = ...) -> None: ...

class Horizon(_message.Message):
    __slots__ = ("origin", "boot", "seq", "hash", "stamp")
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    BOOT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    STAMP_FIELD_NUMBER: _ClassVar[int]
    origin: str
    boot: int
    seq: int
    hash: bytes
    stamp: int
    def __init__(self, origin: _Optional[str] = ..., boot: _Optional[int] = ..., seq: _Optional[int] = ..., hash: _Optional[bytes] = ..., stamp: _Optional[int] = ...) -> None: ...

class GetData(_message.Message):
    __slots__ = ("origin", "boot", "seq")
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    BOOT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    origin: str
    boot: int
    seq: int
    def __init__(self, origin: _Optional[str] = ..., boot: _Optional[int] = ..., seq: _Optional[int] = ...) -> None: ...

class KeyState(_message.Message):
    __slots__ = ("key", "data", "version", "time_ns", "stamp", "origin")
    KEY_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TIME_NS_FIELD_NUMBER: _ClassVar[int]
    STAMP_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    key: str
    data: bytes
    version: int
    time_ns: int
    stamp: int
    origin: str
    def __init__(self, key: _Optional[str] = ..., data: _Optional[bytes] = ..., version: _Optional[int] = ..., time_ns: _Optional[int] = ..., stamp: _Optional[int] = ..., origin: _Optional[str] = ...) -> None: ...

class Order(_message.Message):
    __slots__ = ("stamp", "origin", "hash")
    STAMP_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    stamp: int
    origin: str
    hash: bytes
    def __init__(self, stamp: _Optional[int] = ..., origin: _Optional[str] = ..., hash: _Optional[bytes] = ...) -> None: ...

class State(_message.Message):
    __slots__ = ("keys", "head")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[KeyState]
    head: Order
    def __init__(self, keys: _Optional[_Iterable[_Union[KeyState, _Mapping]]] = ..., head: _Optional[_Union[Order, _Mapping]] = ...) -> None: ...

class SyncEvent(_message.Message):
    __slots__ = ("leaves", "digest", "head")
    LEAVES_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    leaves: _containers.RepeatedCompositeFieldContainer[Leaf]
    digest: bytes
    head: bytes
    def __init__(self, leaves: _Optional[_Iterable[_Union[Leaf, _Mapping]]] = ..., digest: _Optional[bytes] = ..., head: _Optional[bytes] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("node_id", "boot")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    BOOT_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    boot: int
    def __init__(self, node_id: _Optional[str] = ..., boot: _Optional[int] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("node_id", "boot", "leaves")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    BOOT_FIELD_NUMBER: _ClassVar[int]
    LEAVES_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    boot: int
    leaves: _containers.RepeatedCompositeFieldContainer[Leaf]
    def __init__(self, node_id: _Optional[str] = ..., boot: _Optional[int] = ..., leaves: _Optional[_Iterable[_Union[Leaf, _Mapping]]] = ...) -> None: ...

class PeerMessage(_message.Message):
    __slots__ = ("hello", "welcome", "state", "horizons", "events", "inv", "get_data", "sync")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    HORIZONS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    INV_FIELD_NUMBER: _ClassVar[int]
    GET_DATA_FIELD_NUMBER: _ClassVar[int]
    SYNC_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    welcome: Welcome
    state: State
    horizons: _containers.RepeatedCompositeFieldContainer[Horizon]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    inv: Inv
    get_data: _containers.RepeatedCompositeFieldContainer[GetData]
    sync: SyncEvent
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., welcome: _Optional[_Union[Welcome, _Mapping]] = ..., state: _Optional[_Union[State, _Mapping]] = ..., horizons: _Optional[_Iterable[_Union[Horizon, _Mapping]]] = ..., events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., inv: _Optional[_Union[Inv, _Mapping]] = ..., get_data: _Optional[_Iterable[_Union[GetData, _Mapping]]] = ..., sync: _Optional[_Union[SyncEvent, _Mapping]] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EventRef(_message.Message):
    __slots__ = ("origin", "seq", "stamp", "hash")
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STAMP_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    origin: str
    seq: int
    stamp: int
    hash: str
    def __init__(self, origin: _Optional[str] = ..., seq: _Optional[int] = ..., stamp: _Optional[int] = ..., hash: _Optional[str] = ...) -> None: ...

class PeerStatus(_message.Message):
    __slots__ = ("name", "address", "link", "since_s", "inbound", "sent", "received", "last_sent", "last_received", "unconfirmed", "refused", "boot", "error")
    class RefusedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LINK_FIELD_NUMBER: _ClassVar[int]
    SINCE_S_FIELD_NUMBER: _ClassVar[int]
    INBOUND_FIELD_NUMBER: _ClassVar[int]
    SENT_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    LAST_SENT_FIELD_NUMBER: _ClassVar[int]
    LAST_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    UNCONFIRMED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    BOOT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    name: str
    address: str
    link: str
    since_s: float
    inbound: bool
    sent: int
    received: int
    last_sent: EventRef
    last_received: EventRef
    unconfirmed: int
    refused: _containers.ScalarMap[str, int]
    boot: int
    error: str
    def __init__(self, name: _Optional[str] = ..., address: _Optional[str] = ..., link: _Optional[str] = ..., since_s: _Optional[float] = ..., inbound: _Optional[bool] = ..., sent: _Optional[int] = ..., received: _Optional[int] = ..., last_sent: _Optional[_Union[EventRef, _Mapping]] = ..., last_received: _Optional[_Union[EventRef, _Mapping]] = ..., unconfirmed: _Optional[int] = ..., refused: _Optional[_Mapping[str, int]] = ..., boot: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("node_id", "boot", "head", "digest", "keys", "peers", "max_confirms", "pending", "guards", "retained", "retained_bytes", "applied", "superseded", "refused", "gaps", "deferred", "chains")
    class RefusedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    BOOT_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONFIRMS_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    GUARDS_FIELD_NUMBER: _ClassVar[int]
    RETAINED_FIELD_NUMBER: _ClassVar[int]
    RETAINED_BYTES_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    GAPS_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_FIELD_NUMBER: _ClassVar[int]
    CHAINS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    boot: int
    head: str
    digest: str
    keys: int
    peers: _containers.RepeatedCompositeFieldContainer[PeerStatus]
    max_confirms: int
    pending: int
    guards: int
    retained: int
    retained_bytes: int
    applied: int
    superseded: int
    refused: _containers.ScalarMap[str, int]
    gaps: int
    deferred: int
    chains: int
    def __init__(self, node_id: _Optional[str] = ..., boot: _Optional[int] = ..., head: _Optional[str] = ..., digest: _Optional[str] = ..., keys: _Optional[int] = ..., peers: _Optional[_Iterable[_Union[PeerStatus, _Mapping]]] = ..., max_confirms: _Optional[int] = ..., pending: _Optional[int] = ..., guards: _Optional[int] = ..., retained: _Optional[int] = ..., retained_bytes: _Optional[int] = ..., applied: _Optional[int] = ..., superseded: _Optional[int] = ..., refused: _Optional[_Mapping[str, int]] = ..., gaps: _Optional[int] = ..., deferred: _Optional[int] = ..., chains: _Optional[int] = ...) -> None: ...
