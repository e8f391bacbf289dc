"""A local stand-in for the Kubernetes API server's EndpointSlice list/watch, for tests.

No API server can run here, so this one speaks the same protocol over real HTTP with payloads
shaped exactly like the real API's (``discovery.k8s.io/v1``):

- ``GET /apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices?labelSelector=...`` answers an
  ``EndpointSliceList`` with ``metadata.resourceVersion`` and ``items``;
- with ``watch=true&resourceVersion=N`` a chunked stream of newline-delimited
  ``{"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR", "object": ...}`` events after N, a
  ``BOOKMARK`` (only ``metadata.resourceVersion``) when ``allowWatchBookmarks=true``, ended
  cleanly after ``timeoutSeconds``;
- a version older than the kept history is ``410 Gone``: an ``ERROR`` event whose object is a
  ``Status`` with ``code: 410`` (what a running watch gets), or an HTTP 410 with the same
  ``Status`` body (what a new watch may get);
- requests need the kubeconfig's bearer token (401 otherwise).

Faults a test can cause: ``break_watches`` cuts every open watch mid-stream (no final chunk),
``outage`` answers 503 until lifted, ``expire`` forgets the history so a watch from an older
version is 410.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

TOKEN = "test-token"
SERVICE_LABEL = "kubernetes.io/service-name"


def endpoint(
    ip: str, *, ready: bool = True, serving: bool | None = None, terminating: bool = False
) -> dict[str, Any]:
    """One ``endpoints[]`` entry of a slice, as the EndpointSlice controller writes it."""
    return {
        "addresses": [ip],
        "conditions": {
            "ready": ready,
            "serving": ready if serving is None else serving,
            "terminating": terminating,
        },
        "targetRef": {"kind": "Pod", "namespace": "llm", "name": f"vllm-{ip.replace('.', '-')}"},
        "nodeName": "node-a",
    }


def endpoint_slice(
    name: str,
    *,
    service: str,
    endpoints: Iterable[dict[str, Any]],
    port: int,
    port_name: str = "http",
    labels: Mapping[str, str] | None = None,
    namespace: str = "llm",
) -> dict[str, Any]:
    """An ``EndpointSlice`` object (``resourceVersion`` is set by the server when stored)."""
    return {
        "kind": "EndpointSlice",
        "apiVersion": "discovery.k8s.io/v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "generateName": f"{service}-",
            "labels": {
                SERVICE_LABEL: service,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                **(labels or {}),
            },
        },
        "addressType": "IPv4",
        "endpoints": list(endpoints),
        "ports": [{"name": port_name, "protocol": "TCP", "port": port}],
    }


def _status_410(version: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"too old resource version: {version}",
        "reason": "Expired",
        "code": 410,
    }


class FakeKubeApi:
    """EndpointSlices of one namespace; mutate with ``apply``/``delete``."""

    def __init__(self, *, namespace: str = "llm", bookmark_s: float = 0.2) -> None:
        self.namespace = namespace
        self.bookmark_s = bookmark_s
        self.version = 100
        self.slices: dict[str, dict[str, Any]] = {}
        self.history: list[tuple[int, str, dict[str, Any]]] = []
        self.lists = 0
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
        name = item["metadata"]["name"]
        kind = "MODIFIED" if name in self.slices else "ADDED"
        await self._record(kind, item)
        self.slices[name] = self.history[-1][2]

    async def delete(self, name: str) -> None:
        """Remove a slice (DELETED with its last state)."""
        item = self.slices.pop(name)
        await self._record("DELETED", item)

    async def _record(self, kind: str, item: dict[str, Any]) -> None:
        self.version += 1
        stored = json.loads(json.dumps(item))
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.history.append((self.version, kind, stored))
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

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        if self._outage:
            return web.json_response({"kind": "Status", "code": 503}, status=503)
        service = request.query.get("labelSelector", "").removeprefix(f"{SERVICE_LABEL}=")
        if _flag(request.query.get("watch")):
            async with self._watched:
                self.watches.append(dict(request.query))
                self._watched.notify_all()
            return await self._watch(request, service=service)
        self.lists += 1
        items = [s for s in self.slices.values() if _service(s) == service]
        return web.json_response(
            {
                "kind": "EndpointSliceList",
                "apiVersion": "discovery.k8s.io/v1",
                "metadata": {"resourceVersion": str(self.version)},
                "items": items,
            }
        )

    async def _watch(self, request: web.Request, *, service: str) -> web.StreamResponse:
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
                for version, kind, item in [h for h in self.history if h[0] > since]:
                    if _service(item) == service:
                        await _send(response, kind, item)
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
                            await _send(
                                response, "BOOKMARK", {"kind": "EndpointSlice", "metadata": meta}
                            )
            await response.write_eof()
        except (ConnectionResetError, RuntimeError):
            pass  # cut by break_watches or by the client
        finally:
            self._open.discard(response)
        return response


def _flag(value: str | None) -> bool:
    """A boolean query parameter as the API server parses it (Go's strconv.ParseBool)."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def _service(item: Mapping[str, Any]) -> str:
    return str(item["metadata"].get("labels", {}).get(SERVICE_LABEL, ""))


async def _send(response: web.StreamResponse, kind: str, item: Mapping[str, Any]) -> None:
    await response.write(json.dumps({"type": kind, "object": item}).encode() + b"\n")
