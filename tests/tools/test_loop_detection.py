"""Tool-call loop detection: hashing, the history window, each detector and its thresholds,
and the `tools.loopDetection` config (OpenClaw's tool-loop-detection cases)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clawpi.agent.tool import ToolResult
from clawpi.tools.loop_detection import (
    CRITICAL_THRESHOLD,
    DISABLED,
    GLOBAL_CIRCUIT_BREAKER_THRESHOLD,
    HISTORY_SIZE,
    UNKNOWN_TOOL_THRESHOLD,
    WARNING_THRESHOLD,
    LoopDetectionConfig,
    ToolCallHistory,
    hash_tool_call,
)

ON = LoopDetectionConfig(enabled=True)


def result(text: str, **details: Any) -> ToolResult:
    return ToolResult.text(text, details=details)


def record_success(
    history: ToolCallHistory, name: str, params: Any, outcome: ToolResult, index: int
) -> None:
    call_id = f"{name}-{index}"
    history.record_call(name, params, call_id, ON)
    history.record_outcome(name, params, call_id, ON, result=outcome)


def record_failure(
    history: ToolCallHistory, name: str, params: Any, error: str, index: int
) -> None:
    call_id = f"{name}-error-{index}"
    history.record_call(name, params, call_id, ON)
    history.record_outcome(name, params, call_id, ON, error=RuntimeError(error))


def repeated(name: str, params: Any, outcome: ToolResult, count: int) -> ToolCallHistory:
    history = ToolCallHistory()
    for index in range(count):
        record_success(history, name, params, outcome, index)
    return history


# -- hashing and the window -------------------------------------------------------------------


def test_same_tool_and_params_hash_alike_and_any_difference_changes_the_hash() -> None:
    assert hash_tool_call("read", {"path": "/f"}) == hash_tool_call("read", {"path": "/f"})
    assert hash_tool_call("read", {"path": "/f1"}) != hash_tool_call("read", {"path": "/f2"})
    assert hash_tool_call("read", {"path": "/f"}) != hash_tool_call("write", {"path": "/f"})


def test_hash_ignores_key_order_and_stays_fixed_size_for_large_params() -> None:
    assert hash_tool_call("t", {"a": 1, "b": {"c": 2, "d": 3}}) == hash_tool_call(
        "t", {"b": {"d": 3, "c": 2}, "a": 1}
    )
    small = hash_tool_call("read", {"data": "x"})
    large = hash_tool_call("read", {"data": "x" * 20_000})
    assert len(small) == len(large) and small != large


def test_params_json_cannot_hold_still_hash_without_crashing() -> None:
    circular: dict[str, Any] = {"id": "shared"}
    circular["self"] = circular
    for params in (circular, {1: "non-string key"}, object(), "text", 123, None):
        assert hash_tool_call("tool", params).startswith("tool:")


def test_history_keeps_a_sliding_window_of_the_latest_calls() -> None:
    history = ToolCallHistory()
    for i in range(HISTORY_SIZE + 10):
        history.record_call("tool", {"i": i}, f"call-{i}", ON)
    assert len(history.records) == HISTORY_SIZE
    assert history.records[0].args_hash == hash_tool_call("tool", {"i": 10})


def test_an_outcome_attaches_to_its_recorded_call() -> None:
    history = ToolCallHistory()
    history.record_call("read", {"path": "a"}, "call-1", ON)
    history.record_outcome("read", {"path": "a"}, "call-1", ON, result=result("same"))
    assert len(history.records) == 1
    assert history.records[0].call_id == "call-1" and history.records[0].result_hash


def test_an_outcome_whose_call_left_the_window_is_recorded_on_its_own() -> None:
    history = ToolCallHistory()
    for i in range(HISTORY_SIZE + 3):
        params = {"path": f"config.{i}"}
        history.record_call("gateway", params, f"call-{i}", ON)
        history.record_outcome("gateway", params, f"call-{i}", ON, result=result(f"v{i}"))
    assert len(history.records) == HISTORY_SIZE
    assert history.records[0].call_id == "call-3"
    assert all(r.result_hash for r in history.records)


# -- generic repeats --------------------------------------------------------------------------


def test_detection_is_off_unless_enabled() -> None:
    history = ToolCallHistory()
    for i in range(CRITICAL_THRESHOLD):
        history.record_call("read", {"path": "/same"}, f"c{i}", DISABLED)
    assert history.detect("read", {"path": "/same"}, DISABLED) is None
    assert LoopDetectionConfig.from_config(None) == DISABLED
    assert LoopDetectionConfig.from_config({"warningThreshold": 2}).enabled is False


def test_unique_calls_are_not_flagged() -> None:
    history = ToolCallHistory()
    for i in range(15):
        history.record_call("read", {"path": f"/file{i}"}, f"c{i}", ON)
    assert history.detect("read", {"path": "/new"}, ON) is None


def test_repeating_the_same_call_warns_at_the_warning_threshold() -> None:
    history = ToolCallHistory()
    for i in range(WARNING_THRESHOLD - 1):
        history.record_call("read", {"path": "/same"}, f"c{i}", ON)
    assert history.detect("read", {"path": "/same"}, ON) is None
    history.record_call("read", {"path": "/same"}, "last", ON)
    verdict = history.detect("read", {"path": "/same"}, ON)
    assert verdict is not None
    assert (verdict.level, verdict.detector, verdict.count) == ("warning", "generic_repeat", 10)
    assert "WARNING" in verdict.message and "10 times" in verdict.message


def test_identical_outcomes_block_at_the_critical_threshold() -> None:
    outcome = result("same output", ok=True)
    assert (
        repeated("read", {"path": "/s"}, outcome, CRITICAL_THRESHOLD - 1)
        .detect("read", {"path": "/s"}, ON)
        .level
        == "warning"
    )  # type: ignore[union-attr]
    verdict = repeated("read", {"path": "/s"}, outcome, CRITICAL_THRESHOLD).detect(
        "read", {"path": "/s"}, ON
    )
    assert verdict is not None
    assert (verdict.level, verdict.detector) == ("critical", "generic_repeat")
    assert "identical outcomes" in verdict.message


def test_changing_outcomes_only_warn_however_often_the_call_repeats() -> None:
    history = ToolCallHistory()
    for i in range(GLOBAL_CIRCUIT_BREAKER_THRESHOLD + 5):
        record_success(history, "read", {"path": "/log"}, result(f"line {i}"), i)
    verdict = history.detect("read", {"path": "/log"}, ON)
    assert verdict is not None and verdict.level == "warning"


def test_the_global_circuit_breaker_blocks_any_tool_at_thirty_identical_outcomes() -> None:
    history = repeated("read", {"path": "/s"}, result("same"), GLOBAL_CIRCUIT_BREAKER_THRESHOLD)
    verdict = history.detect("read", {"path": "/s"}, ON)
    assert verdict is not None
    assert (verdict.level, verdict.detector) == ("critical", "global_circuit_breaker")
    assert "global circuit breaker" in verdict.message
    no_generic = LoopDetectionConfig(enabled=True, generic_repeat=False)
    assert history.detect("read", {"path": "/s"}, no_generic) == verdict


def test_repeated_errors_count_as_identical_outcomes() -> None:
    history = ToolCallHistory()
    for i in range(CRITICAL_THRESHOLD):
        record_failure(history, "read", {"path": "/missing"}, "File not found: /missing", i)
    verdict = history.detect("read", {"path": "/missing"}, ON)
    assert verdict is not None and verdict.level == "critical"


# -- exec and process -------------------------------------------------------------------------


def test_completed_exec_calls_block_despite_volatile_run_details() -> None:
    history = ToolCallHistory()
    params = {"command": "grafana-api.sh datasources"}
    for i in range(CRITICAL_THRESHOLD):
        outcome = result(
            "Loki\nPrometheus", status="completed", exitCode=0, durationMs=100 + i, cwd=f"/r{i}"
        )
        record_success(history, "exec", params, outcome, i)
    verdict = history.detect("exec", params, ON)
    assert verdict is not None
    assert (verdict.level, verdict.detector) == ("critical", "generic_repeat")


def test_running_exec_calls_block_despite_volatile_session_ids_in_text_and_details() -> None:
    history = ToolCallHistory()
    params = {"command": "tail -f app.log", "yieldMs": 1000}
    for i in range(CRITICAL_THRESHOLD):
        outcome = result(
            f"Command still running (session s{i}, pid {1000 + i})",
            status="running",
            sessionId=f"s{i}",
            pid=1000 + i,
        )
        record_success(history, "exec", params, outcome, i)
    verdict = history.detect("exec", params, ON)
    assert verdict is not None and verdict.level == "critical"


def test_exec_output_that_changes_stays_below_blocking() -> None:
    history = ToolCallHistory()
    for i in range(GLOBAL_CIRCUIT_BREAKER_THRESHOLD):
        outcome = result(f"tick {i}", status="completed", exitCode=0, durationMs=i)
        record_success(history, "exec", {"command": "date"}, outcome, i)
    verdict = history.detect("exec", {"command": "date"}, ON)
    assert verdict is not None and verdict.level == "warning"


def test_failed_exec_with_empty_output_compares_its_text() -> None:
    history = ToolCallHistory()
    for i in range(GLOBAL_CIRCUIT_BREAKER_THRESHOLD):
        outcome = result(f"failed before spawn: attempt {i}", status="failed", aggregated="")
        record_success(history, "exec", {"command": "flaky"}, outcome, i)
    verdict = history.detect("exec", {"command": "flaky"}, ON)
    assert verdict is not None and verdict.level == "warning"


def poll_result() -> ToolResult:
    return result("(no new output)\n\nProcess still running.", status="running", runtimeMs=5)


def test_a_stuck_poll_warns_then_blocks_as_a_known_polling_loop() -> None:
    params = {"action": "poll", "sessionId": "s1"}
    warned = repeated("process", params, poll_result(), WARNING_THRESHOLD).detect(
        "process", params, ON
    )
    assert warned is not None
    assert (warned.level, warned.detector) == ("warning", "known_poll_no_progress")
    assert "no progress" in warned.message
    blocked = repeated("process", params, poll_result(), CRITICAL_THRESHOLD).detect(
        "process", params, ON
    )
    assert blocked is not None
    assert (blocked.level, blocked.detector) == ("critical", "known_poll_no_progress")


def test_a_poll_whose_output_progresses_is_never_flagged() -> None:
    history = ToolCallHistory()
    params = {"action": "poll", "sessionId": "s1"}
    for i in range(CRITICAL_THRESHOLD + 5):
        record_success(history, "process", params, result(f"line {i}", status="running"), i)
    assert history.detect("process", params, ON) is None


def test_poll_volatile_runtime_is_not_progress() -> None:
    history = ToolCallHistory()
    params = {"action": "log", "sessionId": "s1"}
    for i in range(CRITICAL_THRESHOLD):
        outcome = result("same log", status="running", runtimeMs=i * 100, totalLines=1)
        record_success(history, "process", params, outcome, i)
    verdict = history.detect("process", params, ON)
    assert verdict is not None and verdict.level == "critical"


def test_the_poll_detector_can_be_switched_off() -> None:
    params = {"action": "poll", "sessionId": "s1"}
    history = repeated("process", params, poll_result(), CRITICAL_THRESHOLD)
    config = LoopDetectionConfig(enabled=True, known_poll_no_progress=False)
    assert history.detect("process", params, config) is None


# -- unknown tools ----------------------------------------------------------------------------


def test_unknown_tool_failures_below_the_threshold_are_allowed() -> None:
    history = ToolCallHistory()
    for i in range(UNKNOWN_TOOL_THRESHOLD - 1):
        record_failure(history, "shell", {"command": f"echo {i}"}, "Tool shell not found", i)
    assert history.detect("shell", {"command": "again"}, ON) is None


def test_unknown_tool_failures_block_even_when_the_arguments_change() -> None:
    history = ToolCallHistory()
    for i in range(UNKNOWN_TOOL_THRESHOLD):
        record_failure(history, "shell", {"arg": i}, "Tool shell not found", i)
    verdict = history.detect("shell", {"arg": "new"}, ON)
    assert verdict is not None
    assert (verdict.level, verdict.detector) == ("critical", "unknown_tool_repeat")
    assert "unavailable tool shell" in verdict.message


def test_another_error_between_unknown_tool_failures_restarts_the_count() -> None:
    history = ToolCallHistory()
    for i in range(UNKNOWN_TOOL_THRESHOLD - 1):
        record_failure(history, "shell", {"arg": i}, "Unknown tool: shell", i)
    record_failure(history, "shell", {"arg": "x"}, "permission denied", 99)
    record_failure(history, "shell", {"arg": "y"}, "Unknown tool: shell", 100)
    assert history.detect("shell", {"arg": "z"}, ON) is None


# -- ping-pong --------------------------------------------------------------------------------


def alternate(count: int, text: Any) -> ToolCallHistory:
    history = ToolCallHistory()
    for i in range(count):
        if i % 2 == 0:
            record_success(history, "read", {"path": "/a"}, result(text("read", i)), i)
        else:
            record_success(history, "ls", {"path": "/w"}, result(text("ls", i)), i)
    return history


def test_alternating_two_calls_warns_as_ping_pong() -> None:
    history = ToolCallHistory()
    for i in range(WARNING_THRESHOLD - 1):
        name, params = ("read", {"path": "/a"}) if i % 2 == 0 else ("ls", {"path": "/w"})
        history.record_call(name, params, f"c{i}", ON)
    verdict = history.detect("ls", {"path": "/w"}, ON)
    assert verdict is not None
    assert (verdict.level, verdict.detector, verdict.count) == ("warning", "ping_pong", 10)
    assert "ping-pong loop" in verdict.message and verdict.paired_tool == "read"


def test_ping_pong_with_stable_outcomes_blocks_at_the_critical_threshold() -> None:
    history = alternate(CRITICAL_THRESHOLD - 1, lambda name, _i: f"{name} stable")
    verdict = history.detect("ls", {"path": "/w"}, ON)
    assert verdict is not None
    assert (verdict.level, verdict.detector, verdict.count) == ("critical", "ping_pong", 20)
    assert "CRITICAL" in verdict.message


def test_ping_pong_with_progressing_outcomes_only_warns() -> None:
    history = alternate(CRITICAL_THRESHOLD - 1, lambda name, i: f"{name} {i}")
    verdict = history.detect("ls", {"path": "/w"}, ON)
    assert verdict is not None
    assert (verdict.level, verdict.detector, verdict.count) == ("warning", "ping_pong", 20)


def test_broken_alternation_is_not_ping_pong() -> None:
    history = ToolCallHistory()
    history.record_call("read", {"path": "/a"}, "a1", ON)
    history.record_call("ls", {"path": "/w"}, "b1", ON)
    history.record_call("read", {"path": "/a"}, "a2", ON)
    history.record_call("write", {"path": "/o"}, "c1", ON)
    assert history.detect("ls", {"path": "/w"}, ON) is None


def test_a_call_that_does_not_continue_the_alternation_is_not_ping_pong() -> None:
    history = alternate(CRITICAL_THRESHOLD - 1, lambda name, _i: f"{name} stable")
    repeat = history.detect("read", {"path": "/a"}, ON)  # ten reads: a plain repeat, no more
    assert repeat is not None and (repeat.detector, repeat.level) == ("generic_repeat", "warning")
    switched_off = LoopDetectionConfig(enabled=True, ping_pong=False)
    assert history.detect("ls", {"path": "/w"}, switched_off) is None


# -- config and logging -----------------------------------------------------------------------


def test_config_reads_openclaws_json_shape() -> None:
    config = LoopDetectionConfig.from_config(
        {
            "enabled": True,
            "historySize": 12,
            "warningThreshold": 3,
            "criticalThreshold": 5,
            "unknownToolThreshold": 4,
            "globalCircuitBreakerThreshold": 8,
            "detectors": {"genericRepeat": False, "knownPollNoProgress": True, "pingPong": False},
        }
    )
    assert config == LoopDetectionConfig(
        enabled=True,
        history_size=12,
        warning_threshold=3,
        critical_threshold=5,
        unknown_tool_threshold=4,
        global_circuit_breaker_threshold=8,
        generic_repeat=False,
        known_poll_no_progress=True,
        ping_pong=False,
    )


@pytest.mark.parametrize("bad", [0, -3, 2.5, "10", True, None, [5]])
def test_a_threshold_that_is_not_a_positive_integer_keeps_its_default(bad: Any) -> None:
    config = LoopDetectionConfig.from_config(
        {"enabled": True, "warningThreshold": bad, "historySize": bad, "detectors": "on"}
    )
    assert config.warning_threshold == WARNING_THRESHOLD
    assert config.history_size == HISTORY_SIZE
    assert config.generic_repeat and config.ping_pong and config.known_poll_no_progress


def test_thresholds_are_forced_into_warning_critical_breaker_order() -> None:
    config = LoopDetectionConfig.from_config(
        {"enabled": True, "warningThreshold": 25, "criticalThreshold": 5}
    )
    assert (config.warning_threshold, config.critical_threshold) == (25, 26)
    assert config.global_circuit_breaker_threshold == GLOBAL_CIRCUIT_BREAKER_THRESHOLD
    config = LoopDetectionConfig.from_config(
        {"enabled": True, "warningThreshold": 40, "globalCircuitBreakerThreshold": 10}
    )
    assert (config.critical_threshold, config.global_circuit_breaker_threshold) == (41, 42)


def test_configured_thresholds_change_when_calls_are_blocked() -> None:
    config = LoopDetectionConfig.from_config(
        {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}
    )
    history = ToolCallHistory()
    for i in range(3):
        history.record_call("read", {"path": "/s"}, f"c{i}", config)
        history.record_outcome("read", {"path": "/s"}, f"c{i}", config, result=result("same"))
    verdict = history.detect("read", {"path": "/s"}, config)
    assert verdict is not None and verdict.level == "critical"


def test_a_warning_is_logged_once_per_ten_repeats_of_its_pattern() -> None:
    history = ToolCallHistory()
    logged = []
    for i in range(35):
        history.record_call("read", {"path": "/same"}, f"c{i}", LoopDetectionConfig(enabled=True))
        verdict = history.detect("read", {"path": "/same"}, ON)
        if verdict is not None and history.should_log(verdict):
            logged.append(verdict.count)
    assert logged == [10, 20, 30]


# -- properties -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
calls = st.tuples(
    st.sampled_from(["read", "exec", "process", "ls"]),
    st.sampled_from([{"path": "a"}, {"path": "b"}, {"action": "poll", "sessionId": "s"}]),
    st.one_of(
        st.builds(result, st.sampled_from(["same", "other"])),
        st.builds(
            lambda d: ToolResult(content=[{"type": "text", "text": "x"}], details=d), json_values
        ),
        st.sampled_from(["Tool ls not found", "boom"]),
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(calls, max_size=45), json_values)
def test_any_history_is_judged_without_error_and_only_repeats_are_blocked(
    history_calls: list[Any], probe: Any
) -> None:
    history = ToolCallHistory()
    config = LoopDetectionConfig(enabled=True, warning_threshold=3, critical_threshold=5)
    for index, (name, params, outcome) in enumerate(history_calls):
        history.detect(name, params, config)
        history.record_call(name, params, f"c{index}", config)
        if isinstance(outcome, str):
            history.record_outcome(name, params, f"c{index}", config, error=outcome)
        else:
            history.record_outcome(name, params, f"c{index}", config, result=outcome)
    assert len(history.records) <= config.history_size
    for name, params in (("read", probe), ("read", {"path": "a"}), ("ls", {"path": "b"})):
        verdict = history.detect(name, params, config)
        if verdict is None or verdict.level != "critical":
            continue
        same = [r for r in history.records if r.args_hash == hash_tool_call(name, params)]
        if verdict.detector == "unknown_tool_repeat":
            assert history.records[-1].unknown_tool
        elif verdict.detector == "ping_pong":
            assert len(history.records) >= config.critical_threshold - 1
        else:
            assert len(same) >= config.critical_threshold


@given(st.dictionaries(st.text(max_size=4), json_values, max_size=6))
def test_the_call_hash_does_not_depend_on_key_order(params: dict[str, Any]) -> None:
    reordered = dict(reversed(list(params.items())))
    assert hash_tool_call("t", params) == hash_tool_call("t", reordered)
