"""The picker's requests in flight: each counts on its server until it ends, until a reading
of that server taken after it, or until it is too old."""

from __future__ import annotations

from xds_control.picker.ledger import Ledger

A, B = "10.0.0.1:8000", "10.0.0.2:8000"


def test_counts_until_the_request_ends() -> None:
    ledger = Ledger(max_age_s=30)
    ledger.add("r1", address=A, tokens=100, now=10.0)
    ledger.add("r2", address=A, tokens=50, now=10.5)
    ledger.add("r3", address=B, tokens=7, now=11.0)
    assert ledger.pending(since={}, now=11.0) == {A: 150, B: 7}
    ledger.end("r1")
    ledger.end("r1")  # an end twice is harmless
    assert ledger.pending(since={}, now=11.0) == {A: 50, B: 7}


def test_a_later_reading_of_the_server_already_counts_it() -> None:
    ledger = Ledger(max_age_s=30)
    ledger.add("r1", address=A, tokens=100, now=10.0)
    ledger.add("r2", address=A, tokens=50, now=12.0)
    ledger.add("r3", address=B, tokens=7, now=10.0)
    # A was read at 11 (r1 is in its waiting count by then); B never was.
    assert ledger.pending(since={A: 11.0, B: None}, now=12.0) == {A: 50, B: 7}


def test_an_end_never_heard_of_expires() -> None:
    ledger = Ledger(max_age_s=5)
    ledger.add("r1", address=A, tokens=100, now=10.0)
    ledger.add("r2", address=B, tokens=7, now=14.0)
    assert ledger.pending(since={}, now=15.1) == {B: 7}
    assert len(ledger) == 1
