"""The weights view shows a server's LoRA adapters when it reports them, and rows of servers
that do not are as they were."""

from __future__ import annotations

from xds_control.admin.views import _adapters
from xds_control.cli.xdsctl.weights import _adapters as cell
from xds_control.signals.sample import Adapters, Sample


def test_a_server_with_adapters_shows_them_and_one_without_shows_nothing() -> None:
    held = Adapters(
        running=frozenset({"b", "a"}), waiting=frozenset({"c"}), max_lora=2, observed_at=1.0
    )
    shown = _adapters(Sample(address="s", adapters=held))
    assert shown == {"adapters": {"running": ["a", "b"], "waiting": ["c"], "max_lora": 2}}
    assert _adapters(Sample(address="s")) == {}
    assert _adapters(None) == {}
    assert cell(shown["adapters"]) == "a,b (+c waiting) 2/2"
    assert cell(None) == "-"
