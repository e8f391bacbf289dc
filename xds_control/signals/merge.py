"""Merge samples from several sources: per signal, the freshest reading wins."""

from __future__ import annotations

from collections.abc import Mapping

from xds_control.signals.sample import Reading, Sample, Signal

__all__ = ["merge_samples"]


def merge_samples(*sources: Mapping[str, Sample]) -> dict[str, Sample]:
    """One sample per address from every source's samples.

    Each signal keeps its most recently observed reading (so a sub-second scrape beats a
    15-second-old Prometheus value, and Prometheus still fills what scraping lacks); a
    rejection is kept only when no source has a valid reading; ``scrape_failures`` is the
    largest any source reports; the LoRA adapters are the freshest report's.
    """
    merged: dict[str, Sample] = {}
    for samples in sources:
        for address, sample in samples.items():
            have = merged.get(address)
            merged[address] = sample if have is None else _merge(have, sample)
    return merged


def _merge(a: Sample, b: Sample) -> Sample:
    readings: dict[Signal, Reading] = dict(a.readings)
    for signal, reading in b.readings.items():
        old = readings.get(signal)
        if old is None or reading.observed_at > old.observed_at:
            readings[signal] = reading
    adapters = a.adapters
    if b.adapters is not None and (
        adapters is None or b.adapters.observed_at > adapters.observed_at
    ):
        adapters = b.adapters
    rejected = {s: why for s, why in {**a.rejected, **b.rejected}.items() if s not in readings}
    return Sample(
        address=a.address,
        readings=readings,
        rejected=rejected,
        scrape_failures=max(a.scrape_failures, b.scrape_failures),
        adapters=adapters,
    )
