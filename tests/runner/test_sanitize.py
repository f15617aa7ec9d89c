"""The eight-step history sanitize pipeline (seed 004, reference §4.12): one test group per step,
then the whole pipeline's idempotence and determinism."""

from __future__ import annotations

import base64
import copy
import io
import itertools
from typing import Any

import orjson
from PIL import Image

from clawpi.runner.images import UNREADABLE_IMAGE_TEXT
from clawpi.runner.sanitize import (
    GOOGLE_BOOTSTRAP_TEXT,
    GOOGLE_TURN_ORDERING_CUSTOM_TYPE,
    MODEL_SNAPSHOT_CUSTOM_TYPE,
    PRUNED_HISTORY_IMAGE_TEXT,
    REDACTED_ATTACHMENT,
    annotate_inter_session_user_messages,
    apply_google_turn_ordering_fix,
    downgrade_openai_reasoning_blocks,
    repair_tool_use_result_pairing,
    sanitize_antigravity_thinking_blocks,
    sanitize_session_history,
    sanitize_session_messages_images,
    sanitize_tool_call_ids,
    sanitize_tool_call_inputs,
    strip_tool_result_details,
)
from clawpi.runner.transcript_policy import resolve_transcript_policy
from clawpi.session import SessionManager
from clawpi.session.context import COMPACTION_SUMMARY_PREFIX
from clawpi.session.guard import MISSING_TOOL_RESULT_TEXT

ANTHROPIC = resolve_transcript_policy("anthropic-messages", "anthropic", "claude-sonnet-4-5")
GOOGLE = resolve_transcript_policy("google-generative-ai", "google", "gemini-2.5-pro")
OPENAI = resolve_transcript_policy("openai-responses", "openai", "gpt-5")
MISTRAL = resolve_transcript_policy("openai-completions", "mistral", "mistral-large")
ANTIGRAVITY_CLAUDE = resolve_transcript_policy(
    "google-antigravity", "google-antigravity", "claude-opus-4"
)
COPILOT_CLAUDE = resolve_transcript_policy("openai-completions", "github-copilot", "claude-4")


def user(text: str | list[Any], ts: int = 1, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": ts, **extra}


def assistant(*blocks: Any, stop: str = "stop", ts: int = 2, **extra: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": list(blocks),
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": {
            "input": 10,
            "output": 5,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 15,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": stop,
        "timestamp": ts,
        **extra,
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str, name: str = "read", args: Any = None) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": args or {"path": "a"}}


def result(call_id: str, body: str = "ok", name: str = "read", **extra: Any) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [text(body)],
        "isError": False,
        "timestamp": 3,
        **extra,
    }


def png(size: tuple[int, int], color: str = "red") -> str:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def image_block(size: tuple[int, int] = (8, 8)) -> dict[str, Any]:
    return {"type": "image", "data": png(size), "mimeType": "image/png"}


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


# -- step 1: inter-session provenance ------------------------------------------------------------

INTER = {
    "kind": "inter_session",
    "sourceSessionKey": "agent:main:slack:dm:u1",
    "sourceChannel": "slack",
    "sourceTool": "sessions_send",
}
PREFIX = (
    "[Inter-session message] sourceSession=agent:main:slack:dm:u1 sourceChannel=slack "
    "sourceTool=sessions_send"
)


def test_inter_session_prefix_is_added_once_to_string_content() -> None:
    once = annotate_inter_session_user_messages([user("hello", provenance=INTER)])
    assert once[0]["content"] == f"{PREFIX}\nhello"
    assert annotate_inter_session_user_messages(once) is once


def test_inter_session_prefix_goes_on_the_first_text_block() -> None:
    message = user([image_block(), text("look")], provenance=INTER)
    out = annotate_inter_session_user_messages([message])
    assert out[0]["content"][1]["text"] == f"{PREFIX}\nlook"
    assert out[0]["content"][0] == message["content"][0]


def test_messages_without_inter_session_provenance_are_untouched() -> None:
    messages = [user("hi", provenance={"kind": "external_user"}), user("plain")]
    assert annotate_inter_session_user_messages(messages) is messages


