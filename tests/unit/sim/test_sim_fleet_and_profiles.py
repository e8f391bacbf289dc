"""Fleet files, profiles and fault parsing: what a user writes, and the errors they get."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from xds_control.errors import ConfigError
from xds_lab.sim.faults import parse_fault_assignments
from xds_lab.sim.fleet import load_fleet
from xds_lab.sim.kv_publisher import layout_for
from xds_lab.sim.profiles import PROFILES, get_profile

EXAMPLES = Path(__file__).parents[3] / "examples" / "fleets"


def test_h100_baseline_matches_the_published_figures() -> None:
    p = PROFILES["vllm-h100"]
    assert 0.060 <= p.prefill_time(256) <= 0.120  # TTFT at 256 prompt tokens
    assert 0.010 <= p.decode_time(32) <= 0.015  # per output token at moderate batch
    assert 0.025 <= p.prefill_overhead_s <= 0.040
    assert 0.00015 <= p.prefill_per_token_s <= 0.0003


def test_slower_gpus_are_slower_and_smaller() -> None:
    h100, a100, l4 = (PROFILES[f"vllm-{g}"] for g in ("h100", "a100", "l4"))
    assert h100.decode_time(8) < a100.decode_time(8) < l4.decode_time(8)
    assert l4.kv_blocks < h100.kv_blocks
    assert PROFILES["onnxruntime-l4"].prefix_caching is False


def test_profile_overrides_and_their_errors() -> None:
    assert get_profile("vllm-h100", max_num_seqs=8).max_num_seqs == 8
    with pytest.raises(KeyError, match="unknown profile"):
        get_profile("vllm-h200")
    with pytest.raises(KeyError, match="bogus"):
        get_profile("vllm-h100", bogus=1)
    with pytest.raises(ValueError, match="jitter"):
        get_profile("vllm-h100", jitter=0.5)


def test_example_fleets_load_and_the_big_one_has_sixteen_servers() -> None:
    mixed = load_fleet(EXAMPLES / "mixed.yaml").all_servers()
    assert [s.port for s in mixed] == [9001, 9002, 9011, 9012, 9021, 9022]
    assert len(load_fleet(EXAMPLES / "sixteen.yaml").all_servers()) == 16
    named = load_fleet(EXAMPLES / "named.yaml")
    assert named.profile_for(named.servers[1]).max_num_seqs == 64


def test_fleet_errors_name_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "fleet.yaml"
    bad.write_text("groups: [{profile: vllm-h100, count: 3, ports: '9001-9002'}]")
    with pytest.raises(ConfigError, match="does not hold 3"):
        load_fleet(bad)
    bad.write_text("servers: [{name: a, profile: nope}]")
    with pytest.raises(ConfigError, match="unknown profile"):
        load_fleet(bad)
    bad.write_text("servers: [{name: a, profile: vllm-h100}, {name: a, profile: vllm-l4}]")
    with pytest.raises(ConfigError, match="duplicate server names: a"):
        load_fleet(bad)
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        load_fleet(tmp_path / "missing.yaml")


def test_time_scale_shrinks_every_duration() -> None:
    fast = PROFILES["vllm-h100"].scaled(0.1)
    assert fast.prefill_time(256) == pytest.approx(PROFILES["vllm-h100"].prefill_time(256) / 10)
    assert fast.decode_time(4) == pytest.approx(PROFILES["vllm-h100"].decode_time(4) / 10)


def test_fault_assignments_from_the_command_line() -> None:
    update = parse_fault_assignments(["slowdown=3", "hang", "error-rate=0.25"])
    assert (update.slowdown, update.hang, update.error_rate) == (3.0, True, 0.25)
    with pytest.raises(ValidationError):
        parse_fault_assignments(["error_rate=2"])
    with pytest.raises(ValidationError):
        parse_fault_assignments(["explode=1"])


def test_kv_events_are_off_unless_asked_and_a_group_spreads_its_ports(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "servers: [{name: a, profile: vllm-h100}]\n"
        "groups: [{profile: vllm-a100, count: 2,"
        " kv_events: {port: 7000, replay_port: 7100, layout: vllm-0.9}}]\n"
    )
    plain, *group = load_fleet(fleet).all_servers()
    assert plain.kv_events is None
    assert [(s.kv_events.port, s.kv_events.replay_port) for s in group if s.kv_events] == [
        (7000, 7100),
        (7001, 7101),
    ]
    fleet.write_text("servers: [{name: a, profile: vllm-h100, kv_events: {layout: vllm-0.1}}]")
    with pytest.raises(ConfigError, match="layout"):
        load_fleet(fleet)


def test_a_server_publishes_only_its_own_engines_kv_events() -> None:
    """A simulated server does not pretend: vLLM's layouts for vLLM, SGLang's for SGLang, and
    none for Triton (whose KV events do not take this wire)."""
    assert layout_for("vllm", None) == "vllm-0.26"
    assert layout_for("vllm", "vllm-0.9") == "vllm-0.9"
    assert layout_for("sglang", None) == "sglang"
    with pytest.raises(ValueError, match="a vLLM server publishes a vLLM layout, not sglang"):
        layout_for("vllm", "sglang")
    with pytest.raises(ValueError, match="an SGLang server publishes layout sglang"):
        layout_for("sglang", "vllm-0.26")
    with pytest.raises(ValueError, match="SGLang's block hashes are ints"):
        layout_for("sglang", None, hashes="bytes")
    with pytest.raises(ValueError, match="triton publishes no KV events"):
        layout_for("triton", None)
