"""The benchmark's stack: a scenario's fleet in a process of its own behind the one ``Stack``,
and a fresh control plane and Envoy per policy."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from xds_lab.bench.fleet_process import FleetProcess
from xds_lab.bench.policies import POLICIES, Policy, control_plane_config
from xds_lab.bench.scenario import Scenario
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack
from xds_lab.sim.fleet import ServerSpec
from xds_lab.sim.kv_publisher import KvEventsSpec
from xds_lab.sim.profiles import get_profile, read_as
from xds_lab.sim.tokenizer import write

__all__ = ["BenchStack", "bench_stack", "eds_responses", "use_policy", "write_policy_config"]

BenchStack = Stack[FleetProcess]

_EDS = re.compile(r'^xds_control_ads_responses_total\{type="EDS"\}\s+(\S+)', re.MULTILINE)


def bench_stack(scenario: Scenario, *, workdir: Path) -> BenchStack:
    """The scenario's fleet (every server, late ones too) behind a stack not yet started."""
    fleet = FleetProcess(
        servers=[
            ServerSpec(
                name=s.name,
                profile=s.profile,
                overrides=s.overrides,
                kv_events=_events(scenario, s.profile, s.overrides),
            )
            for s in scenario.fleet
        ],
        seed=scenario.seed,
        time_scale=scenario.time_scale,
        workdir=workdir,
    )
    return Stack(workdir=workdir, backends=fleet)


def _events(scenario: Scenario, profile: str, overrides: dict[str, Any]) -> KvEventsSpec | None:
    """Every server whose engine publishes KV events (vLLM, SGLang) and keeps a prefix cache
    publishes them when a policy reads them, on ports chosen here so the control plane's
    config can name them. A Triton server exports no such events (even one told to export
    vLLM's metric names): the picker reads it from routing history."""
    wanted = any(POLICIES[p].kv_events for p in scenario.policies)
    engine = get_profile(profile, **overrides)
    if not wanted or not engine.prefix_caching or engine.engine not in ("vllm", "sglang"):
        return None
    return KvEventsSpec(port=free_port(), replay_port=free_port())


def write_policy_config(
    stack: BenchStack, *, scenario: Scenario, policy: Policy, added: frozenset[str] = frozenset()
) -> None:
    """The pool of the scenario's servers (late ones once ``added``) balanced by ``policy``,
    each endpoint read as the engine whose metric names its server exports (``read_as``); a
    running control plane polls its file, so this also adds late servers."""
    profiles = {s.name: get_profile(s.profile, **s.overrides) for s in scenario.fleet}
    servers = scenario.pool_servers(added=added)
    addresses = stack.backends.addresses
    events = {
        addresses[s.name]: (s.kv_events.port, s.kv_events.replay_port or 0)
        for s in stack.backends.spec.servers
        if s.kv_events is not None and s.name in servers
    }
    tokenizer = stack.workdir / "tokenizer"
    if policy.kv_events and not tokenizer.exists():
        write(tokenizer)
    stack.write_config(
        control_plane_config(
            policy=policy,
            batch_slots={addresses[s]: profiles[s].max_num_seqs for s in servers},
            listener_port=stack.listener_port,
            picker_address=stack.control_plane.picker_address,
            engines={addresses[s]: read_as(profiles[s]) for s in servers},
            signals=scenario.signals,
            streamed_route=scenario.streamed_route,
            kv_events=events,
            tokenizer=str(tokenizer),
        )
    )


async def use_policy(stack: BenchStack, *, scenario: Scenario, policy: Policy) -> None:
    """Restart the control plane with ``policy`` and start a fresh Envoy against it.

    A fresh Envoy per policy: no connection, outlier or LB state carries over.
    """
    await stack.stop_envoys()
    write_policy_config(stack, scenario=scenario, policy=policy)
    await stack.restart_control_plane()
    await stack.add_envoy(
        node_id=f"bench-{policy.name}", workdir=stack.workdir / f"envoy-{policy.name}"
    )


async def eds_responses(stack: BenchStack) -> float:
    """EDS responses the control plane has sent since it started (weight pushes)."""
    match = _EDS.search(await stack.control_plane.metrics())
    return float(match.group(1)) if match else 0.0
