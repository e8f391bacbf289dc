"""Fuzz the /metrics text parser: any text gives a snapshot or a ``ValueError``, and no NaN
or infinity becomes a reading, whether read directly or as a rate between two scrapes.

``python -m xds_lab.fuzz.exposition -atheris_runs=20000``
"""

from __future__ import annotations

import math

from xds_lab.fuzz.engine import fuzz, instrumented

with instrumented():
    from xds_control.config import Engine
    from xds_control.signals import RATIO_SIGNALS, Sample
    from xds_control.signals.exposition import Snapshot, derive, parse_exposition

__all__ = ["TOKENS", "check"]

TOKENS = [
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prefix_cache_hits_total",
    "vllm:prefix_cache_queries_total",
    "vllm:inter_token_latency_seconds_sum",
    "vllm:inter_token_latency_seconds_count",
    "vllm:time_to_first_token_seconds_bucket",
    "sglang:num_running_reqs",
    "sglang:token_usage",
    "nv_trt_llm_request_metrics",
    "nv_inference_request_failure",
    "nv_inference_exec_count",
    "nv_inference_first_response_histogram_ms_bucket",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "process_start_time_seconds",
    "# TYPE ",
    " counter",
    " gauge",
    " histogram",
    "# HELP ",
    '{le="+Inf"}',
    '{request_type="scheduled"}',
    "{",
    "}",
    '="',
    '",',
    " NaN",
    " +Inf",
    " -Inf",
    " 1e308",
    " -1",
    " 0.5",
    "\n",
]
_ENGINES = list(Engine)
_NAMES = [t for t in TOKENS if t[0].isalpha()]
_LABELS = ["", '{gpu="0"}', '{gpu="1"}', '{le="+Inf"}', '{le="0.5"}', '{le="NaN"}',
           '{request_type="scheduled"}', '{request_type="waiting"}', '{request_type="max"}',
           '{kv_cache_block_type="fraction"}']  # fmt: skip
_RECORDS = 32  # per scrape: enough for any sum or rate, and a run stays fast
_VALUES = ["NaN", "+Inf", "-Inf", "1e308", "-1e308", "4.9e-324", "-1", "0", "0.5", "1", "7"]


def _parse(text: str, engine: Engine) -> Snapshot | None:
    try:
        return parse_exposition(text, engine=engine)
    except ValueError:
        return None


def _texts(data: bytes) -> tuple[str, str]:
    """Two scrapes' texts. A first byte with the high bit set spells them from records of
    three bytes (metric name, labels, value from the lists above; 0xFF ends the first scrape;
    at most ``_RECORDS`` each), so the arithmetic on the values is reached without spelling
    names byte by byte; otherwise the bytes are the texts themselves, split at the first NUL."""
    if data[0] < 0x80:
        old, _, new = data[1:].decode("utf-8", errors="replace").partition("\0")
        return old, new
    texts: list[list[str]] = [[], []]
    which, rest = 0, data[1:]
    while rest:
        if rest[0] == 0xFF:
            which, rest = 1, rest[1:]
            continue
        if len(texts[which]) == _RECORDS:
            cut = rest.find(0xFF)
            if which == 1 or cut < 0:
                break
            rest = rest[cut:]
            continue
        name, labels, value = (rest + bytes(2))[:3]
        texts[which].append(
            f"{_NAMES[name % len(_NAMES)]}{_LABELS[labels % len(_LABELS)]}"
            f" {_VALUES[value % len(_VALUES)]}"
        )
        rest = rest[3:]
    return "\n".join(texts[0]) + "\n", "\n".join(texts[1]) + "\n"


def check(data: bytes) -> None:
    """One input: an engine, then two scrapes (see ``_texts``)."""
    if not data:
        return
    engine = _ENGINES[data[0] % len(_ENGINES)]
    old_text, new_text = _texts(data)
    old, new = _parse(old_text, engine), _parse(new_text, engine)
    if old is None or new is None:
        return
    values = dict(new.gauges)
    derived = derive(old=old, new=new, ttft_slo_s=1.0)
    if derived is not None:
        values.update(derived)
    sample = Sample.build(address="a", values=values.items(), observed_at=1.0, source="fuzz")
    for signal, reading in sample.readings.items():
        in_range = reading.value >= 0 and (signal not in RATIO_SIGNALS or reading.value <= 1)
        if not math.isfinite(reading.value) or not in_range:
            raise AssertionError(f"{signal}: inadmissible reading {reading.value}")


if __name__ == "__main__":
    fuzz(check, tokens=TOKENS, max_len=1024)  # longer texts only slow each run down
