"""build_embedded_run_payloads: order, error copy, tool warnings, silence, dedupe (§4.21)."""

from __future__ import annotations

from typing import Any

from clawpi.reply import ReplyPayload, ToolErrorInfo, build_embedded_run_payloads, reply_dedupe_key
from clawpi.reply import user_text as copy

OVERLOADED = '529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
BILLING = (
    '400 {"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance '
    "is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase "
    'credits."}}'
)


def assistant(
    text: str = "", stop: str = "stop", error: str | None = None, thinking: str | None = None
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": thinking})
    if text:
        content.append({"type": "text", "text": text})
    msg: dict[str, Any] = {"role": "assistant", "content": content, "stopReason": stop, "usage": {}}
    if error is not None:
        msg["errorMessage"] = error
    return msg


def texts(payloads: list[ReplyPayload]) -> list[str | None]:
    return [p.text for p in payloads]


def test_overloaded_error_gives_copy_once() -> None:
    failed = assistant(stop="error", error=OVERLOADED)
    payloads = build_embedded_run_payloads(assistant_texts=[OVERLOADED], last_assistant=failed)
    assert texts(payloads) == [copy.OVERLOADED_TEXT]
    assert payloads[0].is_error


def test_raw_error_suppressed_when_an_answer_exists() -> None:
    failed = assistant(
        stop="error", error='500 {"type":"error","error":{"type":"api_error","message":"boom"}}'
    )
    payloads = build_embedded_run_payloads(
        assistant_texts=["Partial answer."], last_assistant=failed
    )
    assert texts(payloads) == ["Partial answer."]


def test_error_with_no_text_gives_exactly_one_payload() -> None:
    failed = assistant(stop="error", error="boom")
    payloads = build_embedded_run_payloads(assistant_texts=[], last_assistant=failed)
    assert texts(payloads) == ["boom"]


def test_context_overflow_always_gets_its_copy() -> None:
    failed = assistant(stop="error", error="prompt is too long: 300000 tokens > 200000 maximum")
    payloads = build_embedded_run_payloads(assistant_texts=["some text"], last_assistant=failed)
    assert texts(payloads) == [copy.CONTEXT_OVERFLOW_TEXT, "some text"]


def test_anthropic_billing_error_copy() -> None:
    payloads = build_embedded_run_payloads(
        assistant_texts=[], last_assistant=assistant(stop="error", error=BILLING)
    )
    assert texts(payloads) == [copy.BILLING_ERROR_TEXT]


def test_reasoning_on_goes_first() -> None:
    last = assistant("The answer.", thinking="I thought")
    payloads = build_embedded_run_payloads(
        assistant_texts=["The answer."], last_assistant=last, reasoning_level="on"
    )
    assert texts(payloads) == ["Reasoning:\n_I thought_", "The answer."]
    assert payloads[0].is_reasoning
    plain = build_embedded_run_payloads(assistant_texts=["The answer."], last_assistant=last)
    assert texts(plain) == ["The answer."]


def test_falls_back_to_last_assistant_text() -> None:
    payloads = build_embedded_run_payloads(
        assistant_texts=[], last_assistant=assistant("<think>x</think>Hi")
    )
    assert texts(payloads) == ["Hi"]


def test_recoverable_tool_error_gives_no_warning() -> None:
    err = ToolErrorInfo(tool_name="read", error="path is required")
    assert build_embedded_run_payloads(assistant_texts=[], last_tool_error=err) == []


def test_non_recoverable_tool_error_without_reply_warns() -> None:
    err = ToolErrorInfo(
        tool_name="exec", error="permission denied", meta="rm /x", mutating_action=False
    )
    payloads = build_embedded_run_payloads(assistant_texts=[], last_tool_error=err)
    assert texts(payloads) == ["⚠️ Exec (rm /x) failed: permission denied"]
    assert payloads[0].is_error


def test_tool_error_with_an_answer_is_quiet_unless_mutating() -> None:
    err = ToolErrorInfo(tool_name="web_fetch", error="404 not found")
    assert texts(build_embedded_run_payloads(assistant_texts=["Answer"], last_tool_error=err)) == [
        "Answer"
    ]
    mutating = ToolErrorInfo(tool_name="write", error="disk full", mutating_action=True)
    payloads = build_embedded_run_payloads(assistant_texts=["Answer"], last_tool_error=mutating)
    assert texts(payloads) == ["Answer", "⚠️ Write failed"]
    verbose = build_embedded_run_payloads(
        assistant_texts=["Answer"], last_tool_error=mutating, verbose_level="on"
    )
    assert texts(verbose)[-1] == "⚠️ Write failed: disk full"


def test_suppressed_tool_errors_still_report_mutating_failures() -> None:
    plain = ToolErrorInfo(tool_name="web_fetch", error="timeout")
    assert (
        build_embedded_run_payloads(
            assistant_texts=[], last_tool_error=plain, suppress_tool_errors=True
        )
        == []
    )
    mutating = ToolErrorInfo(tool_name="edit", error="no match", mutating_action=True)
    assert (
        len(
            build_embedded_run_payloads(
                assistant_texts=[], last_tool_error=mutating, suppress_tool_errors=True
            )
        )
        == 1
    )


def test_messaging_tool_delivery_silences_its_own_failure_warning() -> None:
    err = ToolErrorInfo(tool_name="message", error="boom", mutating_action=True, messaging=True)
    payloads = build_embedded_run_payloads(
        assistant_texts=[],
        last_tool_error=err,
        did_send_via_messaging_tool=True,
        messaging_tool_sent_texts=["x"],
    )
    assert payloads == []


def test_no_reply_is_dropped() -> None:
    assert build_embedded_run_payloads(assistant_texts=["NO_REPLY"]) == []
    assert build_embedded_run_payloads(assistant_texts=["  NO_REPLY  "]) == []
    kept = build_embedded_run_payloads(assistant_texts=["NO_REPLY\nMEDIA: https://x.example/a.png"])
    assert [p.media_urls for p in kept] == [["https://x.example/a.png"]]


def test_messaging_tool_duplicate_final_text_is_dropped() -> None:
    payloads = build_embedded_run_payloads(
        assistant_texts=["The meeting is at 3pm tomorrow!"],
        did_send_via_messaging_tool=True,
        messaging_tool_sent_texts=["the meeting is at 3pm tomorrow"],
    )
    assert payloads == []


def test_audio_as_voice_applies_to_every_media_payload() -> None:
    payloads = build_embedded_run_payloads(
        assistant_texts=[
            "First\nMEDIA: https://x.example/a.ogg",
            "[[voice]] Second\nMEDIA: https://x.example/b.ogg",
            "Text only",
        ]
    )
    assert [p.audio_as_voice for p in payloads] == [True, True, False]


def test_directives_applied_to_answers() -> None:
    payloads = build_embedded_run_payloads(
        assistant_texts=["[[reply_to_current]] Here\nMEDIA: https://x.example/p.png"],
        current_message_id="m7",
    )
    assert len(payloads) == 1
    p = payloads[0]
    assert (p.text, p.media_url, p.reply_to_id, p.reply_to_current) == (
        "Here",
        "https://x.example/p.png",
        "m7",
        True,
    )


def test_streamed_blocks_are_not_repeated_and_key_ignores_reply_target() -> None:
    streamed = {reply_dedupe_key("Block one."), reply_dedupe_key("Block  two.")}
    payloads = build_embedded_run_payloads(
        assistant_texts=["[[reply_to_current]] Block one.", "Block two.", "New"],
        streamed_keys=streamed,
        current_message_id="m1",
    )
    assert texts(payloads) == ["New"]
    assert ReplyPayload(text="a", reply_to_id="1").dedupe_key == ReplyPayload(text="a").dedupe_key
    assert ReplyPayload(text="a", media_urls=["u"]).dedupe_key != ReplyPayload(text="a").dedupe_key