def test_delivery_mirror_messages_are_dropped_for_anthropic_only() -> None:
    mirror = assistant(text("sent to channel"), provider="openclaw", model="delivery-mirror")
    history = [user("hi"), assistant(text("hello")), mirror, user("next", ts=5)]
    for_anthropic = sanitize_session_history(
        history, ANTHROPIC, model_api="anthropic-messages", provider="anthropic"
    )
    assert mirror not in for_anthropic
    for_openai = sanitize_session_history(
        history, OPENAI, model_api="openai-responses", provider="openai"
    )
    assert mirror in for_openai


# -- step 2: ids, images, signatures, blank content ---------------------------------------------


def test_non_alphanumeric_tool_call_ids_become_strict_on_call_and_result() -> None:
    history = [user("hi"), assistant(call("functions.read:0")), result("functions.read:0")]
    out = sanitize_tool_call_ids(history, "strict")
    new_id = out[1]["content"][0]["id"]
    assert new_id == "functionsread0"
    assert out[2]["toolCallId"] == new_id
    assert history[1]["content"][0]["id"] == "functions.read:0"  # input untouched


def test_already_compatible_ids_return_the_same_list() -> None:
    history = [user("hi"), assistant(call("toolu01abc")), result("toolu01abc")]
    assert sanitize_tool_call_ids(history, "strict") is history


def test_ids_that_collide_after_sanitizing_stay_distinct_and_paired() -> None:
    history = [
        user("hi"),
        assistant(call("call_1"), call("call-1")),
        result("call_1", "first"),
        result("call-1", "second"),
    ]
    out = sanitize_tool_call_ids(history, "strict")
    first, second = (b["id"] for b in out[1]["content"])
    assert first != second and first.isalnum() and second.isalnum()
    assert [out[2]["toolCallId"], out[3]["toolCallId"]] == [first, second]


def test_a_reused_raw_id_maps_per_occurrence() -> None:
    history = [
        user("a"),
        assistant(call("c-1")),
        result("c-1", "one"),
        user("b"),
        assistant(call("c-1")),
        result("c-1", "two"),
    ]
    out = sanitize_tool_call_ids(history, "strict")
    assert out[1]["content"][0]["id"] != out[4]["content"][0]["id"]
    assert out[2]["toolCallId"] == out[1]["content"][0]["id"]
    assert out[5]["toolCallId"] == out[4]["content"][0]["id"]


def test_strict9_ids_are_nine_alphanumerics() -> None:
    history = [user("hi"), assistant(call("call_abcdefghijkl"), call("x")), result("x")]
    out = sanitize_tool_call_ids(history, "strict9")
    for block in out[1]["content"]:
        assert len(block["id"]) == 9 and block["id"].isalnum()
    assert out[2]["toolCallId"] == out[1]["content"][1]["id"]


def test_kimi_ids_are_kept_for_kimi_providers() -> None:
    history = [user("hi"), assistant(call("functions.read:0")), result("functions.read:0")]
    assert sanitize_tool_call_ids(history, "strict", keep_kimi_ids=True) is history


def test_native_anthropic_ids_are_kept_for_anthropic_while_foreign_ids_are_rewritten() -> None:
    history = [
        user("q"),
        assistant(call("toolu_01A09q90qw90lq917835lq9"), call("functions.read:0")),
        result("toolu_01A09q90qw90lq917835lq9"),
        result("functions.read:0"),
    ]
    out = sanitize_session_history(
        history, ANTHROPIC, model_api="anthropic-messages", provider="anthropic"
    )
    assert [b["id"] for b in out[1]["content"]] == [
        "toolu_01A09q90qw90lq917835lq9",
        "functionsread0",
    ]
    assert [m["toolCallId"] for m in out[2:]] == ["toolu_01A09q90qw90lq917835lq9", "functionsread0"]
    google = sanitize_session_history(history, GOOGLE, model_api="google-generative-ai")
    assert google[1]["content"][0]["id"] == "toolu01A09q90qw90lq917835lq9"


