"""`MessageQueue`: drained messages are held until delivered and come back in order if not."""

from __future__ import annotations

import pytest

from clawpi.agent import MessageQueue, user_message


def test_undelivered_drained_messages_return_to_the_front_in_order() -> None:
    queue = MessageQueue("all")
    first, second, later = user_message("1"), user_message("2"), user_message("3")
    queue.push(first)
    queue.push(second)
    assert queue.drain() == [first, second]
    queue.push(later)  # arrives while the others are in flight
    queue.restore()
    assert queue.messages == [first, second, later]


def test_delivered_messages_are_not_restored() -> None:
    queue = MessageQueue("one-at-a-time")
    first, second = user_message("1"), user_message("2")
    queue.push(first)
    queue.push(second)
    assert queue.drain() == [first]
    assert queue.commit(first) is True
    assert queue.commit(user_message("1")) is False  # identity, not equality
    queue.restore()
    assert queue.messages == [second]


def test_clear_drops_queued_and_in_flight_messages() -> None:
    queue = MessageQueue("one-at-a-time")
    queue.push(user_message("1"))
    queue.push(user_message("2"))
    queue.drain()
    assert len(queue.clear()) == 1
    queue.restore()
    assert queue.messages == [] and len(queue) == 0


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="'all' or 'one-at-a-time'"):
        MessageQueue("some")  # type: ignore[arg-type]
