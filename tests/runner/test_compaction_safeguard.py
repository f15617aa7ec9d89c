"""Compaction safeguard: chunked summarisation with fallbacks, extra sections, cancel rules,
and the extension inside a real AgentSession compaction."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from clawpi.runner.extensions.compaction_safeguard import (
    BASE_CHUNK_RATIO,
    MAX_COMPACTION_SUMMARY_CHARS,
    MERGE_INSTRUCTIONS,
    MIN_CHUNK_RATIO,
    REQUIRED_SUMMARY_SECTIONS,
    STRICT_IDENTIFIER_INSTRUCTIONS,
    SUMMARY_TRUNCATED_MARKER,
    CompactionSafeguardRuntime,
    Summarizer,
    SummaryUnavailable,
    chunk_messages_by_max_tokens,
    collect_tool_failures,
    compaction_safeguard_extension,
    compute_adaptive_chunk_ratio,
    estimate_messages_tokens,
    format_tool_failures_section,
    is_safeguard_mode,
    prune_history_for_context_share,
    resolve_compaction_safeguard_runtime,
    run_compaction_safeguard,
    split_messages_by_token_share,
)
from clawpi.sdk import SettingsManager, create_agent_session
from clawpi.sdk.compaction import CompactionError, CompactionPreparation, FileOperations
from clawpi.sdk.compaction.prompts import TURN_PREFIX_PROMPT
from clawpi.session import SessionManager
from clawpi.testing import FauxResponse, FunctionProvider

GOOD_SUMMARY = "\n".join(f"{heading}\n(none)" for heading in REQUIRED_SUMMARY_SECTIONS)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 0}


def assistant(
    text: str = "", calls: Sequence[tuple[str, str, dict[str, Any]]] = ()
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call_id, name, args in calls:
        content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": args})
    return {"role": "assistant", "content": content, "stopReason": "stop", "timestamp": 0}


def tool_result(
    call_id: str, text: str, *, error: bool = False, name: str = "exec", details: Any = None
) -> dict[str, Any]:
    message = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": error,
        "timestamp": 0,
    }
    if details is not None:
        message["details"] = details
    return message


def preparation(
    messages: list[dict[str, Any]],
    *,
    prefix: list[dict[str, Any]] | None = None,
    previous: str | None = None,
    tokens_before: int | None = None,
    reserve: int = 2_000,
) -> CompactionPreparation:
    ops = FileOperations()
    ops.add_from_messages(messages)
    ops.add_from_messages(prefix or [])
    return CompactionPreparation(
        first_kept_entry_id="keep1",
        messages_to_summarize=messages,
        turn_prefix_messages=prefix or [],
        is_split_turn=bool(prefix),
        tokens_before=tokens_before
        if tokens_before is not None
        else estimate_messages_tokens([*messages, *(prefix or [])]) + 100,
        previous_summary=previous,
        file_ops=ops,
        reserve_tokens=reserve,
        keep_recent_tokens=100,
    )


def request_text(context: Any) -> str:
    return "".join(b["text"] for b in context["messages"][-1]["content"])


class Recorder:
    """A FunctionProvider model whose answers are chosen per request; requests are kept."""

    def __init__(self, answer: Any = GOOD_SUMMARY, **model: Any) -> None:
        self.texts: list[str] = []
        self.answer = answer
        self.provider = FunctionProvider(self._respond, **model)

    def _respond(self, context: Any, options: Any) -> Any:
        text = request_text(context)
        self.texts.append(text)
        return self.answer(text) if callable(self.answer) else self.answer


async def _no_sleep(seconds: float) -> None:
    return None


def runtime(recorder: Recorder, **fields: Any) -> CompactionSafeguardRuntime:
    fields.setdefault("sleep", _no_sleep)
    return CompactionSafeguardRuntime(
        model=recorder.provider.model, api_key="test-key", rng=random.Random(0), **fields
    )


async def decide(prep: CompactionPreparation, rt: CompactionSafeguardRuntime, **event: Any) -> Any:
    return await run_compaction_safeguard({"preparation": prep, **event}, None, rt)


BASIC = [user("please fix the bug"), assistant("fixed it"), user("thanks"), assistant("welcome")]


# -- cancel rules -----------------------------------------------------------------------------


async def test_no_api_key_cancels(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder()
    rt = runtime(recorder)
    rt.api_key = None
    assert await decide(preparation(BASIC), rt) == {"cancel": True}
    assert rt.last_cancel_reason is not None and "no API key" in rt.last_cancel_reason
    assert recorder.texts == []


async def test_no_model_cancels() -> None:
    rt = CompactionSafeguardRuntime(api_key="k")
    assert await decide(preparation(BASIC), rt) == {"cancel": True}


async def test_nothing_but_metadata_to_summarise_cancels() -> None:
    recorder = Recorder()
    summaries = [{"role": "compactionSummary", "summary": "old", "timestamp": 0}]
    assert await decide(preparation(summaries), runtime(recorder)) == {"cancel": True}


async def test_a_failing_model_cancels_instead_of_writing_an_empty_summary() -> None:
    recorder = Recorder(FauxResponse(error="500 upstream exploded"))
    rt = runtime(recorder)
    assert await decide(preparation(BASIC), rt) == {"cancel": True}
    assert len(recorder.texts) == 3  # retried, then gave up
    assert rt.last_cancel_reason is not None and "upstream exploded" in rt.last_cancel_reason


async def test_an_empty_model_answer_is_never_written() -> None:
    recorder = Recorder("   ")
    assert await decide(preparation(BASIC), runtime(recorder)) == {"cancel": True}


async def test_retries_back_off_with_jitter_and_then_succeed() -> None:
    answers = iter([FauxResponse(error="429 slow down"), FauxResponse(error="503"), GOOD_SUMMARY])
    recorder = Recorder(lambda _text: next(answers))
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    rt = runtime(recorder, sleep=sleep)
    decision = await decide(preparation(BASIC), rt)
    assert "compaction" in decision
    assert len(slept) == 2
    assert 0.4 <= slept[0] <= 0.6 and 0.8 <= slept[1] <= 1.2


# -- the summary and its sections -------------------------------------------------------------


async def test_summary_result_carries_ids_tokens_and_file_lists() -> None:
    messages = [
        user("edit the config"),
        assistant(calls=[("r1", "read", {"path": "src/a.py"}), ("w1", "write", {"path": "b.txt"})]),
        tool_result("r1", "contents", name="read"),
        tool_result("w1", "ok", name="write"),
        assistant("done"),
    ]
    recorder = Recorder()
    prep = preparation(messages)
    decision = await decide(prep, runtime(recorder, recent_turns_preserve=0))
    compaction = decision["compaction"]
    assert compaction["firstKeptEntryId"] == "keep1"
    assert compaction["tokensBefore"] == prep.tokens_before
    assert compaction["details"] == {"readFiles": ["src/a.py"], "modifiedFiles": ["b.txt"]}
    summary = compaction["summary"]
    assert summary.startswith(GOOD_SUMMARY)
    assert "<read-files>\nsrc/a.py\n</read-files>" in summary
    assert "<modified-files>\nb.txt\n</modified-files>" in summary


def test_tool_failures_are_formatted_deduplicated_and_capped() -> None:
    messages: list[dict[str, Any]] = [
        tool_result("ok", "fine"),
        tool_result("e1", "  command\n\nnot   found  ", error=True, details={"exitCode": 127}),
        tool_result("e1", "duplicate of e1", error=True),
        tool_result("e2", "", error=True, name=" ", details={"status": "timeout"}),
        tool_result("e3", "x" * 500, error=True, name="web_fetch"),
    ]
    messages += [tool_result(f"m{i}", f"fail {i}", error=True) for i in range(7)]
    failures = collect_tool_failures(messages)
    assert [f["toolCallId"] for f in failures][:3] == ["e1", "e2", "e3"]
    assert len(failures) == 10
    section = format_tool_failures_section(failures)
    lines = section.strip().splitlines()
    assert lines[0] == "## Tool Failures"
    assert lines[1] == "- exec (exitCode=127): command not found"
    assert lines[2] == "- tool (status=timeout): failed"
    assert lines[3] == "- web_fetch: " + "x" * 237 + "..."
    assert len(lines) == 1 + 8 + 1
    assert lines[-1] == "- ...and 2 more"
    assert format_tool_failures_section([]) == ""


async def test_tool_failures_section_lands_in_the_summary() -> None:
    messages = [
        user("run it"),
        assistant(calls=[("c1", "exec", {"command": "make"})]),
        tool_result("c1", "make: *** no rule", error=True, details={"exitCode": 2}),
        assistant("it failed"),
    ]
    recorder = Recorder()  # keep the scripted model alive for the whole call
    decision = await decide(preparation(messages), runtime(recorder, recent_turns_preserve=0))
    assert (
        "\n\n## Tool Failures\n- exec (exitCode=2): make: *** no rule"
        in (decision["compaction"]["summary"])
    )


async def test_recent_turns_are_preserved_verbatim_up_to_the_count() -> None:
    messages = []
    for index in range(5):
        messages += [user(f"question {index}"), assistant(f"answer {index}")]
    messages[-1] = assistant("y" * 1_000)
    recorder = Recorder()
    decision = await decide(preparation(messages), runtime(recorder, recent_turns_preserve=2))
    summary = decision["compaction"]["summary"]
    section = summary.split("## Recent turns (verbatim)\n", 1)[1]
    assert section.splitlines()[:3] == [
        "User: question 3",
        "Assistant: answer 3",
        "User: question 4",
    ]
    assert "question 2" not in section
    assert "Assistant: " + "y" * 597 + "..." in section


async def test_identifier_policy_strict_off_and_custom() -> None:
    strict = Recorder()
    await decide(preparation(BASIC), runtime(strict))
    assert STRICT_IDENTIFIER_INSTRUCTIONS in strict.texts[0]

    off = Recorder()
    await decide(preparation(BASIC), runtime(off, identifier_policy="off"))
    assert STRICT_IDENTIFIER_INSTRUCTIONS not in off.texts[0]

    custom = Recorder()
    rt = runtime(custom, identifier_policy="custom", identifier_instructions="Keep ticket ids.")
    await decide(preparation(BASIC), rt, customInstructions="Focus on the bug.")
    assert "Keep ticket ids." in custom.texts[0]
    assert "Focus on the bug." in custom.texts[0]
    assert STRICT_IDENTIFIER_INSTRUCTIONS not in custom.texts[0]


async def test_quality_guard_retries_when_sections_are_missing() -> None:
    answers = iter(["just some prose", GOOD_SUMMARY])
    recorder = Recorder(lambda _text: next(answers))
    decision = await decide(preparation(BASIC), runtime(recorder, recent_turns_preserve=0))
    assert len(recorder.texts) == 2
    assert "missing section ## Decisions" in recorder.texts[1]
    assert decision["compaction"]["summary"].startswith(GOOD_SUMMARY)


async def test_a_failed_quality_retry_keeps_the_first_summary() -> None:
    answers = iter(["prose summary"] + [FauxResponse(error="503 busy")] * 3)
    recorder = Recorder(lambda _text: next(answers))
    decision = await decide(preparation(BASIC), runtime(recorder, recent_turns_preserve=0))
    assert decision["compaction"]["summary"] == "prose summary"


async def test_quality_guard_checks_strict_identifiers_and_can_be_disabled() -> None:
    messages = [user("deploy https://example.com/api/v2 from /srv/app/main.py"), assistant("ok")]
    recorder = Recorder()
    await decide(preparation(messages), runtime(recorder, quality_guard_max_retries=3))
    assert len(recorder.texts) == 4  # never fixed: first try plus three retries
    assert "missing identifier https://example.com/api/v2" in recorder.texts[1]
    assert "missing identifier /srv/app/main.py" in recorder.texts[1]

    disabled = Recorder("prose only")
    decision = await decide(preparation(BASIC), runtime(disabled, quality_guard_enabled=False))
    assert len(disabled.texts) == 1
    assert decision["compaction"]["summary"].startswith("prose only")


async def test_split_turn_prefix_is_summarised_separately() -> None:
    recorder = Recorder(
        lambda text: "PREFIX SUMMARY" if TURN_PREFIX_PROMPT in text else GOOD_SUMMARY
    )
    prefix = [user("big task"), assistant(calls=[("p1", "exec", {"command": "ls"})])]
    prep = preparation(BASIC, prefix=prefix)
    decision = await decide(prep, runtime(recorder, recent_turns_preserve=0))
    summary = decision["compaction"]["summary"]
    assert summary.startswith(GOOD_SUMMARY + "\n\n---\n\n**Turn Context (split turn):**\n\n")
    assert "PREFIX SUMMARY" in summary
    assert sum(TURN_PREFIX_PROMPT in t for t in recorder.texts) == 1


async def test_workspace_critical_rules_are_appended(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text(
        "# Agents\n\n## Red Lines\nNever push to main.\n\n## Other\nignored\n\n"
        "## Session Startup\nRead USER.md first.\n"
    )
    recorder = Recorder()
    rt = runtime(recorder, workspace_dir=tmp_path)
    summary = (await decide(preparation(BASIC), rt))["compaction"]["summary"]
    block = summary.split("<workspace-critical-rules>\n", 1)[1]
    assert "Never push to main." in block and "Read USER.md first." in block
    assert "ignored" not in block


async def test_summary_is_capped_with_a_marker_but_keeps_the_appended_sections() -> None:
    recorder = Recorder(GOOD_SUMMARY + "z" * 40_000)
    messages = [
        user("go"),
        assistant(calls=[("c1", "read", {"path": "notes.md"})]),
        tool_result("c1", "boom", error=True, name="read"),
    ]
    summary = (await decide(preparation(messages), runtime(recorder)))["compaction"]["summary"]
    assert len(summary) <= MAX_COMPACTION_SUMMARY_CHARS
    assert SUMMARY_TRUNCATED_MARKER in summary
    assert summary.endswith("<read-files>\nnotes.md\n</read-files>")
    assert "## Tool Failures" in summary


# -- chunking, stages and fallbacks -----------------------------------------------------------


def test_split_by_token_share_is_balanced_and_keeps_order() -> None:
    messages = [user(f"{i}" * 400) for i in range(10)]
    parts = split_messages_by_token_share(messages, 2)
    assert [m for part in parts for m in part] == messages
    assert [len(p) for p in parts] == [5, 5]
    three = split_messages_by_token_share(messages, 3)
    assert len(three) == 3 and all(3 <= len(p) <= 4 for p in three)
    assert split_messages_by_token_share([], 2) == []


def test_chunk_by_max_tokens_isolates_oversized_messages() -> None:
    small = [user("a" * 400) for _ in range(3)]  # 100 tokens each
    huge = user("b" * 40_000)  # 10,000 tokens
    chunks = chunk_messages_by_max_tokens([*small, huge, *small], 360)  # limit 300 after margin
    assert chunks == [small, [huge], small]
    tight = chunk_messages_by_max_tokens(small, 200)  # limit ~166: one message per chunk
    assert [len(c) for c in tight] == [1, 1, 1]


def test_adaptive_ratio_drops_for_large_messages_and_never_below_min() -> None:
    small = [user("a" * 400) for _ in range(10)]
    assert compute_adaptive_chunk_ratio(small, 100_000) == BASE_CHUNK_RATIO
    large = [user("a" * 60_000) for _ in range(4)]  # 15k tokens each, 18% of 100k with margin
    ratio = compute_adaptive_chunk_ratio(large, 100_000)
    assert MIN_CHUNK_RATIO < ratio < BASE_CHUNK_RATIO
    huge = [user("a" * 400_000)]
    assert compute_adaptive_chunk_ratio(huge, 100_000) == pytest.approx(MIN_CHUNK_RATIO)
    assert compute_adaptive_chunk_ratio([], 100_000) == BASE_CHUNK_RATIO


def test_history_pruning_drops_oldest_chunks_and_orphaned_results() -> None:
    messages = [
        user("a" * 4_000),
        assistant(calls=[("old", "exec", {})]),
        tool_result("old", "x" * 4_000),
        user("b" * 4_000),
        assistant(calls=[("new", "exec", {})]),
        tool_result("new", "y" * 400),
        assistant("done"),
    ]
    # split so that the 'old' call lands in the dropped half and its result does not
    result = prune_history_for_context_share(messages, max_context_tokens=2_000, parts=2)
    assert result.dropped_chunks >= 1
    kept_ids = {m.get("toolCallId") for m in result.messages if m["role"] == "toolResult"}
    kept_calls = {
        b["id"]
        for m in result.messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "toolCall"
    }
    assert kept_ids <= kept_calls  # no orphan results survive
    assert result.messages[-1] == messages[-1]
    assert result.kept_tokens <= result.budget_tokens
    assert result.dropped_messages == len(result.dropped_messages_list)
    assert len(result.messages) + result.dropped_messages == len(messages)


async def test_summaries_go_in_stages_then_merge() -> None:
    recorder = Recorder(model_id="stages", context_window=20_000)
    messages = [user(f"{i}" * 8_000) for i in range(6)]  # 2,000 tokens each
    summarizer = Summarizer(
        model=recorder.provider.model,
        api_key="k",
        reserve_tokens=1_000,
        context_window=20_000,
        sleep=_no_sleep,
    )
    text = await summarizer.summarize_in_stages(messages, max_chunk_tokens=5_000)
    assert text == GOOD_SUMMARY
    merges = [t for t in recorder.texts if MERGE_INSTRUCTIONS in t]
    assert len(merges) == 1
    assert len(recorder.texts) > 3  # chunks of both parts, then the merge
    assert recorder.texts[-1] is merges[0]


async def test_fallback_summarises_without_oversized_messages_and_notes_them() -> None:
    def answer(text: str) -> Any:
        return FauxResponse(error="400 prompt too long") if "H" * 1000 in text else GOOD_SUMMARY

    recorder = Recorder(answer)
    summarizer = Summarizer(
        model=recorder.provider.model,
        api_key="k",
        reserve_tokens=1_000,
        context_window=10_000,
        sleep=_no_sleep,
    )
    messages = [user("small question"), assistant("H" * 40_000), user("follow up")]
    text = await summarizer.summarize_with_fallback(messages, max_chunk_tokens=50_000)
    assert text == GOOD_SUMMARY + "\n\n[Large assistant (~10K tokens) omitted from summary]"


async def test_fallback_without_anything_to_leave_out_raises() -> None:
    recorder = Recorder(FauxResponse(error="500"))
    summarizer = Summarizer(
        model=recorder.provider.model,
        api_key="k",
        reserve_tokens=1_000,
        context_window=10_000,
        sleep=_no_sleep,
    )
    with pytest.raises(SummaryUnavailable):
        await summarizer.summarize_with_fallback(BASIC, max_chunk_tokens=50_000)


async def test_new_content_over_the_history_share_prunes_and_summarises_the_dropped_part() -> None:
    def answer(text: str) -> str:
        conversation = text.split("</conversation>")[0]
        dropped = any(f"old-{i}" in conversation for i in range(3))
        return "DROPPED SUMMARY" if dropped else GOOD_SUMMARY

    recorder = Recorder(answer, context_window=20_000)
    messages = [user(f"old-{i} " + "o" * 8_000) for i in range(6)]  # 12k tokens > 10k budget
    messages += [user("new " + "n" * 400), assistant("ok")]
    prep = preparation(messages, tokens_before=estimate_messages_tokens(messages) + 15_000)
    rt = runtime(recorder, context_window_tokens=20_000, quality_guard_enabled=False)
    decision = await decide(prep, rt)
    assert "compaction" in decision
    final = recorder.texts[-1]
    assert "<previous-summary>\nDROPPED SUMMARY" in final  # the dropped part feeds the summary
    assert "old-0" not in final
    # the dropped chunk (old-0..2) and the kept history (old-3..) never share a request
    assert not any("old-0" in t and "old-5" in t for t in recorder.texts)


# -- config -----------------------------------------------------------------------------------


def test_runtime_settings_from_config_are_clamped() -> None:
    config = {
        "agents": {
            "defaults": {
                "compaction": {
                    "mode": "safeguard",
                    "maxHistoryShare": 5,
                    "identifierPolicy": "weird",
                    "recentTurnsPreserve": 40,
                    "qualityGuard": {"enabled": False, "maxRetries": 9},
                }
            }
        }
    }
    assert is_safeguard_mode(config)
    assert not is_safeguard_mode({})
    rt = resolve_compaction_safeguard_runtime(config, api_key="k")
    assert rt.max_history_share == 0.9
    assert rt.identifier_policy == "strict"
    assert rt.recent_turns_preserve == 12
    assert rt.quality_guard_enabled is False
    assert rt.quality_guard_max_retries == 3
    assert rt.api_key == "k"
    defaults = resolve_compaction_safeguard_runtime(None)
    assert (defaults.max_history_share, defaults.recent_turns_preserve) == (0.5, 3)
    assert defaults.quality_guard_enabled and defaults.quality_guard_max_retries == 1


# -- inside a real session --------------------------------------------------------------------


async def _session(tmp_path: Path, workspace: Path, recorder: Recorder, rt: Any) -> Any:
    manager = SessionManager.create(workspace, tmp_path / "sessions")
    return await create_agent_session(
        cwd=workspace,
        agent_dir=tmp_path / "agent",
        model=recorder.provider.model,
        session_manager=manager,
        settings_manager=SettingsManager.in_memory({"compaction": {"keepRecentTokens": 5}}),
        extensions=[compaction_safeguard_extension(rt)],
        tools=[],
        discover_extensions=False,
    )


async def test_session_compaction_writes_the_safeguard_summary(
    tmp_path: Path, workspace: Path
) -> None:
    def answer(text: str) -> str:
        return GOOD_SUMMARY if "<conversation>" in text else "chat reply " * 50

    recorder = Recorder(answer)
    rt = CompactionSafeguardRuntime(api_key="test-key", sleep=_no_sleep)  # model: the session's
    session = await _session(tmp_path, workspace, recorder, rt)
    await session.prompt("first question " * 40)
    await session.prompt("second question")
    result = await session.compact()
    assert result is not None
    assert result.summary.startswith(GOOD_SUMMARY)
    file = session.session_manager.session_file
    entries = [orjson.loads(line) for line in file.read_bytes().splitlines()]
    compaction = next(e for e in entries if e["type"] == "compaction")
    assert compaction["summary"] == result.summary
    assert compaction["fromHook"] is True


async def test_session_compaction_is_cancelled_and_history_kept_when_summaries_fail(
    tmp_path: Path, workspace: Path
) -> None:
    def answer(text: str) -> Any:
        if "<conversation>" in text:
            return FauxResponse(error="529 overloaded")
        return "chat reply " * 50

    recorder = Recorder(answer)
    rt = CompactionSafeguardRuntime(api_key="test-key", sleep=_no_sleep)
    session = await _session(tmp_path, workspace, recorder, rt)
    await session.prompt("first question " * 40)
    await session.prompt("second question")
    before = session.session_manager.session_file.read_bytes()
    with pytest.raises(CompactionError, match="cancelled"):
        await session.compact()
    assert session.session_manager.session_file.read_bytes() == before
    assert len(session.agent.state.messages) == 4
