"""The attempt's clocks on a real event loop: the deadline (with its one compaction grace) and
the idle watchdog, which counts only silence while a model call is in flight."""

from __future__ import annotations

import asyncio

from clawpi.runner.timeouts import RUN_TIMEOUT_MESSAGE, AttemptTimers, idle_timeout_message


def _timers(aborts: list[str], **kwargs: object) -> AttemptTimers:
    options: dict[str, object] = {
        "timeout_ms": 0,
        "idle_timeout_ms": 0,
        "abort": aborts.append,
        "is_compacting": lambda: False,
    }
    options.update(kwargs)
    return AttemptTimers(**options)  # type: ignore[arg-type]


async def test_the_deadline_aborts_the_run_once() -> None:
    aborts: list[str] = []
    timers = _timers(aborts, timeout_ms=20)
    timers.start()
    await asyncio.sleep(0.3)
    assert aborts == [RUN_TIMEOUT_MESSAGE]
    assert timers.timed_out and not timers.idle_timed_out
    assert not timers.timed_out_during_compaction
    timers.stop()


async def test_a_running_compaction_gets_one_grace_period() -> None:
    aborts: list[str] = []
    compacting = [True]
    timers = _timers(
        aborts, timeout_ms=20, compaction_grace_ms=600, is_compacting=lambda: compacting[0]
    )
    timers.start()
    await asyncio.sleep(0.1)
    assert aborts == []  # past the deadline, inside the grace
    await asyncio.sleep(1.0)
    assert aborts == [RUN_TIMEOUT_MESSAGE]  # still compacting after the grace: no second one
    assert timers.timed_out_during_compaction
    timers.stop()


async def test_stop_cancels_both_clocks() -> None:
    aborts: list[str] = []
    timers = _timers(aborts, timeout_ms=30, idle_timeout_ms=30)
    timers.start()
    timers.on_event({"type": "turn_start"})
    timers.stop()
    await asyncio.sleep(0.2)
    assert aborts == [] and not timers.timed_out


async def test_idle_counts_only_silence_during_a_model_call() -> None:
    aborts: list[str] = []
    timers = _timers(aborts, idle_timeout_ms=400)
    timers.start()
    await asyncio.sleep(0.6)  # no model call in flight: silence does not count
    assert aborts == []
    timers.on_event({"type": "turn_start"})
    for _ in range(40):  # a model streaming steadily for twice the limit
        await asyncio.sleep(0.02)
        timers.on_event({"type": "message_update"})
    assert aborts == []
    timers.on_event({"type": "message_end", "message": {"role": "assistant"}})
    await asyncio.sleep(0.6)  # a long tool after the reply: disarmed
    assert aborts == []
    timers.on_event({"type": "turn_start"})
    await asyncio.sleep(1.0)  # the next model call says nothing
    assert aborts == [idle_timeout_message(400)]
    assert timers.timed_out and timers.idle_timed_out
    timers.stop()
