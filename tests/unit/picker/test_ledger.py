"""The picker's requests in flight: each counts on its server until it ends, until a reading
of that server taken after it, or until it is too old; what a server queues, each prompt the
picker sent it at its own size."""

from __future__ import annotations

from xds_control.picker.ledger import Ledger
from xds_control.picker.pick import queued_tokens
from xds_control.picker.score import Candidate

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


def test_a_long_prompt_queued_counts_as_long_as_it_is_not_as_the_mean() -> None:
    # Heavy-tailed prompts: A holds one 8,000-token prompt the picker sent, B one request of
    # somebody else's; each reported one waiting. At the mean (1,000) they would tie.
    ledger = Ledger(max_age_s=30)
    ledger.add("long", address=A, tokens=8_000, now=10.0)
    ledger.add("new", address=A, tokens=300, now=12.0)  # after A's reading
    candidates = [
        Candidate(address=a, weight=10, healthy=True, waiting=1.0, observed_at=11.0) for a in (A, B)
    ]
    queue = ledger.queue(since={A: 11.0, B: 11.0}, now=12.0)
    assert queue == {A: (8_300, 1)}
    assert queued_tokens(candidates, queue=queue, mean_tokens=1_000) == {A: 8_300, B: 1_000}
    ledger.answered("long")  # its first token: the prefill is over, the waiting is not yet read
    queue = ledger.queue(since={A: 11.0, B: 11.0}, now=12.5)
    assert queued_tokens(candidates, queue=queue, mean_tokens=1_000) == {A: 1_300, B: 1_000}