def test_openai_responses_keeps_tool_call_ids_while_images_are_still_sanitized() -> None:
    history = [
        user([text("see"), image_block((2400, 600))]),
        assistant(call("call_abc|fc_123")),
        result("call_abc|fc_123"),
    ]
    out = sanitize_session_history(history, OPENAI, model_api="openai-responses", provider="openai")
    assert out[1]["content"][0]["id"] == "call_abc|fc_123"
    assert out[2]["toolCallId"] == "call_abc|fc_123"
    resized = Image.open(io.BytesIO(base64.b64decode(out[0]["content"][1]["data"])))
    assert max(resized.size) == 1200


def test_undecodable_history_image_becomes_a_text_note() -> None:
    broken = {
        "type": "image",
        "data": base64.b64encode(b"not an image").decode(),
        "mimeType": "image/png",
    }
    out = sanitize_session_messages_images([user([text("x"), broken])], ANTHROPIC)
    assert out[0]["content"][1] == text(UNREADABLE_IMAGE_TEXT)


def test_images_within_limits_are_left_byte_identical() -> None:
    history = [user([text("x"), image_block((50, 50))]), assistant(text("nice"))]
    assert sanitize_session_messages_images(history, ANTHROPIC) is history


def test_processed_images_older_than_three_completed_turns_are_replaced() -> None:
    history: list[dict[str, Any]] = []
    for turn in range(5):
        history.append(user([text(f"turn {turn}"), image_block()], ts=turn * 10))
        history.append(assistant(text(f"reply {turn}"), ts=turn * 10 + 1))
    out = sanitize_session_messages_images(history, ANTHROPIC)
    kinds = [[b["type"] for b in m["content"]] for m in out if m["role"] == "user"]
    assert kinds[:2] == [["text", "text"]] * 2
    assert kinds[2:] == [["text", "image"]] * 3
    assert out[0]["content"][1] == text(PRUNED_HISTORY_IMAGE_TEXT)
    assert out[4] is history[4]  # recent turns byte-identical


def test_foreign_thought_signatures_are_stripped_for_google_but_base64_ones_kept() -> None:
    valid = base64.b64encode(b"gemini-signature-bytes").decode()
    message = assistant(
        {**call("c1"), "thoughtSignature": "msg_0123abc"},
        {**call("c2"), "thoughtSignature": valid},
        {"type": "thinking", "thinking": "hmm", "thinkingSignature": "not base64!"},
    )
    out = sanitize_session_messages_images([user("q"), message], GOOGLE)
    blocks = out[1]["content"]
    assert "thoughtSignature" not in blocks[0]
    assert blocks[1]["thoughtSignature"] == valid
    assert blocks[2] == message["content"][2]  # thinking blocks are never touched


def test_full_mode_drops_blank_text_and_empty_assistant_turns() -> None:
    history = [user("q"), assistant(text("  "), text("answer")), assistant(text("")), user("n")]
    out = sanitize_session_messages_images(history, ANTHROPIC)
    assert out[1]["content"] == [text("answer")]
    assert roles(out) == ["user", "assistant", "user"]


def test_images_only_mode_keeps_blank_text() -> None:
    history = [user("q"), assistant(text(" "), text("answer"))]
    assert sanitize_session_messages_images(history, OPENAI) is history


def test_copilot_claude_drops_thinking_but_never_empties_a_turn() -> None:
    history = [
        user("q"),
        assistant({"type": "thinking", "thinking": "x", "thinkingSignature": "reasoning_text"}),
    ]
    out = sanitize_session_history(history, COPILOT_CLAUDE, provider="github-copilot")
    assert out[1]["content"] == [text("")]


# -- step 3: Claude via Antigravity --------------------------------------------------------------


def test_antigravity_thinking_keeps_only_valid_base64_signatures_under_thinking_signature() -> None:
    good = base64.b64encode(b"0123456789ab").decode()
    message = assistant(
        {"type": "thinking", "thinking": "a", "signature": good},
        {"type": "thinking", "thinking": "b", "thinkingSignature": "msg_123"},
        text("done"),
    )
    out = sanitize_antigravity_thinking_blocks([user("q"), message])
    assert out[1]["content"] == [
        {"type": "thinking", "thinking": "a", "signature": good, "thinkingSignature": good},
        text("done"),
    ]
    assert sanitize_antigravity_thinking_blocks(out) is out


