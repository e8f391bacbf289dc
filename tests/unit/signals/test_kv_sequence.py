"""A server's KV-event sequence numbers: in order, gaps replayed, duplicates skipped, a restart
taken as a clear, a loss said."""

from __future__ import annotations

from xds_control.signals.kv_sequence import Step, Tracker


def test_in_order_messages_apply() -> None:
    t = Tracker()
    assert [t.live(n, b"") for n in range(3)] == [Step.APPLY] * 3
    assert t.last == 2
    assert not t.cleared


def test_a_gap_holds_until_the_replay_fills_it() -> None:
    t = Tracker()
    t.live(0, b"0")
    assert t.live(3, b"3") is Step.HOLD
    assert t.replay_from == 1
    assert t.live(4, b"4") is Step.HOLD
    assert [t.replayed(n) for n in (1, 2, 3)] == [Step.APPLY] * 3
    assert t.replay_ended() == [(4, b"4")]
    assert t.last == 4
    assert t.lost == 0
    assert not t.cleared


def test_a_gap_the_replay_cannot_fill_is_a_loss_and_a_clear() -> None:
    t = Tracker()
    t.live(0, b"")
    t.live(5, b"5")
    assert t.replayed(3) is Step.APPLY  # the buffer no longer holds 1 and 2
    assert t.lost == 2
    assert t.cleared
    assert t.replay_ended() == [(5, b"5")]


def test_no_answer_to_a_replay_applies_what_was_held_and_says_what_was_lost() -> None:
    t = Tracker()
    t.live(0, b"")
    t.live(4, b"4")
    assert t.replay_ended() == [(4, b"4")]
    assert t.lost == 3
    assert t.cleared


def test_the_live_stream_repeating_what_a_replay_brought_is_skipped() -> None:
    # The replay at start brought 0 and 1 before the live stream delivered 1.
    t = Tracker()
    t.replayed(0)
    t.replayed(1)
    t.replay_ended()
    assert t.live(1, b"") is Step.SKIP
    assert t.live(2, b"") is Step.APPLY
    assert t.restarts == 0


def test_numbers_going_back_on_the_live_stream_are_a_restart() -> None:
    t = Tracker()
    for n in range(5):
        t.live(n, b"")
    assert t.live(0, b"") is Step.APPLY
    assert t.restarts == 1
    assert t.cleared
    assert t.last == 0


def test_a_restart_whose_first_messages_were_missed_replays_from_zero() -> None:
    t = Tracker()
    for n in range(5):
        t.live(n, b"")
    assert t.live(2, b"2") is Step.HOLD
    assert t.replay_from == 0
    assert t.cleared


def test_joining_late_is_not_a_loss() -> None:
    t = Tracker()
    assert t.live(40, b"40") is Step.HOLD
    assert t.replay_from == 0
    assert t.replayed(30) is Step.APPLY  # the server's buffer starts at 30
    assert t.lost == 0
