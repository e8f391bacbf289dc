"""Endpoints of a Kubernetes Service, kept current by listing and watching its EndpointSlices.

A background task lists the slices, then watches from the list's resourceVersion (bookmarks on,
so a quiet Service still advances its version and a renewed watch rarely starts from an expired
one). A watch the server ends after ``watch_timeout_s`` is renewed from the last version; an
expired version (410 Gone) or a broken stream lists again, and the new list replaces the known
slices wholesale, so an event missed during the break is in the new state all the same.
Each change wakes the control loop, so an EndpointSlice event reaches Envoy in one push.

With ``pod_metadata`` on, the pods behind a slice's endpoints are read (``pod_reader``:
a GET per pod not seen before) before the slice is published, so an endpoint arrives with its
pod's labels and GPU in the same push, and a single-device pool never sees it without them.
A pod that could not be read is tried again when the watch is renewed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from xds_control.config.discovery import KubernetesDiscovery
from xds_control.discovery.endpoint import Endpoint
from xds_control.discovery.kubernetes.client import KubeApi
from xds_control.discovery.kubernetes.list_watch import Listing, Request, WatchEvent
from xds_control.discovery.kubernetes.pod_reader import PodReader
from xds_control.discovery.kubernetes.slices import (
    SERVICE_NAME_LABEL,
    merge_slices,
    slice_endpoints,
    slice_pods,
)
from xds_control.discovery.kubernetes.watched import WatchedSource
from xds_control.errors import DiscoveryError

__all__ = ["KubernetesSource"]

log = structlog.get_logger(__name__)


class KubernetesSource(WatchedSource[KubernetesDiscovery, tuple[Endpoint, ...]]):
    """The endpoints of ``settings.namespace/settings.service``. ``wake`` is called (on the
    event loop) whenever they change. The watch task starts on the first ``fetch`` and ends
    with ``close`` (``WatchedSource``); the first ``fetch`` waits for a list only, not for a
    failure."""

    _FAILED_EVENT = "EndpointSlice watch failed; listing again"
    _ANSWERED_BY_FAILURE = False

    def __init__(
        self, settings: KubernetesDiscovery, *, pool: str, wake: Callable[[], None]
    ) -> None:
        bound = log.bind(pool=pool, service=f"{settings.namespace}/{settings.service}")
        super().__init__(settings, wake=wake, log=bound, task=f"kubernetes-{settings.service}")
        self._items: dict[str, dict[str, Any]] = {}
        self._slices: dict[str, tuple[Endpoint, ...]] = {}
        self._pods = PodReader(log=self._log)
        self._endpoints: tuple[Endpoint, ...] = ()

    def _answer(self) -> tuple[Endpoint, ...]:
        if not self._first.is_set():
            raise DiscoveryError("EndpointSlices not listed yet")
        return self._endpoints

    async def _run(self) -> None:
        settings = self._settings
        await self._follow(
            key="slices",
            what=f"{settings.namespace}/{settings.service}",
            request=self._request,
            on_list=self._take_listing,
            on_event=self._apply,
            after_watch=self._catch_up_pods,
        )

    def _describe(self, exc: Exception, *, what: str) -> str:
        message = str(exc) if isinstance(exc, DiscoveryError) else repr(exc)
        return f"{what}: {message}"

    def _request(self) -> Request:
        settings = self._settings
        api: KubeApi = self._api  # connected before any list or watch
        return functools.partial(
            api.list_namespaced_endpoint_slice,
            settings.namespace,
            label_selector=f"{SERVICE_NAME_LABEL}={settings.service}",
        )

    async def _take_listing(self, listing: Listing) -> None:
        before = self._endpoints
        self._items = listing.items
        await self._read_pods(listing.items.values())
        self._slices = {name: self._parse(item) for name, item in listing.items.items()}
        self._first.set()
        self._publish()
        self._log_listed(
            "EndpointSlices listed",
            listing,
            before=before,
            after=self._endpoints,
            slices=len(self._slices),
        )

    async def _apply(self, event: WatchEvent) -> None:
        name = event.name
        if event.type in ("ADDED", "MODIFIED"):
            self._items[name] = event.object
            await self._read_pods([event.object])
            self._slices[name] = self._parse(event.object)
        elif event.type == "DELETED":
            self._items.pop(name, None)
            self._slices.pop(name, None)
        else:
            return  # no other kind reaches here: follow keeps bookmarks to itself
        self._log.debug("EndpointSlice event", type=event.type, slice=name)
        self._publish()

    async def _read_pods(self, items: Iterable[dict[str, Any]]) -> None:
        """Read the pods of ``items`` not read yet, and forget those no slice holds any more."""
        if not self._settings.pod_metadata:
            return
        await self._pods.read(self._api, (ref for item in items for ref in slice_pods(item)))
        self._pods.keep(ref for item in self._items.values() for ref in slice_pods(item))

    async def _catch_up_pods(self) -> None:
        """Pods not read yet (refused by RBAC since granted, a failed GET) are tried again with
        each renewed watch, so their facts arrive without waiting for a slice event."""
        known = dict(self._pods.facts)
        await self._read_pods(self._items.values())
        if self._pods.facts != known:
            self._slices = {name: self._parse(item) for name, item in self._items.items()}
            self._publish()

    def _parse(self, item: dict[str, Any]) -> tuple[Endpoint, ...]:
        settings = self._settings
        try:
            return slice_endpoints(
                item, port=settings.port, weight=settings.weight, pods=self._pods.facts
            )
        except ValueError as exc:  # one unusable slice must not hide the others
            name = (item.get("metadata") or {}).get("name")
            self._log.error("EndpointSlice skipped", slice=name, error=str(exc))
            return ()

    def _publish(self) -> None:
        endpoints = merge_slices(self._slices)
        if endpoints != self._endpoints:
            self._endpoints = endpoints
            self._wake()
