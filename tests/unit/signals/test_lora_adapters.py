"""vLLM's ``vllm:lora_requests_info`` read into a server's running and waiting adapters."""

from __future__ import annotations

import contextlib

from hypothesis import given
from hypothesis import strategies as st

from xds_control.config import Engine
from xds_control.signals.exposition import lora_adapters, parse_exposition
from xds_control.signals.merge import merge_samples
from xds_control.signals.sample import Adapters, Sample

_HEAD = "# HELP vllm:lora_requests_info Running stats on lora requests.\n"
_HEAD += "# TYPE vllm:lora_requests_info gauge\n"


def _series(max_lora: str, waiting: str, running: str, at: float) -> str:
    return (
        f'vllm:lora_requests_info{{max_lora="{max_lora}",waiting_lora_adapters="{waiting}",'
        f'running_lora_adapters="{running}"}} {at}\n'
    )


def test_the_newest_series_is_the_current_state() -> None:
    text = _HEAD + _series("2", "", "adapter-a", 1000.5)
    text += _series("2", "adapter-c", "adapter-a,adapter-b", 1002.0)
    text += _series("2", "", "", 1001.0)
    adapters = parse_exposition(text, engine=Engine.VLLM).adapters
    assert adapters == Adapters(
        running=frozenset({"adapter-a", "adapter-b"}),
        waiting=frozenset({"adapter-c"}),
        max_lora=2,
        observed_at=1002.0,
    )
    assert adapters.full


def test_an_idle_server_reports_no_running_adapter() -> None:
    text = _HEAD + _series("4", "", "adapter-a", 10.0) + _series("4", "", "", 20.0)
    adapters = parse_exposition(text, engine=Engine.VLLM).adapters
    assert adapters is not None
    assert adapters.running == frozenset()
    assert not adapters.full


def test_no_series_no_adapters_and_other_engines_ignore_the_name() -> None:
    text = "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 3\n"
    assert parse_exposition(text, engine=Engine.VLLM).adapters is None
    lora = _HEAD + _series("2", "", "a", 5.0)
    assert parse_exposition(lora, engine=Engine.SGLANG).adapters is None


def test_series_without_a_usable_max_lora_or_time_are_skipped() -> None:
    series = [
        ({"max_lora": "x", "running_lora_adapters": "bad"}, 99.0),
        ({"max_lora": "0", "running_lora_adapters": "bad"}, 98.0),
        ({"max_lora": "2", "running_lora_adapters": "bad"}, float("nan")),
        ({"max_lora": "2", "running_lora_adapters": " a , ,b "}, 5.0),
    ]
    adapters = lora_adapters(series)
    assert adapters is not None
    assert adapters.running == frozenset({"a", "b"})
    assert adapters.waiting == frozenset()


def test_merge_keeps_the_freshest_report() -> None:
    old = Adapters(running=frozenset({"a"}), waiting=frozenset(), max_lora=2, observed_at=1.0)
    new = Adapters(running=frozenset(), waiting=frozenset(), max_lora=2, observed_at=2.0)
    merged = merge_samples(
        {"s": Sample(address="s", adapters=new)},
        {"s": Sample(address="s", adapters=old)},
        {"s": Sample(address="s")},
    )
    assert merged["s"].adapters == new


_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40)


@given(
    st.lists(
        st.tuples(
            st.dictionaries(
                st.sampled_from(["max_lora", "running_lora_adapters", "waiting_lora_adapters"]),
                _text,
            ),
            st.floats(allow_nan=True, allow_infinity=True),
        ),
        max_size=8,
    )
)
def test_garbage_never_raises_and_what_is_read_is_sane(
    series: list[tuple[dict[str, str], float]],
) -> None:
    adapters = lora_adapters(series)
    if adapters is None:
        return
    assert adapters.max_lora >= 1
    assert all(name and name == name.strip() and "," not in name for name in adapters.running)
    assert adapters.observed_at == max(
        v for labels, v in series if v == v and abs(v) != float("inf") and _usable(labels)
    )


def _usable(labels: dict[str, str]) -> bool:
    try:
        return int(labels.get("max_lora", "")) > 0
    except ValueError:
        return False


@given(st.text(max_size=300))
def test_garbage_text_is_a_value_error_or_a_snapshot(text: str) -> None:
    with contextlib.suppress(ValueError):
        parse_exposition(_HEAD + text, engine=Engine.VLLM)
