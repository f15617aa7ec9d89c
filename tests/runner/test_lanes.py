"""Lanes: one session strictly serial, a global cap, many sessions at once, abort and clear."""

from __future__ import annotations

import asyncio

import pytest

from clawpi.ai.abort import AbortController
from clawpi.runner.lanes import (
    CommandQueue,
    enqueue_in_lanes,
    resolve_global_lane,
    resolve_lane_max_concurrent,
    resolve_session_lane,
)
from clawpi.runner.run_queue import (
    CommandLaneAbortError,
    CommandLaneClearedError,
    GatewayDrainingError,
    RunQueue,
)


def test_session_lane_is_prefixed_once_and_blank_is_main() -> None:
    assert resolve_session_lane("abc") == "session:abc"
    assert resolve_session_lane("  abc  ") == "session:abc"
    assert resolve_session_lane("session:abc") == "session:abc"
    assert resolve_session_lane("   ") == "session:main"
    assert resolve_session_lane(None) == "session:main"


def test_global_lane_defaults_to_main() -> None:
    assert resolve_global_lane(None) == "main"
    assert resolve_global_lane("   ") == "main"
    assert resolve_global_lane(" cron ") == "cron"


def test_main_lane_cap_comes_from_config() -> None:
    assert resolve_lane_max_concurrent(None, "main") == 4
    assert resolve_lane_max_concurrent({"agents": {"defaults": {"maxConcurrent": 2}}}, "main") == 2
    assert resolve_lane_max_concurrent({"agents": {"defaults": {"maxConcurrent": 0}}}, "main") == 4
    assert resolve_lane_max_concurrent(None, "subagent") == 8
    assert resolve_lane_max_concurrent(None, "cron") is None


def test_command_queue_is_a_run_queue() -> None:
    queue: RunQueue = CommandQueue()
    assert queue.queue_size("main") == 0