def test_antigravity_turn_with_only_unsigned_thinking_is_dropped() -> None:
    history = [user("q"), assistant({"type": "thinking", "thinking": "a"}), user("again")]
    assert roles(sanitize_antigravity_thinking_blocks(history)) == ["user", "user"]
    assert ANTIGRAVITY_CLAUDE.normalize_antigravity_thinking_blocks


# -- step 4: tool-call inputs ------------------------------------------------------------------


def test_malformed_tool_calls_are_dropped() -> None:
    no_args = {"type": "toolCall", "id": "c1", "name": "read"}
    blank_id = call(" ")
    bad_name = call("c3", "read file")
    long_name = call("c4", "x" * 65)
    good = call("c5", " read ")
    out = sanitize_tool_call_inputs(
        [user("q"), assistant(text("t"), no_args, blank_id, bad_name, long_name, good)]
    )
    assert out[1]["content"] == [text("t"), {**good, "name": "read"}]


def test_a_repeated_call_id_within_one_turn_is_dropped() -> None:
    history = [user("q"), assistant(call("c1", "read"), call("c1", "write"))]
    out = sanitize_tool_call_inputs(history)
    assert [b["name"] for b in out[1]["content"]] == ["read"]


def test_tool_calls_outside_the_allowlist_are_dropped_case_insensitively() -> None:
    history = [user("q"), assistant(call("c1", "Read"), call("c2", "rm_rf"))]
    out = sanitize_tool_call_inputs(history, allowed_tool_names=["read", "write"])
    assert [b["name"] for b in out[1]["content"]] == ["Read"]


def test_assistant_left_without_content_is_dropped() -> None:
    history = [user("q"), assistant(call("c1", "bad name")), user("r")]
    assert roles(sanitize_tool_call_inputs(history)) == ["user", "user"]


def test_sessions_spawn_attachment_contents_are_redacted() -> None:
    spawn = call(
        "c1",
        "sessions_spawn",
        {"task": "t", "attachments": [{"name": "a.txt", "content": "secret"}]},
    )
    out = sanitize_tool_call_inputs([user("q"), assistant(spawn)])
    assert out[1]["content"][0]["arguments"]["attachments"][0]["content"] == REDACTED_ATTACHMENT
    assert spawn["arguments"]["attachments"][0]["content"] == "secret"


def test_valid_tool_calls_return_the_same_list() -> None:
    history = [user("q"), assistant(call("c1")), result("c1")]
    assert sanitize_tool_call_inputs(history, allowed_tool_names=["read"]) is history


# -- step 5: pairing ---------------------------------------------------------------------------


def test_missing_result_gets_a_synthetic_error_right_after_the_call() -> None:
    history = [user("q"), assistant(call("c1"), call("c2"), ts=7), result("c2"), user("next")]
    report = repair_tool_use_result_pairing(history)
    out = report.messages
    assert roles(out) == ["user", "assistant", "toolResult", "toolResult", "user"]
    assert out[2]["toolCallId"] == "c1" and out[2]["isError"] is True
    assert out[2]["content"] == [text(MISSING_TOOL_RESULT_TEXT)]
    assert out[2]["timestamp"] == 7  # the call's time, not the clock
    assert out[3]["toolCallId"] == "c2"
    assert report.added == [out[2]]


def test_duplicate_results_are_dropped() -> None:
    history = [user("q"), assistant(call("c1")), result("c1", "a"), result("c1", "b")]
    report = repair_tool_use_result_pairing(history)
    assert [m.get("content") for m in report.messages[2:]] == [[text("a")]]
    assert report.dropped_duplicate_count == 1


def test_orphan_and_blank_id_results_are_dropped() -> None:
    history = [user("q"), result("ghost"), assistant(text("hi")), result(""), user("n")]
    report = repair_tool_use_result_pairing(history)
    assert roles(report.messages) == ["user", "assistant", "user"]
    assert report.dropped_orphan_count == 2


def test_results_that_come_later_are_moved_up() -> None:
    history = [user("q"), assistant(call("c1")), user("interrupt"), result("c1")]
    report = repair_tool_use_result_pairing(history)
    assert roles(report.messages) == ["user", "assistant", "toolResult", "user"]
    assert report.moved


