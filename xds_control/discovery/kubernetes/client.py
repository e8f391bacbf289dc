"""The API server connection, from a kubeconfig or a pod's service account.

``kubernetes_asyncio`` does the connection (kubeconfig contexts and exec/token auth, the service
account's token and CA, TLS) on aiohttp, which the control plane already runs on; the list/watch
protocol over it is ``list_watch``'s, on raw JSON, so 410 Gone and broken streams are
handled here rather than inside the client's own retry.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from xds_control.config.discovery import KubeConnection
from xds_control.errors import DiscoveryError

__all__ = ["KubeApi", "connect", "custom_objects_api", "pods_api"]

_SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
KubeApi = Any
"""``kubernetes_asyncio.client.DiscoveryV1Api``; the generated client is untyped."""


async def connect(settings: KubeConnection) -> KubeApi:
    """An API client for ``settings``: its kubeconfig, else the pod's service account when
    running in a pod, else $KUBECONFIG or ~/.kube/config. ``DiscoveryError`` when the
    optional ``kubernetes`` extra is missing or the config cannot be loaded."""
    try:
        from kubernetes_asyncio import client, config
    except ImportError as exc:
        raise DiscoveryError(
            "kubernetes discovery needs the kubernetes_asyncio package: "
            "pip install 'xds-control[kubernetes]'"
        ) from exc
    configuration = client.Configuration()
    in_cluster = settings.kubeconfig is None and bool(os.environ.get(_SERVICE_HOST_ENV))
    path = settings.kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    where = "the service account" if in_cluster else str(path or "~/.kube/config")
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            if path and not await asyncio.to_thread(os.path.exists, path):
                raise OSError(f"{path} does not exist")
            await config.load_kube_config(
                config_file=str(path) if path else None,
                context=settings.context,
                client_configuration=configuration,
                persist_config=False,
            )
    except (config.ConfigException, OSError, ValueError, KeyError) as exc:
        raise DiscoveryError(f"kubernetes: cannot load the client config ({where}): {exc}") from exc
    return client.DiscoveryV1Api(client.ApiClient(configuration=configuration))


def pods_api(api: KubeApi) -> KubeApi:
    """A ``CoreV1Api`` on ``api``'s connection, for reading pods."""
    from kubernetes_asyncio import client

    return client.CoreV1Api(api.api_client)


def custom_objects_api(api: KubeApi) -> KubeApi:
    """A ``CustomObjectsApi`` on ``api``'s connection, for InferencePools (a CRD's objects)."""
    from kubernetes_asyncio import client

    return client.CustomObjectsApi(api.api_client)
