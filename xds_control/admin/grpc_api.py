"""The admin API over gRPC (``protos/xds_control/admin/v1/admin.proto``): the same views as the
HTTP JSON mirror, typed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf.struct_pb2 import Struct

from xds_control.admin.events import EventLog
from xds_control.admin.kv_events import kv_events_view
from xds_control.admin.limits import limits_view, narrowed
from xds_control.admin.protocol import AdminViews
from xds_control.admin.sync import streams_view
from xds_control.admin.v1 import admin_pb2 as pb
from xds_control.admin.v1 import admin_pb2_grpc
from xds_control.admin.views import snapshot_view, weights_view
from xds_control.cache import group_names

__all__ = ["AdminServicer", "limits_message", "weights_message"]

_WATCH_PERIOD_S = 0.25


def _struct(value: dict[str, Any]) -> Struct:
    out = Struct()
    out.update(value)
    return out


def _type_status(view: dict[str, Any]) -> pb.TypeStatus:
    """One type's JSON view (``sync.streams_view``) as the message."""
    return pb.TypeStatus(
        type=view["type"],
        sent_version=view["sent_version"],
        acked_version=view["acked_version"],
        acked_at=view["acked_at"],
        nacked_version=view["nacked_version"] or "",
        last_error=view["last_error"] or "",
        responses=view["responses"],
        nacks=view["nacks"],
        served_version=view["served_version"],
        sync=view["sync"],
    )


def weights_message(view: dict[str, Any], *, pool: str, explain: bool) -> pb.ListWeightsResponse:
    """``weights_view``'s dict as the typed response, one pool or all."""
    pools = [
        pb.PoolWeights(
            pool=name,
            endpoints=[
                pb.EndpointWeight(
                    address=row["address"],
                    weight=row["weight"],
                    health=row["health"],
                    reason=row.get("reason", ""),
                    explain=_struct(row) if explain and view["engine"] else None,
                )
                for row in rows
            ],
        )
        for name, rows in sorted(view["pools"].items())
        if not pool or name == pool
    ]
    return pb.ListWeightsResponse(
        engine=view["engine"],
        cycle=view.get("cycle", 0),
        source_error=view.get("source_error") or "",
        pools=pools,
    )


def _latency(value: dict[str, float | None]) -> pb.Latency:
    # None stays unset (HasField false): not measured, or not watched
    return pb.Latency(ttft_s=value.get("ttft_s"), tpot_s=value.get("tpot_s"))


def _budget(row: dict[str, Any]) -> pb.Budget:
    """One ``limits_view`` row as the message."""
    return pb.Budget(
        group=row["group"],
        listener=row["listener"],
        route=row["route"],
        envoy_route=row["envoy_route"],
        priority=row["priority"],
        unit=row.get("unit", ""),
        pools=row["pools"],
        fleet_rps=row["fleet_rps"],
        envoys=row["envoys"],
        share=row["share"],
        envoy_rps=row["envoy_rps"],
        bucket=pb.Bucket(**row["bucket"]),
        p99={pool: _latency(p99) for pool, p99 in row["p99"].items()},
        target=_latency(row["target"]) if "target" in row else None,
        pressure=row["pressure"],
        action=row["action"],
        connected=row["connected"],
        gateway_fleet=row["gateway_fleet"],
    )


def _token_budget(row: dict[str, Any]) -> pb.TokenBudget:
    return pb.TokenBudget(
        pool=row["pool"],
        budget=row["budget"],
        tenant=row["tenant"],
        window_s=row["window_s"],
        output_tokens=row["output_tokens"],
        charged=row["charged"],
        left=row["left"],
        renews_in_s=row["renews_in_s"],
        replicas=row["replicas"],
        here=row["here"],
    )


def limits_message(view: dict[str, Any], *, route: str, group: str) -> pb.ListLimitsResponse:
    """``limits_view``'s dict as the typed response, one route (LISTENER/ROUTE) and node group
    or all; with a route, only the output-token budgets of its pools."""
    view = narrowed(view, route=route, group=group)
    return pb.ListLimitsResponse(
        enabled=view["enabled"],
        cycle=view["cycle"],
        source_error=view["source_error"] or "",
        budgets=[_budget(r) for r in view["budgets"]],
        token_budgets=[_token_budget(t) for t in view["token_budgets"]],
    )


