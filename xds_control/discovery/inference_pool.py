"""Endpoints of a Gateway API Inference Extension InferencePool, kept current by listing and
watching the pool and the pods it selects.

Two watches, each a list and then a watch from the list's resourceVersion (``kubernetes_watch``:
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
from xds_control.discovery.kubernetes_client import (
    KubeApi,
    connect,
    custom_objects_api,
    pods_api,
)
from xds_control.discovery.kubernetes_inference_pool import (
    InferencePoolError,
    PoolSpec,
    label_selector,
    pool_endpoints,
    pool_spec,
)
from xds_control.discovery.kubernetes_watch import Listing, Request, WatchEvent, follow
from xds_control.errors import DiscoveryError
from xds_control.tasks import guarded_task, wait_set

__all__ = ["GROUP", "PLURAL", "VERSION", "InferencePoolSource"]

log = structlog.get_logger(__name__)
GROUP = "inference.networking.k8s.io"
VERSION = "v1"
PLURAL = "inferencepools"


class InferencePoolSource:
    """The endpoints of InferencePool ``settings.namespace/settings.name``. ``wake`` is called
    (on the event loop) whenever they change. The watch tasks start on the first ``fetch`` and
    end with ``close``."""

    def __init__(
        self, settings: InferencePoolDiscovery, *, pool: str, wake: Callable[[], None]
    ) -> None:
        self._settings = settings
        self._wake = wake
        self._name = f"{settings.namespace}/{settings.name}"
        self._log = log.bind(pool=pool, inference_pool=self._name)
        self._spec: PoolSpec | None = None
        self._found: bool | None = None
        """Whether the InferencePool exists; ``None`` until it was first listed."""
        self._pods: dict[str, dict[str, Any]] = {}
        self._pods_listed = False
        self._served = False
        """Whether the pods were listed once: a selector change serves the old set until the
        new selection is listed."""
        self._endpoints: tuple[Endpoint, ...] = ()
        self._errors: dict[str, str] = {}
        self._first = asyncio.Event()
        self._waited = False
        self._task: asyncio.Task[None] | None = None
        self._pod_task: asyncio.Task[None] | None = None
        self._api: KubeApi | None = None

    @property
    def settings(self) -> InferencePoolDiscovery:
        """What it was built from: a reload with the same settings keeps this source."""
        return self._settings

    @property
    def spec(self) -> PoolSpec | None:
        """The InferencePool's spec as last read (its selector, target ports and
        ``endpointPickerRef`` with its ``failureMode``), ``None`` while it does not exist."""
        return self._spec

    async def fetch(self) -> tuple[Endpoint, ...]:
        """The pool's endpoints as last listed and watched. The first call starts the watches
        and waits up to ``first_list_timeout_s`` for the first lists. ``DiscoveryError`` while
        the InferencePool does not exist or is unusable, while nothing was listed yet, or while
        the API cannot be reached (the loop then keeps the last good set)."""
        if self._task is None:
            self._task = guarded_task(self._run(), name=f"inferencepool-{self._settings.name}")
        if not self._waited:
            self._waited = True
            await wait_set(self._first, timeout=self._settings.first_list_timeout_s)
        if self._errors:
            raise DiscoveryError("; ".join(self._errors[key] for key in sorted(self._errors)))
        if self._found is False:
            raise DiscoveryError(f"InferencePool {self._name} does not exist (waiting for it)")
        if self._spec is None or not self._served:
            raise DiscoveryError(f"InferencePool {self._name}: not listed yet")
        return self._endpoints

    async def close(self) -> None:
        """Stop watching and close the connection."""
        for task in (self._task, self._pod_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._api is not None:
            await self._api.api_client.close()
            self._api = None

    async def _run(self) -> None:
        await self._follow(
            key="pool",
            what=f"inferencepool {self._name}",
            request=self._pool_request,
            on_list=self._pool_listed,
            on_event=self._pool_event,
        )

    async def _follow(
        self,
        *,
        key: str,
        what: str,
        request: Callable[[], Request],
        on_list: Callable[[Listing], None],
        on_event: Callable[[WatchEvent], None],
    ) -> None:
        """``kubernetes_watch.follow`` for one of the two watches; its failures are reported
        under ``key`` until its next list."""

        async def listed(listing: Listing) -> None:
            self._errors.pop(key, None)
            on_list(listing)

        async def event(each: WatchEvent) -> None:
            on_event(each)

        def failed(exc: Exception) -> None:
            self._fail(key, str(exc) if isinstance(exc, DiscoveryError) else f"{what}: {exc!r}")

        settings = self._settings
        await follow(
            what=what,
            connect=self._connect,
            request=request,
            on_list=listed,
            on_event=event,
            on_failure=failed,
            watch_timeout_s=settings.watch_timeout_s,
            relist_backoff_s=settings.relist_backoff_s,
            log=self._log,
        )

    async def _connect(self) -> None:
        if self._api is None:
            self._api = await connect(self._settings)

    def _fail(
        self, key: str, message: str, *, event: str = "InferencePool watch failed; listing again"
    ) -> None:
        if self._errors.get(key) != message:
            self._log.error(event, error=message)
        self._errors[key] = message
        self._first.set()
        self._wake()  # the loop shows the error

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

    def _pool_listed(self, listing: Listing) -> None:
        self._take_pool(listing.items.get(self._settings.name))

    def _pool_event(self, event: WatchEvent) -> None:
        name = (event.object.get("metadata") or {}).get("name")
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

    def _pods_listed_now(self, listing: Listing) -> None:
        before = {e.address for e in self._endpoints}
        self._pods, self._pods_listed, self._served = dict(listing.items), True, True
        self._first.set()
        self._publish()
        after = {e.address for e in self._endpoints}
        self._log.info(
            "InferencePool pods listed",
            resource_version=listing.resource_version,
            pods=len(self._pods),
            endpoints=len(after),
            added=sorted(after - before),
            removed=sorted(before - after),
        )

    def _pod_event(self, event: WatchEvent) -> None:
        name = str((event.object.get("metadata") or {}).get("name", ""))
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
