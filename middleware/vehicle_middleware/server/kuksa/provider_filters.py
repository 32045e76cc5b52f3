"""The demand of a KUKSA provider's signals, told as the databroker tells it.

A KUKSA v2 provider declares the signals it provides, with its own sample
interval for each (``ProvideSignalRequest``). From then on this middleware
sends it an ``UpdateFilterRequest`` when a signal's demand changes
(:mod:`vehicle_middleware.server.demand`): for each changed signal a
``Filter`` whose ``min_sample_interval`` is the shortest interval its
subscribers ask, and a ``Filter`` without one once nobody watches it. A
subscriber that asks no interval wants every write; as the databroker does,
it counts as asking the interval the provider declared for the signal, so the
provider is told the shorter of that and the shortest any filter asks. Right after
the declaration, the provider is told the filters of its signals that are
watched (if any).

The provider's ``UpdateFilterResponse`` is logged and counted
(``vmw_provider_filter_errors_total``), never fatal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping

from vehicle_middleware.ess import KeyDemand
from vehicle_middleware.proto.kuksa.val.v2 import types_pb2, val_pb2
from vehicle_middleware.server.demand import DemandPublisher, DemandWatch

__all__ = ["ProviderFilters"]

log = logging.getLogger(__name__)


class ProviderFilters:
    """The filters one KUKSA provider stream is told, from its first ``ProvideSignalRequest``."""

    def __init__(
        self,
        app: str,
        demand: DemandPublisher,
        send: Callable[[val_pb2.OpenProviderStreamResponse], Awaitable[None]],
    ) -> None:
        self._app = app
        self._demand = demand
        self._send = send
        self._declared: dict[int, int] = {}
        """Signal id -> the sample interval (ms) the provider declared."""
        self._filtered: set[int] = set()
        """Signals the provider was last told a filter with an interval for."""
        self._watch: DemandWatch | None = None
        self._task: asyncio.Task[None] | None = None
        self._request_id = 0

    def provide(self, intervals: Mapping[int, int], names: Mapping[int, str]) -> None:
        """The provider declared ``intervals`` (signal id -> ms) for signals ``names``
        (id -> name, checked by the caller); it is told their filters from now on."""
        self._declared.update(intervals)
        # The signals' demand now is told next: the filters of those watched.
        if self._watch is None:
            self._watch = self._demand.watch(names)
            self._task = asyncio.create_task(self._tell())
        else:
            self._demand.extend(self._watch, names)

    def answered(self, response: val_pb2.UpdateFilterResponse) -> None:
        """The provider's answer to a filter update: an error is logged and counted."""
        if response.filter_error != types_pb2.FILTER_ERROR_CODE_UNSPECIFIED:
            self._demand.filter_errors += 1
            log.warning(
                "provider %s could not apply filter update %d: %s",
                self._app,
                response.request_id,
                types_pb2.FilterError.Name(response.filter_error),
            )

    async def close(self) -> None:
        """Stop telling (the stream ended)."""
        if self._watch is not None:
            self._demand.unwatch(self._watch)
            self._watch = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _tell(self) -> None:
        while self._watch is not None:
            changes = await self._watch.next()
            filters = self._filters(changes)
            if filters:
                self._request_id += 1
                await self._send(
                    val_pb2.OpenProviderStreamResponse(
                        update_filter_request=val_pb2.UpdateFilterRequest(
                            request_id=self._request_id, filters_update=filters
                        )
                    )
                )

    def _filters(self, changes: Mapping[int, KeyDemand]) -> dict[int, types_pb2.Filter]:
        filters: dict[int, types_pb2.Filter] = {}
        for key, demand in changes.items():
            if demand.watched:
                interval = self._interval_ms(key, demand)
                filters[key] = types_pb2.Filter(
                    min_sample_interval=types_pb2.SampleInterval(interval_ms=interval)
                )
                self._filtered.add(key)
            elif key in self._filtered:  # its last subscriber went: a filter without interval
                filters[key] = types_pb2.Filter()
                self._filtered.discard(key)
        return filters

    def _interval_ms(self, key: int, demand: KeyDemand) -> int:
        """The interval a watched signal is told: the shortest its subscribers ask,
        where one that asks none asks the interval the provider declared."""
        if demand.min_interval_ns:  # every subscriber asks one
            return demand.min_interval_ns // 1_000_000
        asked = [demand.shortest_asked_ns // 1_000_000] if demand.shortest_asked_ns else []
        declared = self._declared.get(key)
        if declared is not None:
            asked.append(declared)
        return min(asked, default=0)