class Tracker:
    """Counts tasks running at once, per key and overall."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.per_key: dict[str, int] = {}
        self.peak_per_key: dict[str, int] = {}
        self.order: list[str] = []

    async def task(self, key: str, label: str, gate: asyncio.Event | None = None) -> str:
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.per_key[key] = self.per_key.get(key, 0) + 1
        self.peak_per_key[key] = max(self.peak_per_key.get(key, 0), self.per_key[key])
        self.order.append(label)
        try:
            if gate is not None:
                await gate.wait()
            for _ in range(3):
                await asyncio.sleep(0)
            return label
        finally:
            self.running -= 1
            self.per_key[key] -= 1


async def test_one_sessions_turns_run_strictly_in_order() -> None:
    queue = CommandQueue()
    tracker = Tracker()
    config = {"agents": {"defaults": {"maxConcurrent": 8}}}
    labels = [f"turn{i}" for i in range(10)]
    results = await asyncio.gather(
        *(
            enqueue_in_lanes(
                "main:telegram:42",
                lambda label=label: tracker.task("s", label),
                config=config,
                queue=queue,
            )
            for label in labels
        )
    )
    assert results == labels
    assert tracker.order == labels
    assert tracker.peak_per_key["s"] == 1


async def test_global_cap_is_respected_across_many_sessions() -> None:
    queue = CommandQueue()
    tracker = Tracker()
    config = {"agents": {"defaults": {"maxConcurrent": 3}}}
    results = await asyncio.gather(
        *(
            enqueue_in_lanes(
                f"s{i}", lambda i=i: tracker.task(f"s{i}", f"r{i}"), config=config, queue=queue
            )
            for i in range(40)
        )
    )
    assert sorted(results) == sorted(f"r{i}" for i in range(40))
    assert tracker.peak == 3
    assert queue.queue_size("main") == 0


async def test_many_sessions_run_concurrently_while_each_stays_serial() -> None:
    queue = CommandQueue()
    tracker = Tracker()
    config = {"agents": {"defaults": {"maxConcurrent": 50}}}
    jobs = []
    for s in range(20):
        for t in range(5):
            jobs.append(
                enqueue_in_lanes(
                    f"s{s}",
                    lambda s=s, t=t: tracker.task(f"s{s}", f"s{s}-t{t}"),
                    config=config,
                    queue=queue,
                )
            )
    await asyncio.gather(*jobs)
    assert tracker.peak == 20  # every session had a turn running at the same time
    assert all(peak == 1 for peak in tracker.peak_per_key.values())
    for s in range(20):
        mine = [label for label in tracker.order if label.startswith(f"s{s}-")]
        assert mine == [f"s{s}-t{t}" for t in range(5)]


async def test_task_error_reaches_the_caller_and_frees_the_slot() -> None:
    queue = CommandQueue()

    async def boom() -> None:
        raise ValueError("provider exploded")

    async def fine() -> str:
        return "ok"

    with pytest.raises(ValueError, match="provider exploded"):
        await queue.run("main", boom)
    assert await queue.run("main", fine) == "ok"
    assert queue.active_count("main") == 0


async def test_abort_of_a_queued_turn_rejects_it_without_running_it() -> None:
    queue = CommandQueue()
    gate = asyncio.Event()
    tracker = Tracker()
    first = asyncio.create_task(queue.run("session:x", lambda: tracker.task("x", "a", gate)))
    controller = AbortController()
    second = asyncio.create_task(
        queue.run("session:x", lambda: tracker.task("x", "b"), abort_signal=controller.signal)
    )
    await asyncio.sleep(0)
    assert queue.queue_size("session:x") == 2
    controller.abort("user sent /stop")
    with pytest.raises(CommandLaneAbortError):
        await second
    gate.set()
    assert await first == "a"
    assert tracker.order == ["a"]


async def test_already_aborted_signal_is_rejected_at_once() -> None:
    queue = CommandQueue()
    controller = AbortController()
    controller.abort()

    async def never() -> None:
        raise AssertionError("must not run")

    with pytest.raises(CommandLaneAbortError):
        await queue.run("main", never, abort_signal=controller.signal)


async def test_abort_does_not_cancel_a_running_task() -> None:
    queue = CommandQueue()
    gate = asyncio.Event()
    controller = AbortController()
    tracker = Tracker()
    running = asyncio.create_task(
        queue.run("main", lambda: tracker.task("m", "a", gate), abort_signal=controller.signal)
    )
    while not tracker.order:
        await asyncio.sleep(0)
    controller.abort()
    gate.set()
    assert await running == "a"


async def test_cancelled_waiter_leaves_the_line_and_the_next_one_runs() -> None:
    queue = CommandQueue()
    gate = asyncio.Event()
    tracker = Tracker()
    first = asyncio.create_task(queue.run("main", lambda: tracker.task("m", "a", gate)))
    second = asyncio.create_task(queue.run("main", lambda: tracker.task("m", "b")))
    third = asyncio.create_task(queue.run("main", lambda: tracker.task("m", "c")))
    await asyncio.sleep(0)
    second.cancel()
    gate.set()
    assert await first == "a"
    assert await third == "c"
    assert tracker.order == ["a", "c"]
    assert queue.queue_size("main") == 0


async def test_clear_rejects_queued_tasks_only() -> None:
    queue = CommandQueue()
    gate = asyncio.Event()
    tracker = Tracker()
    first = asyncio.create_task(queue.run("main", lambda: tracker.task("m", "a", gate)))
    waiting = [
        asyncio.create_task(queue.run("main", lambda i=i: tracker.task("m", f"w{i}")))
        for i in range(3)
    ]
    await asyncio.sleep(0)
    assert queue.clear("main") == 3
    for task in waiting:
        with pytest.raises(CommandLaneClearedError):
            await task
    gate.set()
    assert await first == "a"


async def test_reset_bumps_generation_so_late_completions_do_not_free_slots() -> None:
    queue = CommandQueue()
    stuck = asyncio.Event()
    tracker = Tracker()
    old = asyncio.create_task(queue.run("main", lambda: tracker.task("m", "old", stuck)))
    queued = asyncio.create_task(queue.run("main", lambda: tracker.task("m", "queued")))
    await asyncio.sleep(0)
    assert tracker.order == ["old"]
    queue.reset_all_lanes()  # the old task is forgotten: the queued one starts
    assert await queued == "queued"
    gate = asyncio.Event()
    fresh = asyncio.create_task(queue.run("main", lambda: tracker.task("m", "fresh", gate)))
    await asyncio.sleep(0)
    stuck.set()
    assert await old == "old"  # its caller still gets the result
    after = asyncio.create_task(queue.run("main", lambda: tracker.task("m", "after")))
    for _ in range(10):
        await asyncio.sleep(0)
    assert "after" not in tracker.order  # the late completion did not free fresh's slot
    gate.set()
    assert await fresh == "fresh"
    assert await after == "after"


async def test_wait_for_active_tasks_returns_when_they_finish_or_times_out() -> None:
    queue = CommandQueue()
    gate = asyncio.Event()
    tracker = Tracker()
    running = asyncio.create_task(queue.run("main", lambda: tracker.task("m", "a", gate)))
    await asyncio.sleep(0)
    assert await queue.wait_for_active_tasks(timeout_ms=20) is False
    waiter = asyncio.create_task(queue.wait_for_active_tasks(timeout_ms=10_000))
    gate.set()
    assert await waiter is True
    await running


async def test_draining_queue_refuses_new_work_and_finishes_the_old() -> None:
    queue = CommandQueue()
    gate = asyncio.Event()
    tracker = Tracker()
    running = asyncio.create_task(queue.run("main", lambda: tracker.task("m", "a", gate)))
    queued = asyncio.create_task(queue.run("main", lambda: tracker.task("m", "b")))
    await asyncio.sleep(0)
    drained = asyncio.create_task(queue.drain(timeout_ms=10_000))
    await asyncio.sleep(0)

    async def late() -> None:
        raise AssertionError("must not run")

    with pytest.raises(GatewayDrainingError):
        await queue.run("main", late)
    gate.set()
    assert await drained is True
    assert (await running, await queued) == ("a", "b")


async def test_queued_abort_through_both_lanes() -> None:
    queue = CommandQueue()
    gate = asyncio.Event()
    tracker = Tracker()
    first = asyncio.create_task(
        enqueue_in_lanes("k", lambda: tracker.task("k", "a", gate), queue=queue)
    )
    controller = AbortController()
    second = asyncio.create_task(
        enqueue_in_lanes(
            "k", lambda: tracker.task("k", "b"), queue=queue, abort_signal=controller.signal
        )
    )
    await asyncio.sleep(0)
    controller.abort()
    with pytest.raises(CommandLaneAbortError):
        await second
    gate.set()
    assert await first == "a"
    assert queue.queue_size("session:k") == 0


async def test_idle_session_lanes_are_let_go_and_configured_ones_kept() -> None:
    """A gateway sees many sessions: their lanes must not pile up once idle."""
    queue = CommandQueue()
    tracker = Tracker()
    config = {"agents": {"defaults": {"maxConcurrent": 4}}}
    await asyncio.gather(
        *(
            enqueue_in_lanes(
                f"s{i}", lambda i=i: tracker.task(f"s{i}", f"r{i}"), config=config, queue=queue
            )
            for i in range(200)
        )
    )
    assert queue.lane_names() == ["main"]  # its cap was set: kept
    assert queue.max_concurrent("main") == 4
    gate = asyncio.Event()
    busy = asyncio.create_task(queue.run("session:s1", lambda: tracker.task("s1", "x", gate)))
    queued = asyncio.create_task(queue.run("session:s1", lambda: tracker.task("s1", "y")))
    await asyncio.sleep(0)
    assert "session:s1" in queue.lane_names()  # busy: kept, and still serial
    gate.set()
    assert [await busy, await queued] == ["x", "y"]
    assert queue.lane_names() == ["main"]


async def test_a_lane_emptied_by_abort_cancel_or_clear_is_let_go_and_works_again() -> None:
    queue = CommandQueue()
    tracker = Tracker()
    for leave in ("abort", "cancel", "clear"):
        gate = asyncio.Event()
        first = asyncio.create_task(
            queue.run("session:x", lambda gate=gate: tracker.task("x", "a", gate))
        )
        controller = AbortController()
        second = asyncio.create_task(
            queue.run("session:x", lambda: tracker.task("x", "b"), abort_signal=controller.signal)
        )
        await asyncio.sleep(0)
        if leave == "abort":
            controller.abort()
        elif leave == "cancel":
            second.cancel()
        else:
            assert queue.clear("session:x") == 1
        with pytest.raises(
            (CommandLaneAbortError, asyncio.CancelledError, CommandLaneClearedError)
        ):
            await second
        assert queue.lane_names() == ["session:x"]  # the first still runs
        gate.set()
        assert await first == "a"
        assert queue.lane_names() == []
        assert await queue.run("session:x", lambda: tracker.task("x", "c")) == "c"
        assert queue.lane_names() == []
