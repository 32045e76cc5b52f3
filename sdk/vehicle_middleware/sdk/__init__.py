"""Client SDKs for apps (:class:`AppClient`) and providers (:class:`ProviderClient`).

Both speak the project's own services; actuation is :mod:`vehicle_middleware.sdk.actuators`.
:class:`Tls` (and :func:`channel_credentials`) dial a middleware serving TLS.

Owns the SDKs an in-car app or provider installs, their value encoding and the
wire contract beyond the protos (``wire``: metadata names, the seq cycle).
Imports only gRPC, protobuf, the generated contract (``vehicle``) and the pure
``vss`` rules; must not import the server (``tests/unit/test_layout.py``).
"""

from vehicle_middleware.contract.channel import Tls, channel_credentials
from vehicle_middleware.sdk.actuators import (
    ActuationHandler,
    ActuationRefusedError,
    ActuationRequest,
    ActuatorStream,
)
from vehicle_middleware.sdk.app import AppClient, Filter, QueueSpec, StreamReplacedError, Sub
from vehicle_middleware.sdk.demand import KeyDemand
from vehicle_middleware.sdk.errors import MiddlewareUnreachableError
from vehicle_middleware.sdk.events import (
    ClientEvent,
    DataEvent,
    HealthEvent,
    KeyAddedEvent,
    KeyFreshEvent,
    KeyRemovedEvent,
    KeyStaleEvent,
    ProviderBackEvent,
    ProviderGoneEvent,
    ReconnectedEvent,
    ResyncEvent,
    SubscriptionResult,
)
from vehicle_middleware.sdk.provider import (
    ConflictError,
    HeadConflictError,
    ProviderClient,
    PublishRefusedError,
)

__all__ = [
    "ActuationHandler",
    "ActuationRefusedError",
    "ActuationRequest",
    "ActuatorStream",
    "AppClient",
    "ClientEvent",
    "ConflictError",
    "DataEvent",
    "Filter",
    "HeadConflictError",
    "HealthEvent",
    "KeyAddedEvent",
    "KeyDemand",
    "KeyFreshEvent",
    "KeyRemovedEvent",
    "KeyStaleEvent",
    "MiddlewareUnreachableError",
    "ProviderBackEvent",
    "ProviderClient",
    "ProviderGoneEvent",
    "PublishRefusedError",
    "QueueSpec",
    "ReconnectedEvent",
    "ResyncEvent",
    "StreamReplacedError",
    "Sub",
    "SubscriptionResult",
    "Tls",
    "channel_credentials",
]