def test_errored_or_aborted_assistants_get_no_synthetic_results() -> None:
    for stop in ("error", "aborted"):
        history = [user("q"), assistant(call("c1"), stop=stop), user("again")]
        report = repair_tool_use_result_pairing(history)
        assert report.messages is history and report.added == []


def test_a_blank_tool_name_is_backfilled_from_the_call() -> None:
    history = [user("q"), assistant(call("c1", "grep")), result("c1", name=" ")]
    assert repair_tool_use_result_pairing(history).messages[2]["toolName"] == "grep"


def test_well_paired_history_is_returned_as_is() -> None:
    history = [user("q"), assistant(call("c1")), result("c1"), assistant(text("done"))]
    assert repair_tool_use_result_pairing(history).messages is history


# -- step 6: details and stale usage -------------------------------------------------------------


def test_tool_result_details_are_stripped() -> None:
    history = [user("q"), assistant(call("c1")), result("c1", details={"diff": "..."})]
    out = strip_tool_result_details(history)
    assert "details" not in out[2] and "details" in history[2]


def test_usage_before_the_latest_compaction_is_zeroed() -> None:
    summary = user(COMPACTION_SUMMARY_PREFIX + "earlier stuff\n</summary>", ts=10)
    old = assistant(text("old"), ts=1)
    new = assistant(text("new"), ts=20)
    out = sanitize_session_history([user("a"), old, summary, user("b", ts=15), new], ANTHROPIC)
    assert out[1]["usage"]["totalTokens"] == 0
    assert out[4]["usage"]["totalTokens"] == 15


# -- step 7: OpenAI reasoning after a model switch -------------------------------------------------


def reasoning(item_id: str) -> dict[str, Any]:
    signature = orjson.dumps({"type": "reasoning", "id": item_id, "summary": []}).decode()
    return {"type": "thinking", "thinking": "", "thinkingSignature": signature}


def test_standalone_reasoning_items_are_dropped() -> None:
    history = [user("q"), assistant(reasoning("rs_1")), assistant(reasoning("rs_2"), text("hi"))]
    out = downgrade_openai_reasoning_blocks(history)
    assert roles(out) == ["user", "assistant"]
    assert out[1] is history[2]


def test_reasoning_downgrade_happens_only_when_the_model_changed() -> None:
    session = SessionManager.in_memory()
    history = [user("q"), assistant(reasoning("rs_1"))]
    kwargs: dict[str, Any] = {
        "model_api": "openai-responses",
        "provider": "openai",
        "session_manager": session,
    }
    first = sanitize_session_history(history, OPENAI, model_id="gpt-5", **kwargs)
    assert first == history  # first snapshot: nothing to compare with
    same = sanitize_session_history(history, OPENAI, model_id="gpt-5", **kwargs)
    assert same == history
    switched = sanitize_session_history(history, OPENAI, model_id="gpt-5-mini", **kwargs)
    assert roles(switched) == ["user"]
    snapshots = [
        e["data"]["modelId"]
        for e in session.get_entries()
        if e.get("customType") == MODEL_SNAPSHOT_CUSTOM_TYPE
    ]
    assert snapshots == ["gpt-5", "gpt-5-mini"]


# -- step 8: Gemini turn ordering ---------------------------------------------------------------


def test_google_history_starting_with_assistant_gets_a_bootstrap_user_turn() -> None:
    session = SessionManager.in_memory()
    history = [assistant(text("hello"), ts=42), user("hi")]
    out = sanitize_session_history(
        history,
        GOOGLE,
        model_api="google-generative-ai",
        provider="google",
        model_id="gemini-2.5-pro",
        session_manager=session,
    )
    assert out[0] == {"role": "user", "content": GOOGLE_BOOTSTRAP_TEXT, "timestamp": 42}
    again = sanitize_session_history(
        out,
        GOOGLE,
        model_api="google-generative-ai",
        provider="google",
        model_id="gemini-2.5-pro",
        session_manager=session,
    )
    assert again == out
    apply_google_turn_ordering_fix(history, session)
    markers = [
        e for e in session.get_entries() if e.get("customType") == GOOGLE_TURN_ORDERING_CUSTOM_TYPE
    ]
    assert len(markers) == 1


