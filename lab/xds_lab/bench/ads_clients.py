"""Many light ADS clients in one process (``python -m xds_lab.bench.ads_clients``): the
fleet_streams benchmark's stand-in for a thousand Envoys.

Each stream does what Envoy does on state-of-the-world ADS, minus applying anything: it asks
for CDS and LDS, asks for EDS of every cluster CDS names and RDS of the given route configs,
and ACKs every response at once with its version and nonce. With ``--ads delta`` it does the
same on incremental ADS: wildcard CDS and LDS, subscribes to (and unsubscribes from) EDS names
as clusters come and go, and ACKs by nonce. Streams share HTTP/2 connections
(``--per-connection`` streams each), since a thousand sockets would measure the kernel, not
the control plane.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import AsyncIterator, Sequence
from typing import TypeVar

import grpc
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest as DeltaRequest
from envoy.service.discovery.v3.discovery_pb2 import DiscoveryRequest as Request

from xds_control.xds import type_urls as urls
from xds_lab.bench import entry

__all__ = ["main", "run_delta_stream", "run_stream"]

R = TypeVar("R", Request, DeltaRequest)


async def _requests(queue: asyncio.Queue[R]) -> AsyncIterator[R]:
    while True:
        yield await queue.get()


def _cluster_names(response: discovery_pb2.DiscoveryResponse) -> list[str]:
    return sorted(cluster_pb2.Cluster.FromString(any_.value).name for any_ in response.resources)


async def run_stream(*, channel: grpc.aio.Channel, node_id: str, routes: Sequence[str]) -> None:
    """One Envoy-like SotW stream, until the channel closes."""
    node = base_pb2.Node(id=node_id, cluster="gateway")
    queue: asyncio.Queue[Request] = asyncio.Queue()
    queue.put_nowait(Request(node=node, type_url=urls.CLUSTER))
    queue.put_nowait(Request(node=node, type_url=urls.LISTENER))
    queue.put_nowait(Request(node=node, type_url=urls.ROUTE, resource_names=routes))
    names = {urls.ROUTE: list(routes)}
    call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources(
        _requests(queue)
    )
    async for response in call:
        type_url = response.type_url
        if type_url == urls.CLUSTER:
            clusters = _cluster_names(response)
            if clusters != names.get(urls.ENDPOINT):
                names[urls.ENDPOINT] = clusters
                queue.put_nowait(Request(type_url=urls.ENDPOINT, resource_names=clusters))
        queue.put_nowait(
            Request(
                type_url=type_url,
                version_info=response.version_info,
                response_nonce=response.nonce,
                resource_names=names.get(type_url, ()),
            )
        )


async def run_delta_stream(
    *, channel: grpc.aio.Channel, node_id: str, routes: Sequence[str]
) -> None:
    """One Envoy-like incremental stream, until the channel closes."""
    node = base_pb2.Node(id=node_id, cluster="gateway")
    queue: asyncio.Queue[DeltaRequest] = asyncio.Queue()
    queue.put_nowait(DeltaRequest(node=node, type_url=urls.CLUSTER))
    queue.put_nowait(DeltaRequest(node=node, type_url=urls.LISTENER))
    queue.put_nowait(DeltaRequest(type_url=urls.ROUTE, resource_names_subscribe=routes))
    clusters: set[str] = set()
    call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).DeltaAggregatedResources(
        _requests(queue)
    )
    async for response in call:
        type_url = response.type_url
        if type_url == urls.CLUSTER:  # as Envoy: ask for the new clusters' endpoints, then ACK
            now = (clusters | {r.name for r in response.resources}) - set(
                response.removed_resources
            )
            added, gone = sorted(now - clusters), sorted(clusters - now)
            clusters = now
            if added or gone:
                queue.put_nowait(
                    DeltaRequest(
                        type_url=urls.ENDPOINT,
                        resource_names_subscribe=added,
                        resource_names_unsubscribe=gone,
                    )
                )
        queue.put_nowait(DeltaRequest(type_url=type_url, response_nonce=response.nonce))


async def _run(args: argparse.Namespace) -> None:
    options = [("grpc.use_local_subchannel_pool", 1)]  # a connection of its own per channel
    channels = []
    tasks = []
    for index in range(args.streams):
        if index % args.per_connection == 0:
            channels.append(grpc.aio.insecure_channel(args.address, options=options))
        run = run_delta_stream if args.ads == "delta" else run_stream
        coro = run(channel=channels[-1], node_id=f"{args.prefix}{index}", routes=args.routes)
        tasks.append(asyncio.create_task(coro, name=f"ads-client-{index}"))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    print(f"{args.streams} streams over {len(channels)} connections", flush=True)
    await stop.wait()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*(channel.close(grace=None) for channel in channels))


def main(argv: Sequence[str] | None = None) -> None:
    """Open the streams and keep them until SIGTERM."""
    parser = entry.parser("ads_clients", __doc__, report=False)
    parser.add_argument("address", help="the ADS server, HOST:PORT")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--per-connection", type=int, default=10)
    parser.add_argument("--ads", choices=("sotw", "delta"), default="sotw")
    parser.add_argument("--routes", nargs="*", default=[], help="RDS names to ask for")
    parser.add_argument("--prefix", default="client-", help="node ids are PREFIX<n>")
    asyncio.run(_run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
