"""What a long history costs per prompt, before anything is sent: the runner's preparation
(sanitize pipeline, turn validation, history limit, as the attempt runs it before every prompt)
and the request body the provider builds from it (`transform_messages` and the provider's own
conversion, before every model call).

    python bench/bench_sanitize.py [--turns 10,250,1000] [--rounds 60]

Each turn of the generated history: a user message, an assistant text + tool call, a 2 KB tool
result with UI details, an assistant answer (4 messages). Ids are the provider's native form
(`toolu_...` for Anthropic, `call_...|fc_...` for OpenAI, `call_...` for Gemini, which the
Google policy rewrites). The history grows by one turn before each prompt, as a chat's does:
"per session" works as a session does, going on from its last prompt (the session manager is
the owner of what is kept); "whole pass" reads every message again (what each prompt cost
before the steps learned to go on). Median and p99 per provider and history size.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from clawpi.ai.models import get_model
from clawpi.ai.providers import anthropic_convert, google_convert, openai_responses_convert
from clawpi.ai.stream import StreamOptions
from clawpi.runner.history import limit_history_turns
from clawpi.runner.sanitize import sanitize_session_history
from clawpi.runner.transcript_policy import resolve_transcript_policy
from clawpi.runner.turn_validation import validate_replay_turns
from clawpi.session import SessionManager

TARGETS = (
    ("anthropic-messages", "anthropic", "claude-sonnet-4-5", "toolu_01{:04d}AbCdEf"),
    ("openai-responses", "openai", "gpt-5", "call_{:04d}x|fc_{:04d}y"),
    ("google-generative-ai", "google", "gemini-2.5-pro", "call_{:04d}"),
)


def _usage() -> dict[str, Any]:
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    return {
        "input": 9,
        "output": 3,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 12,
        "cost": zero,
    }


def build(turns: int, api: str, provider: str, model: str, id_form: str) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    meta = {"api": api, "provider": provider, "model": model, "usage": _usage()}
    for i in range(turns):
        call_id = id_form.format(i, i)
        history += [
            {"role": "user", "content": f"question {i} " * 20, "timestamp": i * 10},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "let me check"},
                    {
                        "type": "toolCall",
                        "id": call_id,
                        "name": "read",
                        "arguments": {"path": f"f{i}.py"},
                    },
                ],
                "stopReason": "toolUse",
                "timestamp": i * 10 + 1,
                **meta,
            },
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": "read",
                "content": [{"type": "text", "text": "x" * 2000}],
                "isError": False,
                "details": {"lines": 40},
                "timestamp": i * 10 + 2,
            },
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "answer " * 30}],
                "stopReason": "stop",
                "timestamp": i * 10 + 3,
                **meta,
            },
        ]
    return history


def prepare(
    history: list[dict[str, Any]],
    api: str,
    provider: str,
    model: str,
    session: SessionManager | None,
) -> list[dict[str, Any]]:
    """What `clawpi.runner.attempt` does to the history before a prompt."""
    policy = resolve_transcript_policy(api, provider, model)
    out = sanitize_session_history(
        history,
        policy,
        model_api=api,
        provider=provider,
        model_id=model,
        allowed_tool_names=["read"],
        session_manager=session,
    )
    out = validate_replay_turns(out, policy, session)
    return limit_history_turns(out, 40)


def request_body(
    history: list[dict[str, Any]], api: str, provider: str, model_id: str, owner: object | None
) -> dict[str, Any]:
    """The body the provider would send for `history` (no network, no SDK)."""
    model = get_model(provider, model_id)
    context: Any = {"systemPrompt": "You are helpful.", "messages": history}
    options = StreamOptions(history_owner=owner)
    if api == "anthropic-messages":
        return anthropic_convert.build_request(model, context, history_owner=owner)
    if api == "openai-responses":
        return openai_responses_convert.build_request(model, context, options)
    return google_convert.build_payload(model, context, options)


Step = Callable[[list[dict[str, Any]], str, str, str, Any], Any]


def measure(
    step: Step, turns: int, rounds: int, target: tuple[str, str, str, str], per_session: bool
) -> list[float]:
    api, provider, model, id_form = target
    full = build(turns + rounds, api, provider, model, id_form)
    session = SessionManager.in_memory() if per_session else None
    step(full[: 4 * turns], api, provider, model, session)
    samples = []
    for round_ in range(rounds):
        history = full[: 4 * (turns + round_ + 1)]  # one turn more, the same message objects
        start = time.perf_counter()
        step(history, api, provider, model, session)
        samples.append((time.perf_counter() - start) * 1000)
    return sorted(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default="10,250,1000")
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    steps: list[tuple[str, Step]] = [
        ("history preparation (runner, per prompt)", prepare),
        ("request body (provider, per model call)", request_body),
    ]
    for title, step in steps:
        print(title)
        print(
            f"  {'provider':10} {'messages':>8} {'per session':>12} {'p99':>8}"
            f" {'whole pass':>11} {'p99':>8}   (ms)"
        )
        for target in TARGETS:
            for turns in (int(t) for t in args.turns.split(",")):
                cells = []
                for per_session in (True, False):
                    samples = measure(step, turns, args.rounds, target, per_session)
                    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
                    cells.append(f"{statistics.median(samples):12.3f} {p99:8.3f}")
                print(f"  {target[1]:10} {4 * turns:8d} {cells[0]} {cells[1][1:]}")
        print()


if __name__ == "__main__":
    main()
