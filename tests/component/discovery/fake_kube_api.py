"""A local stand-in for the Kubernetes API server's EndpointSlice list/watch, Pod get and
list/watch, and InferencePool list/watch, for tests.

No API server can run here, so this one speaks the same protocol over real HTTP with payloads
shaped exactly like the real API's (``discovery.k8s.io/v1`` EndpointSlices, ``v1`` Pods,
``inference.networking.k8s.io/v1`` InferencePools and Status errors; the objects are built in
``fake_kube_objects``):

- ``GET /apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices?labelSelector=...`` answers an
  ``EndpointSliceList`` with ``metadata.resourceVersion`` and ``items``; with ``limit=N`` at
  most N items (by name, as the API orders by key) and, while more remain,
  ``metadata.continue`` and ``metadata.remainingItemCount``; every page is cut from the snapshot
  the first page was, and carries its resourceVersion; a continue token whose snapshot was
  compacted away is ``410`` with reason ``Expired``;
- with ``watch=true&resourceVersion=N`` a chunked stream of newline-delimited
  ``{"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR", "object": ...}`` events after N, a
  ``BOOKMARK`` (only ``metadata.resourceVersion``) when ``allowWatchBookmarks=true``, ended
  cleanly after ``timeoutSeconds``;
- a version older than the kept history is ``410 Gone``: an ``ERROR`` event whose object is a
  ``Status`` with ``code: 410`` (what a running watch gets), or an HTTP 410 with the same
  ``Status`` body (what a new watch may get);
- ``GET /api/v1/namespaces/{ns}/pods/{name}`` answers the ``Pod`` put with ``put_pod`` or
  ``apply_pod``, or a ``404 NotFound`` Status; with ``forbid_pods`` the ``403 Forbidden``
  Status RBAC answers;
- ``GET /api/v1/namespaces/{ns}/pods?labelSelector=k=v,...`` lists and watches the pods
  ``apply_pod`` and ``delete_pod`` change, as the slices above: a watch with a label selector
  sees a pod whose labels stop matching as ``DELETED`` and one that starts to as ``ADDED``,
  as the API server's filtered watch does;
- ``GET /apis/inference.networking.k8s.io/v1/namespaces/{ns}/inferencepools`` (with an
  optional ``fieldSelector=metadata.name=NAME``) lists and watches the InferencePools
  ``apply_inference_pool`` and ``delete_inference_pool`` change, and ``.../inferencepools/NAME``
  answers one or ``404``;
- requests need the kubeconfig's bearer token (401 otherwise).

Faults a test can cause: ``break_watches`` cuts every open watch mid-stream (no final chunk),
``outage`` answers 503 until lifted, ``expire`` forgets the history so a watch from an older
version is 410, ``between_pages`` applies a slice (and compacts) when a continue request comes,
so that token is 410.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from component.discovery.fake_kube_objects import (
    SERVICE_LABEL,
    endpoint,
    endpoint_slice,
    expired_continue,
    forbidden_pod,
    inference_pool,
    pod,
    status,
)

TOKEN = "test-token"
USER = "system:serviceaccount:llm:xds-control"
__all__ = ["FakeKubeApi", "endpoint", "endpoint_slice", "inference_pool", "pod"]
_POOLS = "/apis/inference.networking.k8s.io/v1/namespaces/{namespace}/inferencepools"
Selection = Callable[[Mapping[str, Any]], bool]
"""Which stored objects a list or watch request selects."""


class FakeKubeApi:
    """EndpointSlices, Pods and InferencePools of one namespace; mutate with ``apply`` /
    ``delete`` (slices), ``apply_pod`` / ``delete_pod``, ``apply_inference_pool`` /
    ``delete_inference_pool``."""

    def __init__(self, *, namespace: str = "llm", bookmark_s: float = 0.2) -> None:
        self.namespace = namespace
        self.bookmark_s = bookmark_s
        self.version = 100
        self.slices: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.inference_pools: dict[str, dict[str, Any]] = {}
        self.pod_reads: list[str] = []
        """Name of every pod GET, in order."""
        self.forbid_pods = False
        """Answer pod GETs 403, as RBAC does without ``get`` on pods."""
        self.list_pages: list[dict[str, str]] = []
        """Query of every list request (each page), in order."""
        self.between_pages: list[dict[str, Any]] = []
        """Slices to ``apply_unseen``, one per continue request, before answering it."""
        self._snapshots: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.history: list[tuple[int, str, dict[str, Any], dict[str, Any] | None]] = []
        """(version, event type, object, the object's state before it) of every change."""
        self.lists = 0
        """First pages of EndpointSlice lists."""
        self.lists_of: dict[str, int] = {}
        """First pages of lists per kind (``EndpointSlice``, ``Pod``, ``InferencePool``)."""
        self.watches: list[dict[str, str]] = []
        """Query of every watch request, in order."""
        self.gone_as_http = False
        """``expire``: answer new watches with HTTP 410 instead of an ERROR event."""
        self._changed = asyncio.Condition()
        self._watched = asyncio.Condition()
        self._open: set[web.StreamResponse] = set()
        self._outage = False
        self._oldest = 0
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get(
            "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices", self._handle
        )
        app.router.add_get("/api/v1/namespaces/{namespace}/pods/{name}", self._pod)
        app.router.add_get("/api/v1/namespaces/{namespace}/pods", self._pods)
        app.router.add_get(_POOLS, self._pools)
        app.router.add_get(_POOLS + "/{name}", self._pool)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        self.break_watches()
        if self._runner is not None:
            await self._runner.cleanup()

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig pointing at this server with its bearer token."""
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {"name": "fake", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}
                    ],
                    "users": [{"name": "tester", "user": {"token": TOKEN}}],
                    "contexts": [
                        {"name": "fake", "context": {"cluster": "fake", "user": "tester"}}
                    ],
                    "current-context": "fake",
                }
            )
        )
        return path

    async def wait_watches(self, count: int, *, timeout: float = 5.0) -> list[dict[str, str]]:
        """The first ``count`` watch requests' queries, once that many came."""
        async with self._watched:
            await asyncio.wait_for(
                self._watched.wait_for(lambda: len(self.watches) >= count), timeout
            )
        return self.watches[:count]

    async def apply(self, item: dict[str, Any]) -> None:
        """Create or replace a slice (ADDED or MODIFIED)."""
        self.slices[item["metadata"]["name"]] = await self._change(self.slices, item)

    def put_pod(self, item: dict[str, Any]) -> None:
        """Create or replace a pod (only GETs read pods, so no event is recorded)."""
        self.version += 1
        stored = json.loads(json.dumps(item))
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.pods[stored["metadata"]["name"]] = stored

    async def delete(self, name: str) -> None:
        """Remove a slice (DELETED with its last state)."""
        item = self.slices.pop(name)
        await self._record("DELETED", item, before=item)

    async def apply_pod(self, item: dict[str, Any]) -> None:
        """Create or replace a pod, as an event pod watches see (ADDED or MODIFIED)."""
        self.pods[item["metadata"]["name"]] = await self._change(self.pods, item)

    async def delete_pod(self, name: str) -> None:
        """Remove a pod (DELETED with its last state)."""
        item = self.pods.pop(name)
        await self._record("DELETED", item, before=item)

    async def apply_inference_pool(self, item: dict[str, Any]) -> None:
        """Create or replace an InferencePool (ADDED or MODIFIED)."""
        name = item["metadata"]["name"]
        self.inference_pools[name] = await self._change(self.inference_pools, item)

    async def delete_inference_pool(self, name: str) -> None:
        """Remove an InferencePool (DELETED with its last state)."""
        item = self.inference_pools.pop(name)
        await self._record("DELETED", item, before=item)

    async def _change(self, store: dict[str, dict[str, Any]], item: dict[str, Any]) -> Any:
        before = store.get(item["metadata"]["name"])
        await self._record("ADDED" if before is None else "MODIFIED", item, before=before)
        return self.history[-1][2]

    async def _record(
        self, kind: str, item: dict[str, Any], *, before: dict[str, Any] | None
    ) -> None:
        self.version += 1
        stored = json.loads(json.dumps(item))
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.history.append((self.version, kind, stored, before))
        async with self._changed:
            self._changed.notify_all()

    async def apply_unseen(self, item: dict[str, Any]) -> None:
        """``apply`` and forget the history at once, as compaction does: no watch ever sees the
        event, and every open watch is told 410 Gone (an ERROR event, or, with
        ``gone_as_http``, an end of stream and an HTTP 410 for the renewed watch)."""
        await self.apply(item)
        await self.expire()

    async def expire(self) -> None:
        """Forget the history: a watch from an older version is 410."""
        self._oldest = self.version
        self.history.clear()
        self._snapshots.clear()
        async with self._changed:
            self._changed.notify_all()

    def break_watches(self) -> None:
        """Cut every open watch mid-stream, as a dropped connection or a restarted API server
        does."""
        for response in list(self._open):
            transport = response._req.transport if response._req is not None else None
            if transport is not None:
                transport.abort()
        self._open.clear()

    def outage(self, on: bool) -> None:
        """While on, every request is answered 503 (and open watches are cut)."""
        self._outage = on
        if on:
            self.break_watches()

    def _refused(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        if self._outage:
            return web.json_response({"kind": "Status", "code": 503}, status=503)
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        service = request.query.get("labelSelector", "").removeprefix(f"{SERVICE_LABEL}=")

        def selects(item: Mapping[str, Any]) -> bool:
            return item.get("kind") == "EndpointSlice" and _service(item) == service

        return await self._collection(
            request, kind="EndpointSlice", store=self.slices, selects=selects
        )

    async def _pods(self, request: web.Request) -> web.StreamResponse:
        wanted = _label_selector(request.query.get("labelSelector", ""))
        namespace = request.match_info["namespace"]

        def selects(item: Mapping[str, Any]) -> bool:
            metadata = item.get("metadata") or {}
            labels = metadata.get("labels") or {}
            return (
                item.get("kind") == "Pod"
                and metadata.get("namespace") == namespace
                and all(labels.get(k) == v for k, v in wanted.items())
            )

        return await self._collection(request, kind="Pod", store=self.pods, selects=selects)

    async def _pools(self, request: web.Request) -> web.StreamResponse:
        fields = request.query.get("fieldSelector", "")
        name = fields.removeprefix("metadata.name=") if fields else None
        namespace = request.match_info["namespace"]

        def selects(item: Mapping[str, Any]) -> bool:
            metadata = item.get("metadata") or {}
            return (
                item.get("kind") == "InferencePool"
                and metadata.get("namespace") == namespace
                and (name is None or metadata.get("name") == name)
            )

        return await self._collection(
            request, kind="InferencePool", store=self.inference_pools, selects=selects
        )

    async def _pool(self, request: web.Request) -> web.StreamResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        name, namespace = request.match_info["name"], request.match_info["namespace"]
        found = self.inference_pools.get(name)
        if found is None or namespace != self.namespace:
            message = f'inferencepools.inference.networking.k8s.io "{name}" not found'
            details = {"name": name, "group": "inference.networking.k8s.io"}
            body = status(404, "NotFound", message, details={**details, "kind": "inferencepools"})
            return web.json_response(body, status=404)
        return web.json_response(found)

    async def _collection(
        self,
        request: web.Request,
        *,
        kind: str,
        store: Mapping[str, dict[str, Any]],
        selects: Selection,
    ) -> web.StreamResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        if _flag(request.query.get("watch")):
            async with self._watched:
                self.watches.append({**request.query, "kind": kind})
                self._watched.notify_all()
            return await self._watch(request, kind=kind, selects=selects)
        self.list_pages.append({**request.query, "kind": kind})
        token = request.query.get("continue")
        selection = f"{request.path}?{request.query.get('labelSelector', '')}"
        selection += f"&{request.query.get('fieldSelector', '')}"
        if token is None:
            self.lists_of[kind] = self.lists_of.get(kind, 0) + 1
            if kind == "EndpointSlice":
                self.lists += 1
            items = sorted(
                (s for s in store.values() if selects(s)),
                key=lambda s: str(s["metadata"]["name"]),
            )
            version, start = self.version, ""
            self._snapshots[(selection, version)] = items
        else:
            if self.between_pages:
                await self.apply_unseen(self.between_pages.pop(0))
            version, start = _decode(token)
            if (selection, version) not in self._snapshots:
                return web.json_response(expired_continue(token), status=410)
            items = [
                s for s in self._snapshots[(selection, version)] if s["metadata"]["name"] >= start
            ]
        limit = int(request.query.get("limit") or 0) or len(items) or 1
        page, rest = items[:limit], items[limit:]
        metadata: dict[str, Any] = {"resourceVersion": str(version)}
        if rest:
            metadata["continue"] = _encode(version, str(rest[0]["metadata"]["name"]))
            metadata["remainingItemCount"] = len(rest)
        api_version = {"EndpointSlice": "discovery.k8s.io/v1", "Pod": "v1"}.get(
            kind, "inference.networking.k8s.io/v1"
        )
        body = {"kind": f"{kind}List", "apiVersion": api_version}
        return web.json_response({**body, "metadata": metadata, "items": page})

    async def _pod(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        name, namespace = request.match_info["name"], request.match_info["namespace"]
        self.pod_reads.append(name)
        if self.forbid_pods:
            body = forbidden_pod(name, namespace=namespace, user=USER)
            return web.json_response(body, status=403)
        found = self.pods.get(name)
        if found is None or namespace != self.namespace:
            message = f'pods "{name}" not found'
            body = status(404, "NotFound", message, details={"name": name, "kind": "pods"})
            return web.json_response(body, status=404)
        return web.json_response(found)

    async def _watch(
        self, request: web.Request, *, kind: str, selects: Selection
    ) -> web.StreamResponse:
        since = int(request.query.get("resourceVersion") or self.version)
        if since < self._oldest and self.gone_as_http:
            return web.json_response(_status_410(str(since)), status=410)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        self._open.add(response)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(request.query.get("timeoutSeconds", "300"))
        bookmarks = _flag(request.query.get("allowWatchBookmarks"))
        try:
            while loop.time() < deadline:
                if since < self._oldest:
                    if not self.gone_as_http:
                        await _send(response, "ERROR", _status_410(str(since)))
                    break  # an HTTP 410 comes with the client's next watch
                for version, change, item, before in [h for h in self.history if h[0] > since]:
                    seen = _as_seen(change, now=selects(item), was=_was(before, selects))
                    if seen is not None:
                        await _send(response, seen, item)
                    since = version
                async with self._changed:
                    if since < self._oldest or any(h[0] > since for h in self.history):
                        continue
                    wait = max(min(self.bookmark_s, deadline - loop.time()), 0)
                    try:
                        await asyncio.wait_for(self._changed.wait(), wait)
                    except TimeoutError:
                        if bookmarks:
                            meta = {"resourceVersion": str(since)}
                            await _send(response, "BOOKMARK", {"kind": kind, "metadata": meta})
            await response.write_eof()
        except (ConnectionResetError, RuntimeError):
            pass  # cut by break_watches or by the client
        finally:
            self._open.discard(response)
        return response


def _was(before: Mapping[str, Any] | None, selects: Selection) -> bool:
    return before is not None and selects(before)


def _as_seen(change: str, *, now: bool, was: bool) -> str | None:
    """The event a selecting watch sees for ``change``: an object that starts to match is
    ADDED, one that stops is DELETED, one that never matched is not seen."""
    if change == "DELETED":
        return "DELETED" if now else None
    if now:
        return "MODIFIED" if was and change == "MODIFIED" else "ADDED"
    return "DELETED" if was else None


def _label_selector(text: str) -> dict[str, str]:
    """``k=v,k2==v2`` (the equality selectors an InferencePool's matchLabels become)."""
    pairs = (part.replace("==", "=").split("=", 1) for part in text.split(",") if part)
    return {key: value for key, value in pairs}


def _status_410(version: str) -> dict[str, Any]:
    return status(410, "Expired", f"too old resource version: {version}")


def _encode(version: int, start: str) -> str:
    """A continue token shaped as the API server's: base64 of its JSON (version, next key)."""
    text = json.dumps({"v": "meta.k8s.io/v1", "rv": version, "start": f"{start}\u0000"})
    return base64.urlsafe_b64encode(text.encode()).decode()


def _decode(token: str) -> tuple[int, str]:
    data = json.loads(base64.urlsafe_b64decode(token))
    return int(data["rv"]), str(data["start"]).rstrip("\x00")


def _flag(value: str | None) -> bool:
    """A boolean query parameter as the API server parses it (Go's strconv.ParseBool)."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def _service(item: Mapping[str, Any]) -> str:
    return str(item["metadata"].get("labels", {}).get(SERVICE_LABEL, ""))


async def _send(response: web.StreamResponse, kind: str, item: Mapping[str, Any]) -> None:
    await response.write(json.dumps({"type": kind, "object": item}).encode() + b"\n")
