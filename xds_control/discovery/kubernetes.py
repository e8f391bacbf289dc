"""Endpoints of a Kubernetes Service, kept current by listing and watching its EndpointSlices.

A background task lists the slices, then watches from the list's resourceVersion (bookmarks on,
so a quiet Service still advances its version and a renewed watch rarely starts from an expired
one). A watch the server ends after ``watch_timeout_s`` is renewed from the last version; an
expired version (410 Gone) or a broken stream lists again, and the new list replaces the known
slices wholesale, so an event missed during the break is in the new state all the same.
Each change wakes the control loop, so an EndpointSlice event reaches Envoy in one push.

With ``pod_metadata`` on, the pods behind a slice's endpoints are read (``kubernetes_pod_reader``:
a GET per pod not seen before) before the slice is published, so an endpoint arrives with its
pod's labels and GPU in the same push, and a single-device pool never sees it without them.
A pod that could not be read is tried again when the watch is renewed.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from xds_control.config.discovery import KubernetesDiscovery
from xds_control.discovery.endpoint import Endpoint
from xds_control.discovery.kubernetes_client import KubeApi, connect
from xds_control.discovery.kubernetes_pod_reader import PodReader
from xds_control.discovery.kubernetes_slices import (
    SERVICE_NAME_LABEL,
    merge_slices,
    slice_endpoints,
    slice_pods,
)
from xds_control.discovery.kubernetes_watch import Listing, Request, WatchEvent, follow
from xds_control.errors import DiscoveryError
from xds_control.tasks import guarded_task, wait_set

__all__ = ["KubernetesSource"]

log = structlog.get_logger(__name__)


class KubernetesSource:
    """The endpoints of ``settings.namespace/settings.service``. ``wake`` is called (on the
    event loop) whenever they change. The watch task starts on the first ``fetch`` and ends
    with ``close``."""

    def __init__(
        self, settings: KubernetesDiscovery, *, pool: str, wake: Callable[[], None]
    ) -> None:
        self._settings = settings
        self._wake = wake
        self._log = log.bind(pool=pool, service=f"{settings.namespace}/{settings.service}")
        self._items: dict[str, dict[str, Any]] = {}
        self._slices: dict[str, tuple[Endpoint, ...]] = {}
        self._pods = PodReader(log=self._log)
        self._endpoints: tuple[Endpoint, ...] = ()
        self._listed = asyncio.Event()
        self._waited = False
        self._error: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._api: KubeApi | None = None

    @property
    def settings(self) -> KubernetesDiscovery:
        """What it was built from: a reload with the same settings keeps this source."""
        return self._settings

    async def fetch(self) -> tuple[Endpoint, ...]:
        """The Service's endpoints as last listed and watched. The first call starts the
        watch and waits up to ``first_list_timeout_s`` for the first list. ``DiscoveryError``
        while nothing was listed yet, or while the API cannot be reached (the loop then keeps
        the last good set, which is this source's too)."""
        if self._task is None:
            self._task = guarded_task(self._run(), name=f"kubernetes-{self._settings.service}")
        if not self._waited:
            self._waited = True
            await wait_set(self._listed, timeout=self._settings.first_list_timeout_s)
        if self._error is not None:
            raise DiscoveryError(self._error)
        if not self._listed.is_set():
            raise DiscoveryError("EndpointSlices not listed yet")
        return self._endpoints

    async def close(self) -> None:
        """Stop watching and close the connection."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._api is not None:
            await self._api.api_client.close()
            self._api = None

    async def _run(self) -> None:
        settings = self._settings
        await follow(
            what=f"{settings.namespace}/{settings.service}",
            connect=self._connect,
            request=self._request,
            on_list=self._take_listing,
            on_event=self._apply,
            on_failure=self._failed,
            watch_timeout_s=settings.watch_timeout_s,
            relist_backoff_s=settings.relist_backoff_s,
            log=self._log,
            after_watch=self._catch_up_pods,
        )

    async def _connect(self) -> None:
        if self._api is None:
            self._api = await connect(self._settings)

    def _failed(self, exc: Exception) -> None:
        message = str(exc) if isinstance(exc, DiscoveryError) else repr(exc)
        self._fail(f"{self._settings.namespace}/{self._settings.service}: {message}")

    def _fail(self, message: str) -> None:
        if message != self._error:
            self._log.error("EndpointSlice watch failed; listing again", error=message)
        self._error = message
        self._wake()  # the loop shows the error

    def _request(self) -> Request:
        settings = self._settings
        api: KubeApi = self._api  # connected before any list or watch
        return functools.partial(
            api.list_namespaced_endpoint_slice,
            settings.namespace,
            label_selector=f"{SERVICE_NAME_LABEL}={settings.service}",
        )

    async def _take_listing(self, listing: Listing) -> None:
        before = {e.address for e in self._endpoints}
        self._items = listing.items
        await self._read_pods(listing.items.values())
        self._slices = {name: self._parse(item) for name, item in listing.items.items()}
        self._error = None
        self._listed.set()
        self._publish()
        after = {e.address for e in self._endpoints}
        self._log.info(
            "EndpointSlices listed",
            resource_version=listing.resource_version,
            slices=len(self._slices),
            endpoints=len(after),
            added=sorted(after - before),
            removed=sorted(before - after),
        )

    async def _apply(self, event: WatchEvent) -> None:
        name = str((event.object.get("metadata") or {}).get("name", ""))
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
