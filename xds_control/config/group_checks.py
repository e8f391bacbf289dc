"""Cross-checks of ``node_groups``: names that must exist, and each group's own consistency."""

from __future__ import annotations

from xds_control.config.groups import DefaultGroup
from xds_control.config.root import Config

__all__ = ["check_groups"]


def check_groups(config: Config) -> list[tuple[str, str]]:
    """``(field_path, message)`` for every group problem: a duplicate group name, a listener or
    pool that does not exist, a group that serves nothing, and an ``unknown_nodes.group`` that
    names no group."""
    problems: list[tuple[str, str]] = []
    listeners = {lis.name: lis for lis in config.listeners}
    pools = {pool.name for pool in config.pools}
    names = [group.name for group in config.node_groups]
    for i, group in enumerate(config.node_groups):
        base = f"node_groups[{i}]"
        if names.index(group.name) != i:
            problems.append((f"{base}.name", f"duplicate name {group.name!r}"))
        if not group.listeners and not group.pools:
            problems.append((base, "the group serves nothing: give listeners or pools"))
        for j, name in enumerate(group.listeners):
            if name not in listeners:
                known = ", ".join(sorted(listeners))
                problems.append((f"{base}.listeners[{j}]", f"no listener named {name!r} ({known})"))
        for j, name in enumerate(group.pools):
            if name not in pools:
                known = ", ".join(sorted(pools))
                problems.append((f"{base}.pools[{j}]", f"no pool named {name!r} ({known})"))
    if config.node_groups and config.gateways is not None:
        problems.append(
            ("gateways", "with node_groups, each group gives its own (node_groups[].gateways)")
        )
    unknown = config.unknown_nodes
    if isinstance(unknown, DefaultGroup) and config.node_groups and unknown.group not in names:
        known = ", ".join(names)
        problems.append(("unknown_nodes.group", f"no node group named {unknown.group!r} ({known})"))
    return problems
