"""Reading the pods behind a Service's endpoints: one GET per pod, once in its life.

Why a GET per newly seen pod rather than a list/watch of pods: the facts read (labels set by
the pod template, the GPU annotations set when the pod was given its device) do not change
while a pod lives, so one read per pod uid is all there is to learn; a pod recreated under the
same name has a new uid and is read again. A pod watch would stream every change of every pod
in the namespace (status, conditions, restarts) to learn nothing more, and selecting only this
Service's pods would need its selector, one more object to read and follow. A GET needs only
the ``get`` verb on pods.

Reading never fails the EndpointSlice watch: a pod that cannot be read leaves its endpoint with
the slice's labels. A 403 (the service account may not get pods) is logged once, naming the
missing verb, and pods are not asked for again for a while, so a Service of a thousand pods
does not send a thousand refused requests per slice event.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from xds_control.discovery.kubernetes.client import KubeApi, pods_api
from xds_control.discovery.kubernetes.pods import PodFacts, PodRef, pod_facts

__all__ = ["PodReader"]

_READ_TIMEOUT_S = 10
_PARALLEL = 8
"""GETs in flight at once: a first list of a large Service reads its pods without a burst."""
_FORBIDDEN_PAUSE_S = 60.0
"""After a 403, pods are asked for again after this long (RBAC may have been granted)."""


class PodReader:
    """The facts of the pods behind one Service's endpoints, each pod read once."""

    def __init__(self, *, log: Any) -> None:
        self._log = log
        self._facts: dict[str, PodFacts] = {}
        self._paused_until = 0.0
        self._limit = asyncio.Semaphore(_PARALLEL)

    @property
    def facts(self) -> Mapping[str, PodFacts]:
        """Facts by ``PodRef.key`` of every pod read and still referenced."""
        return self._facts

    async def read(self, api: KubeApi, refs: Iterable[PodRef]) -> None:
        """Read the pods among ``refs`` not read yet. Never raises (but cancellation)."""
        missing = {ref.key: ref for ref in refs if ref.key not in self._facts}
        if not missing or time.monotonic() < self._paused_until:
            return
        core = pods_api(api)
        await asyncio.gather(*(self._read_one(core, ref) for ref in missing.values()))

    def keep(self, refs: Iterable[PodRef]) -> None:
        """Forget the pods not among ``refs`` (gone from every slice)."""
        wanted = {ref.key for ref in refs}
        for key in [k for k in self._facts if k not in wanted]:
            del self._facts[key]

    async def _read_one(self, core: KubeApi, ref: PodRef) -> None:
        async with self._limit:
            if time.monotonic() < self._paused_until:
                return
            try:
                status, body = await _get(core, ref)
            except Exception as exc:  # a pod read must never end the slice watch
                self._log.warning("pod not read", pod=ref.name, error=repr(exc))
                return
        if status == 200:
            self._take(ref, body)
        elif status == 403:
            self._forbidden(ref, body)
        elif status != 404:  # 404: deleted meanwhile; its endpoint is about to go too
            self._log.warning("pod not read", pod=ref.name, status=status, error=_message(body))

    def _take(self, ref: PodRef, body: bytes) -> None:
        try:
            pod = json.loads(body)
            uid = (pod.get("metadata") or {}).get("uid")
            facts = pod_facts(pod)
        except (ValueError, AttributeError, TypeError) as exc:
            self._log.warning("pod not read", pod=ref.name, error=f"malformed Pod: {exc}")
            return
        if ref.uid is not None and uid != ref.uid:
            return  # the name now holds a newer pod; the slice will point at it soon
        self._facts[ref.key] = facts

    def _forbidden(self, ref: PodRef, body: bytes) -> None:
        if time.monotonic() >= self._paused_until:
            self._log.error(
                "cannot read pods: RBAC lacks verb 'get' on resource 'pods'; per-server facts "
                "and GPU identity come from the EndpointSlice labels alone (grant get on pods, "
                "or set kubernetes.pod_metadata: false)",
                namespace=ref.namespace,
                error=_message(body),
                retry_in_s=_FORBIDDEN_PAUSE_S,
            )
        self._paused_until = time.monotonic() + _FORBIDDEN_PAUSE_S


async def _get(core: KubeApi, ref: PodRef) -> tuple[int, bytes]:
    resp = await core.read_namespaced_pod(
        ref.name, ref.namespace, _preload_content=False, _request_timeout=_READ_TIMEOUT_S
    )
    try:
        return int(resp.status), bytes(await resp.read())
    finally:
        resp.release()


def _message(body: bytes) -> str:
    try:
        return str(json.loads(body).get("message", ""))
    except (ValueError, AttributeError):
        return body[:200].decode("utf-8", "replace")
