"""The engine's state file: what is saved comes back, and what must not be resumed is not."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from decisions import steady_decision
from xds_control.config import parse_config
from xds_control.control.warm_start import (
    EngineState,
    WarmStart,
    config_hash,
    decode_state,
    encode_state,
    load_state,
    save_state,
    unusable_because,
)
from xds_control.control.weigher import Weigher
from xds_control.discovery import Health
from xds_control.engine import Factors, WeightDecision

CONFIG = parse_config(
    text="""
pools:
  - name: chat
    weights: {hold_s: 20}
    endpoints: [{address: 127.0.0.1:8001}]
listeners:
  - {name: gw, address: 127.0.0.1:10000, routes: [{name: all, pool: chat}]}
"""
)


def decision(weight: int = 80) -> WeightDecision:
    return steady_decision(
        address="127.0.0.1:8001",
        weight=weight,
        health=Health.UNHEALTHY,
        factors=Factors(capacity=0.8, queue=0.5),
        score=0.4,
        target=40.0,
        smoothed=78.2,
        reason="fresh signals",
        health_reason="3 failed scrapes",
        computed_at=1000.0,
        last_fresh_at=999.5,
        last_fresh_weight=78.2,
        started_at=12.0,
        candidate=80,
        candidate_since=990.0,
        capacity_estimate=3200.0,
        slowness_recent=3100.0,
    )


def state(*, saved_at: float = 1000.0, weight: int = 80) -> EngineState:
    return EngineState(
        config_hash=config_hash(CONFIG),
        version="abc",
        saved_at=saved_at,
        pools={"chat": {"127.0.0.1:8001": decision(weight).state}},
    )


def test_a_saved_state_comes_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "state.json"
    save_state(path, state())
    loaded = load_state(path)
    assert loaded == state()
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]  # no temp file left


def test_no_file_is_no_state(tmp_path: Path) -> None:
    assert load_state(tmp_path / "missing.json") is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        '{"format": 2}',
        json.dumps({**json.loads(encode_state(state())), "pools": {"chat": [{"weight": 5}]}}),
        encode_state(state()).replace('"weight":80', '"weight":0'),
        encode_state(state()).replace('"health":"UNHEALTHY"', '"health":"SICK"'),
    ],
)
def test_anything_else_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="not an engine state"):
        decode_state(text)


def test_non_utf8_state_file_is_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b'{"format": 1, "x": "\xff"}')
    with pytest.raises(ValueError, match="not UTF-8"):
        load_state(path)


def test_state_is_usable_only_for_its_config_within_hold_s() -> None:
    assert unusable_because(state(), config=CONFIG, now=1010.0) is None
    assert "hold_s" in str(unusable_because(state(), config=CONFIG, now=1021.0))
    other = CONFIG.model_copy(update={"model_header": "x-llm"})
    assert unusable_because(state(), config=other, now=1001.0) == "saved for another config"


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_a_state_file_of_another_user_is_not_resumed(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(path, state())
    os.chown(path, 4321, 4321)
    with pytest.raises(ValueError, match="owned by uid 4321"):
        load_state(path)


async def test_a_state_file_of_the_earlier_format_is_ignored_and_the_plane_starts_cold(
    tmp_path: Path,
) -> None:
    # Format 1 saved whole decisions (explanations and state in one record per endpoint).
    older = {
        "format": 1,
        "config_hash": config_hash(CONFIG),
        "version": "abc",
        "saved_at": 1000.0,
        "pools": {"chat": [{"address": "127.0.0.1:8001", "weight": 80, "held": 78.2}]},
    }
    path = tmp_path / "state.json"
    path.write_text(json.dumps(older))
    with pytest.raises(ValueError, match="format 1, an earlier version's"):
        load_state(path)
    weigher = Weigher(prometheus=None, scrape=None)
    warm = WarmStart(weigher=weigher, config_path=tmp_path / "config.yaml", clock=lambda: 1005.0)
    config = CONFIG.model_copy(
        update={"restart": CONFIG.restart.model_copy(update={"state_file": path})}
    )
    await warm.resume(config)
    assert weigher.view().pools == {}  # nothing resumed: the first snapshot waits for signals