def test_non_google_policies_never_prepend_a_bootstrap_turn() -> None:
    history = [assistant(text("hello")), user("hi")]
    out = sanitize_session_history(history, ANTHROPIC, model_api="anthropic-messages")
    assert out[0]["role"] == "assistant"


# -- the whole pipeline ------------------------------------------------------------------------


def messy_history() -> list[dict[str, Any]]:
    return [
        user("relayed", provenance=INTER),
        assistant(text(" "), call("functions.read:0"), call("c 2", "bad name")),
        user("interrupt"),
        result("functions.read:0", details={"ui": 1}),
        result("functions.read:0", "dup"),
        result("ghost"),
        assistant({**call("call|2", "grep"), "thoughtSignature": "msg_x"}, ts=5),
        user([text("look"), image_block((1600, 200))]),
        assistant(text(""), stop="aborted"),
        assistant(call("e1"), stop="error"),
        user("last"),
    ]


def test_pipeline_is_idempotent_for_every_policy() -> None:
    for policy, api, provider in (
        (ANTHROPIC, "anthropic-messages", "anthropic"),
        (GOOGLE, "google-generative-ai", "google"),
        (OPENAI, "openai-responses", "openai"),
        (MISTRAL, "openai-completions", "mistral"),
    ):
        once = sanitize_session_history(messy_history(), policy, model_api=api, provider=provider)
        twice = sanitize_session_history(once, policy, model_api=api, provider=provider)
        assert twice == once, policy


def test_pipeline_is_deterministic_and_leaves_its_input_alone() -> None:
    history = messy_history()
    before = copy.deepcopy(history)
    first = sanitize_session_history(
        history, ANTHROPIC, model_api="anthropic-messages", provider="anthropic"
    )
    second = sanitize_session_history(
        copy.deepcopy(before), ANTHROPIC, model_api="anthropic-messages", provider="anthropic"
    )
    assert orjson.dumps(first) == orjson.dumps(second)
    assert history == before


def test_pipeline_output_pairs_every_call_with_one_result() -> None:
    out = sanitize_session_history(
        messy_history(), ANTHROPIC, model_api="anthropic-messages", provider="anthropic"
    )
    for index, message in enumerate(out):
        if message["role"] != "assistant" or message["stopReason"] in ("error", "aborted"):
            continue
        ids = [b["id"] for b in message["content"] if b["type"] == "toolCall"]
        following = [m["toolCallId"] for m in out[index + 1 : index + 1 + len(ids)]]
        assert following == ids
        assert all(c.isalnum() for c in "".join(ids))
    assert all("details" not in m for m in out)
    assert out[0]["content"].startswith("[Inter-session message]")


def test_results_are_put_in_call_order() -> None:
    history = [user("q"), assistant(call("c1"), call("c2")), result("c2"), result("c1")]
    out = repair_tool_use_result_pairing(history).messages
    assert [m["toolCallId"] for m in out[2:]] == ["c1", "c2"]


def test_an_id_reused_in_a_later_turn_keeps_each_turns_own_result() -> None:
    history = [
        user("a"),
        assistant(call("functions.read:0")),
        result("functions.read:0", "first"),
        user("b"),
        assistant(call("functions.read:0")),
        result("functions.read:0", "second"),
    ]
    report = repair_tool_use_result_pairing(history)
    assert report.messages is history
    assert report.added == [] and report.dropped_duplicate_count == 0


def test_usage_of_entries_kept_by_a_compaction_is_zeroed_by_timestamp() -> None:
    summary = user(COMPACTION_SUMMARY_PREFIX + "earlier\n</summary>", ts=100)
    kept_old = assistant(text("kept from before"), ts=50)
    fresh = assistant(text("after"), ts=150)
    out = sanitize_session_history(
        [summary, user("a", ts=40), kept_old, user("b", ts=140), fresh], ANTHROPIC
    )
    assert out[2]["usage"]["totalTokens"] == 0
    assert out[4]["usage"]["totalTokens"] == 15


