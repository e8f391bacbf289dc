"""Endpoints of a Gateway API Inference Extension InferencePool, kept current by listing and
watching the pool and the pods it selects.

Two watches, each a list and then a watch from the list's resourceVersion (``list_watch``:
paged lists, bookmarks, 410 Gone lists again, a broken stream lists again after a backoff), as
the EndpointSlice source does:

- the InferencePool itself (a field selector on its name), so a changed selector or target
  port is followed at run time; a pool that does not exist yet is waited for (the wait shows in
  discovery_errors, the loop keeps serving what it had), and one that is deleted keeps its last
  endpoints in Envoy until it comes back or the config drops it;
- the pods of its namespace that its selector matches (a label selector on the request, so the
  API server sends only those). A changed selector ends that watch and lists the new selection.

Each change wakes the control loop, so a pod that turns Ready reaches Envoy in one push.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

import structlog

from xds_control.config.discovery import InferencePoolDiscovery
from xds_control.discovery.endpoint import Endpoint
from xds_control.discovery.kubernetes.client import custom_objects_api, pods_api
from xds_control.discovery.kubernetes.inference_pool import (
    InferencePoolError,
    PoolSpec,
    label_selector,
    pool_endpoints,
    pool_spec,
)
from xds_control.discovery.kubernetes.list_watch import Listing, Request, WatchEvent
from xds_control.discovery.kubernetes.watched import WatchedSource
from xds_control.errors import DiscoveryError
from xds_control.tasks import guarded_task

__all__ = ["GROUP", "PLURAL", "VERSION", "InferencePoolSource"]

log = structlog.get_logger(__name__)
GROUP = "inference.networking.k8s.io"
VERSION = "v1"
PLURAL = "inferencepools"


class InferencePoolSource(WatchedSource[InferencePoolDiscovery, tuple[Endpoint, ...]]):
    """The endpoints of InferencePool ``settings.namespace/settings.name``. ``wake`` is called
    (on the event loop) whenever they change. The watch tasks start on the first ``fetch`` and
    end with ``close`` (``WatchedSource``)."""

    _FAILED_EVENT = "InferencePool watch failed; listing again"

    def __init__(
        self, settings: InferencePoolDiscovery, *, pool: str, wake: Callable[[], None]
    ) -> None:
        name = f"{settings.namespace}/{settings.name}"
        bound = log.bind(pool=pool, inference_pool=name)
        super().__init__(settings, wake=wake, log=bound, task=f"inferencepool-{settings.name}")
        self._name = name
        self._spec: PoolSpec | None = None
        self._found: bool | None = None
        """Whether the InferencePool exists; ``None`` until it was first listed."""
        self._pods: dict[str, dict[str, Any]] = {}
        self._pods_listed = False
        self._served = False
        """Whether the pods were listed once: a selector change serves the old set until the
        new selection is listed."""
        self._endpoints: tuple[Endpoint, ...] = ()
        self._pod_task: asyncio.Task[None] | None = None

    @property
    def spec(self) -> PoolSpec | None:
        """The InferencePool's spec as last read (its selector, target ports and
        ``endpointPickerRef`` with its ``failureMode``), ``None`` while it does not exist."""
        return self._spec

    def _answer(self) -> tuple[Endpoint, ...]:
        """``DiscoveryError`` while the InferencePool does not exist or nothing was listed."""
        if self._found is False:
            raise DiscoveryError(f"InferencePool {self._name} does not exist (waiting for it)")
        if self._spec is None or not self._served:
            raise DiscoveryError(f"InferencePool {self._name}: not listed yet")
        return self._endpoints

    def _watch_tasks(self) -> tuple[asyncio.Task[None] | None, ...]:
        return (self._task, self._pod_task)

    async def _run(self) -> None:
        await self._follow(
            key="pool",
            what=f"inferencepool {self._name}",
            request=self._pool_request,
            on_list=self._pool_listed,
            on_event=self._pool_event,
        )

    def _pool_request(self) -> Request:
        settings = self._settings
        return functools.partial(
            custom_objects_api(self._api).list_namespaced_custom_object,
            GROUP,
            VERSION,
            settings.namespace,
            PLURAL,
            field_selector=f"metadata.name={settings.name}",
        )

    def _pods_request(self, spec: PoolSpec) -> Callable[[], Request]:
        def request() -> Request:
            return functools.partial(
                pods_api(self._api).list_namespaced_pod,
                self._settings.namespace,
                label_selector=label_selector(spec),
            )

        return request

    async def _pool_listed(self, listing: Listing) -> None:
        self._take_pool(listing.items.get(self._settings.name))

    async def _pool_event(self, event: WatchEvent) -> None:
        name = event.name
        if name != self._settings.name:
            return
        self._take_pool(None if event.type == "DELETED" else event.object)

    def _take_pool(self, item: dict[str, Any] | None) -> None:
        if item is None:
            if self._found is not False:
                self._log.warning(
                    "InferencePool not found; waiting for it to be created",
                    deleted=self._found is True,
                )
            self._found, self._spec = False, None
            self._errors.pop("spec", None)
            self._stop_pods()
            self._first.set()
            self._wake()
            return
        self._found = True
        try:
            spec = pool_spec(item)
        except InferencePoolError as exc:  # a bad edit keeps the last good spec
            message = f"InferencePool {self._name}: {exc}"
            self._fail("spec", message, event="InferencePool unusable; keeping its last good spec")
            return
        self._errors.pop("spec", None)
        old, self._spec = self._spec, spec
        if old != spec:
            self._log.info(
                "InferencePool read",
                selector=label_selector(spec),
                target_ports=list(spec.target_ports),
                failure_mode=spec.picker.failure_mode if spec.picker else None,
            )
        if old is None or old.selector != spec.selector:
            self._watch_pods(spec)
        self._publish()

    def _stop_pods(self) -> None:
        if self._pod_task is not None:
            self._pod_task.cancel()
            self._pod_task = None
        self._pods, self._pods_listed = {}, False
        self._errors.pop("pods", None)

    def _watch_pods(self, spec: PoolSpec) -> None:
        """(Re)start the pod watch for ``spec``'s selector; the old selection's pods go."""
        self._stop_pods()
        what = f"pods {self._settings.namespace} {label_selector(spec)}"
        follow = self._follow(
            key="pods",
            what=what,
            request=self._pods_request(spec),
            on_list=self._pods_listed_now,
            on_event=self._pod_event,
        )
        self._pod_task = guarded_task(follow, name=f"inferencepool-{self._settings.name}-pods")

    async def _pods_listed_now(self, listing: Listing) -> None:
        before = self._endpoints
        self._pods, self._pods_listed, self._served = dict(listing.items), True, True
        self._first.set()
        self._publish()
        self._log_listed(
            "InferencePool pods listed",
            listing,
            before=before,
            after=self._endpoints,
            pods=len(self._pods),
        )

    async def _pod_event(self, event: WatchEvent) -> None:
        name = event.name
        if event.type in ("ADDED", "MODIFIED"):
            self._pods[name] = event.object
        elif event.type == "DELETED":
            self._pods.pop(name, None)
        self._log.debug("pod event", type=event.type, pod=name)
        self._publish()

    def _publish(self) -> None:
        if self._spec is None or not self._pods_listed:
            return
        endpoints = pool_endpoints(
            self._pods.values(), spec=self._spec, weight=self._settings.weight
        )
        if endpoints != self._endpoints:
            self._endpoints = endpoints
            self._wake()