class AdminServicer(admin_pb2_grpc.AdminServicer):
    """Reads ``views`` and the event ring; never writes."""

    def __init__(self, *, views: AdminViews, events: EventLog) -> None:
        self._views = views
        self._state = views.state
        self._cache = views.cache
        self._registry = views.registry
        self._engine = views.engine
        self._events = events

    async def ListStreams(
        self, request: pb.ListStreamsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListStreamsResponse:
        streams = [
            pb.Stream(**{**view, "types": [_type_status(t) for t in view["types"]]})
            for view in streams_view(registry=self._registry, cache=self._cache)
        ]
        return pb.ListStreamsResponse(streams=streams)

    async def GetSnapshot(
        self, request: pb.GetSnapshotRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.GetSnapshotResponse:
        group = await self._group(request.group, context)
        view = snapshot_view(self._cache.snapshot(group), resources=request.resources)
        types = [
            pb.SnapshotType(
                type=t["type"],
                type_url=t["type_url"],
                version=t["version"],
                names=t["names"],
                resources=[_struct(r) for r in t.get("resources", [])],
            )
            for t in view["types"]
        ]
        return pb.GetSnapshotResponse(group=group, version=view["version"] or "", types=types)

    async def ListWeights(
        self, request: pb.ListWeightsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListWeightsResponse:
        return await self._weights(request, context)

    async def ListEvents(
        self, request: pb.ListEventsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListEventsResponse:
        events = self._events.since(request.after, limit=request.limit)
        return pb.ListEventsResponse(events=[pb.Event(**e.to_json()) for e in events])

    async def WatchWeights(
        self, request: pb.ListWeightsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.ListWeightsResponse]:
        last: list[tuple[str, str, int, str]] | None = None
        while True:
            message = await self._weights(request, context)
            now = [
                (p.pool, e.address, e.weight, e.health) for p in message.pools for e in p.endpoints
            ]
            if now != last:
                last = now
                yield message
            await asyncio.sleep(_WATCH_PERIOD_S)

    async def ListLimits(
        self, request: pb.ListLimitsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListLimitsResponse:
        if request.group:
            await self._group(request.group, context)
        view = limits_view(
            self._views.limiter,
            config=self._state.config,
            token_budgets=self._views.token_budgets,
        )
        known = sorted({f"{r['listener']}/{r['route']}" for r in view["budgets"]})
        if request.route and request.route not in known:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no limited route {request.route!r} (routes: {', '.join(known) or 'none'})",
            )
        return limits_message(view, route=request.route, group=request.group)

    async def ListKvEvents(
        self, request: pb.ListKvEventsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListKvEventsResponse:
        if self._views.kv_events is None:
            return pb.ListKvEventsResponse(enabled=False)
        engine = self._engine() if self._engine else None
        rows = kv_events_view(self._views.kv_events, engine=engine)
        return pb.ListKvEventsResponse(
            enabled=True,
            subscriptions=[
                pb.KvSubscription(**{**row, "layout": row["layout"] or ""})
                for row in rows
                if not request.pool or row["pool"] == request.pool
            ],
        )

    async def _weights(
        self, request: pb.ListWeightsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListWeightsResponse:
        group = await self._group(request.group, context)
        view = weights_view(
            self._engine() if self._engine else None,
            self._cache.snapshot(group),
            explain=request.explain,
        )
        if request.pool and request.pool not in view["pools"]:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no pool named {request.pool!r} (pools: {', '.join(sorted(view['pools']))})",
            )
        return weights_message(view, pool=request.pool, explain=request.explain)

    async def _group(self, group: str, context: grpc.aio.ServicerContext[Any, Any]) -> str:
        names = group_names(self._state.config)
        if not group:
            return names[0]
        if group not in names:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no node group named {group!r} (groups: {', '.join(names)})",
            )
        return group