def test_a_crashed_session_file_replays_validly_for_every_provider(tmp_path: Any) -> None:
    from clawpi.runner.history import limit_history_turns
    from clawpi.runner.sanitize import sanitize_tool_use_result_pairing
    from clawpi.runner.turn_validation import validate_replay_turns

    session = SessionManager.open(tmp_path / "crash.jsonl")
    session.append_message(user("first"))
    session.append_message(assistant(text("ok")))
    session.append_message(user("run two tools"))
    session.append_message(assistant(call("toolu_01:a"), call("toolu_01:b"), stop="toolUse"))
    session.append_message(result("toolu_01:a"))  # crash before the second result
    session.append_message(user("are you there?"))
    session.append_message(user("hello??"))
    messages = SessionManager.open(tmp_path / "crash.jsonl").build_session_context().messages

    for policy, api, provider in (
        (ANTHROPIC, "anthropic-messages", "anthropic"),
        (GOOGLE, "google-generative-ai", "google"),
        (OPENAI, "openai-responses", "openai"),
        (MISTRAL, "openai-completions", "mistral"),
    ):
        prepared = sanitize_session_history(messages, policy, model_api=api, provider=provider)
        prepared = validate_replay_turns(prepared, policy)
        prepared = limit_history_turns(prepared, 2)
        prepared = sanitize_tool_use_result_pairing(prepared)
        assert prepared[0]["role"] == "user"
        for index, message in enumerate(prepared):
            if message["role"] == "toolResult":
                owner = next(m for m in reversed(prepared[:index]) if m["role"] == "assistant")
                assert message["toolCallId"] in [
                    b["id"] for b in owner["content"] if b["type"] == "toolCall"
                ]
            if message["role"] == "assistant":
                ids = [b["id"] for b in message["content"] if b["type"] == "toolCall"]
                answers = [m["toolCallId"] for m in prepared[index + 1 : index + 1 + len(ids)]]
                assert answers == ids, provider
        pairs = list(itertools.pairwise(prepared))
        if policy.validate_anthropic_turns:
            assert not any(a["role"] == b["role"] == "user" for a, b in pairs)
        if policy.validate_gemini_turns:
            assert not any(a["role"] == b["role"] == "assistant" for a, b in pairs)


# -- properties over generated histories ---------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_IDS = st.sampled_from(["c1", "c-2", "call_3|fc_3", "functions.read:0", "", "toolu_01A"])
_NAMES = st.sampled_from(["read", "bad name", "write", " grep "])


@st.composite
def _histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for step in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "assistant", "result", "text"]))
        if kind == "user":
            out.append(user(draw(st.sampled_from(["hi", "", "more"])), ts=step))
        elif kind == "assistant":
            calls = [call(draw(_IDS), draw(_NAMES)) for _ in range(draw(st.integers(0, 2)))]
            stop = draw(st.sampled_from(["stop", "toolUse", "error", "aborted"]))
            out.append(assistant(*calls, stop=stop, ts=step))
        elif kind == "text":
            out.append(assistant(text(draw(st.sampled_from(["", "ok", " "]))), ts=step))
        else:
            out.append(result(draw(_IDS), details={"x": step}))
    return out


_POLICIES = [
    (ANTHROPIC, "anthropic-messages", "anthropic"),
    (GOOGLE, "google-generative-ai", "google"),
    (OPENAI, "openai-responses", "openai"),
    (MISTRAL, "openai-completions", "mistral"),
]


@settings(max_examples=80, deadline=None)
@given(_histories(), st.sampled_from(_POLICIES))
def test_property_pipeline_is_idempotent_and_pairs_every_call(
    history: list[dict[str, Any]], target: tuple[Any, str, str]
) -> None:
    policy, api, provider = target
    before = copy.deepcopy(history)
    once = sanitize_session_history(history, policy, model_api=api, provider=provider)
    assert history == before
    assert sanitize_session_history(once, policy, model_api=api, provider=provider) == once
    for index, message in enumerate(once):
        if message["role"] == "assistant" and message["stopReason"] not in ("error", "aborted"):
            ids = [b["id"] for b in message["content"] if b["type"] == "toolCall"]
            answers = [m.get("toolCallId") for m in once[index + 1 : index + 1 + len(ids)]]
            assert answers == ids
        if message["role"] == "toolResult":
            owner = next(m for m in reversed(once[:index]) if m["role"] == "assistant")
            assert message["toolCallId"] in [b["id"] for b in owner["content"]]
            assert "details" not in message
