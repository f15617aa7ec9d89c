"""Cross-provider handoff on the wire: a conversation begun on one API continues on another.

For every (source, target) pair the source turns are really streamed from a fake server in the
source API's SSE format (thinking with its signature, two tool calls with that API's native ids,
a turn cut by a dropped connection, an aborted turn, an orphaned tool call), tool results and
user turns are appended, and the whole history is sent to the target API through its official
SDK. The request the target's fake server receives is then checked against that API's own rules
(role order, tool-call pairing, id formats, what may carry a signature), which is what decides
whether the real service would answer 200 or 400.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import itertools
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from clawpi.ai import AbortController, Model, get_model, stream
from clawpi.ai.types import AssistantMessage, Context, Message, Tool
from tests.fakes import anthropic_sse as anth
from tests.fakes import gemini_sse as gem
from tests.fakes import openai_sse as oai
from tests.fakes.http_server import FakeResponse, FakeServer, RecordedRequest
from tests.fakes.responses_sse import ResponsesStream

API_KEY = "test-key"
SYSTEM = "You are a careful assistant."
THOUGHT = ["The user wants a.txt ", "and a screenshot."]
THOUGHT_TEXT = "".join(THOUGHT)
ANSWER = "Checking both."
READ_ARGS = {"path": "a.txt"}
ORPHAN_ARGS = {"path": "b.txt"}
READ_OUTPUT = "hello from a.txt"
SHOT_OUTPUT = "Screen captured."
ERRORED_TEXT = "PARTIAL-DRAFT-CUT "
ABORTED_TEXT = "PARTIAL-DRAFT-ABORTED "
FINAL_QUESTION = "Never mind b.txt; summarise what you found."
NO_RESULT = "No result provided"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR handoff").decode()
GEMINI_SENTINEL = "skip_thought_signature_validator"

TOOLS: list[Tool] = [
    {
        "name": "read",
        "description": "Read a file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    {
        "name": "screenshot",
        "description": "Capture the screen",
        "parameters": {"type": "object", "properties": {}},
    },
]

# What the sources sign their output with; none of it may reach another model.
ANTHROPIC_SIGNATURE = "EqQBCkYIBxgCKkDx8dGhhbmRvZmYtc2lnbmF0dXJl"
ANTHROPIC_REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDBRFDACTEDTHINKING"
RESPONSES_ENCRYPTED = "gAAAAABoHANDOFFENCRYPTEDREASONING=="
RESPONSES_REASONING_ID = "rs_68c1f0a2b3d4e5f60718293a4b5c6d7e"
GEMINI_SIGNATURE = gem.signature("handoff-signature-of-the-first-call")
GEMINI_TEXT_SIGNATURE = gem.signature("handoff-signature-of-the-text")


# -- sources: the three streamed turns each API answers with --------------------------------


@dataclasses.dataclass(frozen=True)
class Source:
    name: str
    model: Callable[[FakeServer], Model]
    first_turn: Callable[[], FakeResponse]
    """Thinking (signed), a text block and two parallel tool calls: read a.txt, screenshot."""
    cut_turn: Callable[[str, str], FakeResponse]
    """(text, how): a turn that stops after its first text delta; how is "drop" or "stall"."""
    orphan_turn: Callable[[], FakeResponse]
    """A single `read b.txt` call the user never lets run."""
    native_id: re.Pattern[str]
    signatures: tuple[str, ...]


def _anthropic_model(server: FakeServer) -> Model:
    model = get_model("anthropic", "claude-haiku-4-5")
    assert model is not None
    return model.replace(base_url=server.url)


def _anthropic_first() -> FakeResponse:
    frames = anth.turn(
        anth.thinking_block(0, THOUGHT, [ANTHROPIC_SIGNATURE[:20], ANTHROPIC_SIGNATURE[20:]]),
        anth.redacted_thinking_block(1, ANTHROPIC_REDACTED),
        anth.text_block(2, ANSWER),
        anth.tool_use_block(3, "toolu_01A09q90qw90lq917835lq9", "read", ['{"path": ', '"a.txt"}']),
        anth.tool_use_block(4, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "screenshot", ["{}"]),
        stop_reason="tool_use",
    )
    return anth.stream_response(frames)


def _anthropic_cut(text: str, how: str) -> FakeResponse:
    frames = anth.turn(anth.text_block(0, text, "never sent"))
    # message_start, ping, block start, first delta
    return anth.stream_response(frames, **_cut(how, 4))


def _anthropic_orphan() -> FakeResponse:
    frames = anth.turn(
        anth.tool_use_block(0, "toolu_01Vh2Qd5oPz8xW3kYt6bN9Rm", "read", ['{"path": "b.txt"}']),
        stop_reason="tool_use",
    )
    return anth.stream_response(frames)


def _completions_model(server: FakeServer) -> Model:
    """A reasoning model behind an OpenAI-compatible server (vLLM streams `reasoning_content`)."""
    return Model(
        id="Qwen/Qwen3-VL-32B-Thinking",
        api="openai-completions",
        provider="vllm",
        base_url=f"{server.url}/v1",
        reasoning=True,
        input=("text", "image"),
        context_window=131_072,
        max_tokens=8192,
    )


def _completions_first() -> FakeResponse:
    return oai.completion_response(
        [
            oai.role_chunk(),
            *(oai.reasoning_chunk(piece) for piece in THOUGHT),
            oai.text_chunk(ANSWER),
            *oai.tool_call_chunks(
                0,
                "chatcmpl-tool-5f0e1c3b9a7d4e2f8c6b1a0d9e8f7a6b",
                "read",
                ['{"path":', '"a.txt"}'],
            ),
            *oai.tool_call_chunks(
                1, "chatcmpl-tool-a1b2c3d4e5f60718293a4b5c6d7e8f90", "screenshot", ["{}"]
            ),
            oai.finish_chunk("tool_calls"),
            oai.usage_chunk(40, 30),
        ]
    )


def _completions_cut(text: str, how: str) -> FakeResponse:
    frames = oai.completion_frames(
        [
            oai.role_chunk(),
            oai.text_chunk(text),
            oai.text_chunk("never sent"),
            oai.finish_chunk("stop"),
        ]
    )
    return FakeResponse.sse(frames, **_cut(how, 2))


def _completions_orphan() -> FakeResponse:
    return oai.completion_response(
        [
            oai.role_chunk(),
            *oai.tool_call_chunks(
                0, "chatcmpl-tool-0f9e8d7c6b5a49382716050a0b0c0d0e", "read", ['{"path": "b.txt"}']
            ),
            oai.finish_chunk("tool_calls"),
            oai.usage_chunk(60, 10),
        ]
    )


def _responses_model(server: FakeServer) -> Model:
    model = get_model("openai", "gpt-5-mini")
    assert model is not None
    return model.replace(base_url=f"{server.url}/v1")


def _responses_first() -> FakeResponse:
    return (
        ResponsesStream()
        .reasoning([THOUGHT], item_id=RESPONSES_REASONING_ID, encrypted=RESPONSES_ENCRYPTED)
        .message([ANSWER], item_id="msg_68c1f0a2c4d5e6f708192a3b4c5d6e7f")
        .function_call(
            "read",
            ['{"path":', '"a.txt"}'],
            call_id="call_Xq9TkR2mWb7LnV4pZs8HjD1c",
            item_id="fc_68c1f0a2d5e08190b0c4a1f2e3d4c5b60a1b2c3d4e5f6a7b",
        )
        .function_call(
            "screenshot",
            ["{}"],
            call_id="call_Lm3PqR8sTu1VwX6yZa2Bc4De",
            item_id="fc_68c1f0a2d6f18190b0c4a1f2e3d4c5b60a1b2c3d4e5f6a7c",
        )
        .completed()
        .response()
    )


def _responses_cut(text: str, how: str) -> FakeResponse:
    frames = ResponsesStream().message([text, "never sent"]).completed().frames()
    # created, in_progress, output_item.added, content_part.added, first delta
    return FakeResponse.sse(frames, **_cut(how, 5))


def _responses_orphan() -> FakeResponse:
    return (
        ResponsesStream()
        .function_call(
            "read",
            ['{"path": "b.txt"}'],
            call_id="call_Gh7JkL9mNp2QrS4tUv6WxY8z",
            item_id="fc_68c1f0a2e7a28190b0c4a1f2e3d4c5b60a1b2c3d4e5f6a7d",
        )
        .completed()
        .response()
    )


def _gemini_model(server: FakeServer, model_id: str = "gemini-2.5-flash") -> Model:
    model = get_model("google", model_id)
    assert model is not None
    return model.replace(base_url=f"{server.url}/v1beta")


def _gemini_first() -> FakeResponse:
    # Gemini signs the first function call of a parallel batch (and the closing text part).
    return gem.stream(
        gem.chunk(gem.thought(THOUGHT[0])),
        gem.chunk(gem.thought(THOUGHT[1])),
        gem.chunk(gem.text(ANSWER, GEMINI_TEXT_SIGNATURE)),
        gem.chunk(
            gem.function_call("read", READ_ARGS, sig=GEMINI_SIGNATURE),
            gem.function_call("screenshot", {}),
            finish_reason="STOP",
            usage=gem.usage(40, 20, thoughts=12),
        ),
    )


def _gemini_cut(text: str, how: str) -> FakeResponse:
    return gem.stream(
        gem.chunk(gem.text(text)),
        gem.chunk(gem.text("never sent"), finish_reason="STOP", usage=gem.usage(10, 5)),
        **_cut(how, 1),
    )


def _gemini_orphan() -> FakeResponse:
    return gem.stream(
        gem.chunk(
            gem.function_call("read", ORPHAN_ARGS, sig=gem.signature("orphan")),
            finish_reason="STOP",
            usage=gem.usage(60, 8),
        )
    )


def _cut(how: str, after: int) -> dict[str, Any]:
    if how == "drop":
        return {"drop_after": after}
    return {"stall_after": after, "stall_seconds": 30}


SOURCES = {
    "anthropic": Source(
        "anthropic",
        _anthropic_model,
        _anthropic_first,
        _anthropic_cut,
        _anthropic_orphan,
        re.compile(r"^toolu_[A-Za-z0-9]+$"),
        (ANTHROPIC_SIGNATURE, ANTHROPIC_REDACTED),
    ),
    "completions": Source(
        "completions",
        _completions_model,
        _completions_first,
        _completions_cut,
        _completions_orphan,
        re.compile(r"^chatcmpl-tool-[0-9a-f]{32}$"),
        (),
    ),
    "responses": Source(
        "responses",
        _responses_model,
        _responses_first,
        _responses_cut,
        _responses_orphan,
        re.compile(r"^call_[A-Za-z0-9]+\|fc_[0-9a-f]+$"),
        (RESPONSES_ENCRYPTED, RESPONSES_REASONING_ID),
    ),
    "google": Source(
        "google",
        _gemini_model,
        _gemini_first,
        _gemini_cut,
        _gemini_orphan,
        re.compile(r"^(read|screenshot)_\d+_\d+$"),
        (GEMINI_SIGNATURE, GEMINI_TEXT_SIGNATURE),
    ),
}


# -- building the conversation on the source ------------------------------------------------


def user(text: str, timestamp: int) -> Message:
    return {"role": "user", "content": text, "timestamp": timestamp}


def tool_result(call: Any, content: list[Any], timestamp: int) -> Message:
    return {
        "role": "toolResult",
        "toolCallId": call["id"],
        "toolName": call["name"],
        "content": content,
        "isError": False,
        "timestamp": timestamp,
    }


async def stream_turn(
    model: Model, history: list[Message], *, abort_on_text: bool = False
) -> AssistantMessage:
    """One real streamed turn on `model` with the history so far (aborted by the caller at its
    first text delta when `abort_on_text`)."""
    controller = AbortController()
    context: Context = {"systemPrompt": SYSTEM, "messages": history, "tools": TOOLS}
    result = stream(model, context, api_key=API_KEY, signal=controller.signal)

    async def consume() -> None:
        async for event in result:
            if abort_on_text and event["type"] == "text_delta":
                asyncio.get_running_loop().call_soon(controller.abort)

    await asyncio.wait_for(consume(), timeout=15)
    return await result.result()


def calls_of(message: AssistantMessage) -> list[Any]:
    return [block for block in message["content"] if block["type"] == "toolCall"]


async def source_history(source: Source, server: FakeServer) -> tuple[list[Message], list[Any]]:
    """The conversation as the source API wrote it; returns it and the three tool calls."""
    model = source.model(server)
    history: list[Message] = [user("What do a.txt and the screen show?", 1)]

    server.enqueue(source.first_turn())
    first = await stream_turn(model, history)
    assert first["stopReason"] == "toolUse", first.get("errorMessage")
    thinking = [b for b in first["content"] if b["type"] == "thinking" and not b.get("redacted")]
    assert [b["thinking"] for b in thinking] == [THOUGHT_TEXT]  # type: ignore[typeddict-item]
    signed = [b.get("thinkingSignature") for b in thinking] + [
        c.get("thoughtSignature") for c in calls_of(first)
    ]
    assert any(signed), "the source turn carries its provider's signature"
    read, shot = calls_of(first)
    assert (read["name"], read["arguments"]) == ("read", READ_ARGS)
    assert (shot["name"], shot["arguments"]) == ("screenshot", {})
    assert source.native_id.match(read["id"]) and source.native_id.match(shot["id"])
    history += [
        first,
        tool_result(read, [{"type": "text", "text": READ_OUTPUT}], 3),
        tool_result(
            shot,
            [
                {"type": "text", "text": SHOT_OUTPUT},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
            ],
            4,
        ),
        user("Thanks. Now read b.txt.", 5),
    ]

    server.enqueue(source.cut_turn(ERRORED_TEXT, "drop"))
    errored = await stream_turn(model, history)
    assert errored["stopReason"] == "error"
    assert ERRORED_TEXT.strip() in json.dumps(errored["content"])  # partial content was kept
    history += [errored, user("That broke off, try again.", 7)]

    server.enqueue(source.cut_turn(ABORTED_TEXT, "stall"))
    aborted = await stream_turn(model, history, abort_on_text=True)
    assert aborted["stopReason"] == "aborted"
    assert ABORTED_TEXT.strip() in json.dumps(aborted["content"])
    history += [aborted, user("Go on, read b.txt.", 9)]

    server.enqueue(source.orphan_turn())
    orphan_turn = await stream_turn(model, history)
    assert orphan_turn["stopReason"] == "toolUse"
    [orphan] = calls_of(orphan_turn)
    assert (orphan["name"], orphan["arguments"]) == ("read", ORPHAN_ARGS)
    history += [orphan_turn, user(FINAL_QUESTION, 11)]  # the call never got a result
    return history, [read, shot, orphan]


# -- a neutral view of a request, for the checks every target shares -------------------------


@dataclasses.dataclass
class Transcript:
    """What the target model is shown, in order, whatever the wire format."""

    entries: list[tuple[str, Any]] = dataclasses.field(default_factory=list)

    def add(self, kind: str, value: Any) -> None:
        self.entries.append((kind, value))

    def of(self, kind: str) -> list[Any]:
        return [value for entry_kind, value in self.entries if entry_kind == kind]


def data_url_payload(url: str) -> str:
    assert url.startswith("data:image/png;base64,"), url[:40]
    return url.split(",", 1)[1]


def proto_field(obj: dict[str, Any], name: str) -> Any:
    """`obj[name]` under its REST camelCase name or its proto snake_case name: the SDK sends some
    nested messages with proto names, and the API accepts both."""
    snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)
    return obj[name] if name in obj else obj[snake]


def gemini_bytes(data: str) -> bytes:
    """The SDK may re-encode base64 URL-safe; compare the bytes."""
    return base64.urlsafe_b64decode(data.replace("+", "-").replace("/", "_"))


# -- Anthropic Messages ----------------------------------------------------------------------

ANTHROPIC_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def anthropic_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    assert isinstance(content, list) and content, f"empty {message['role']} content"
    return content


def check_anthropic(body: dict[str, Any]) -> Transcript:
    """Anthropic's rules for `messages`.

    The API combines consecutive turns of the same role into one, so those are merged first;
    the merged turns must alternate starting with user, and every `tool_use` must be answered by
    `tool_result` blocks at the start of the very next user turn.
    """
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for message in body["messages"]:
        assert message["role"] in ("user", "assistant"), message["role"]
        blocks = anthropic_blocks(message)
        if turns and turns[-1][0] == message["role"]:
            turns[-1][1].extend(blocks)
        else:
            turns.append((message["role"], list(blocks)))
    roles = [role for role, _ in turns]
    assert roles[0] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles)), roles

    allowed = {"user": {"text", "image", "tool_result"}, "assistant": {"text", "tool_use"}}
    transcript = Transcript()
    for index, (role, blocks) in enumerate(turns):
        for block in blocks:
            kind = block["type"]
            assert kind in allowed[role], f"{kind} block in a {role} turn (foreign thinking?)"
            if kind == "text":
                assert block["text"].strip(), "empty text block"
                transcript.add("text" if role == "assistant" else "user", block["text"])
            elif kind == "image":
                transcript.add("image", block["source"]["data"])
            elif kind == "tool_use":
                assert ANTHROPIC_TOOL_ID.match(block["id"]), block["id"]
                assert isinstance(block["input"], dict)
                transcript.add("call", (block["id"], block["name"], block["input"]))
            else:
                content = block["content"]
                if isinstance(content, str):
                    text, images = content, []
                else:
                    for part in content:
                        if part["type"] == "text":
                            assert part["text"].strip(), "empty text block in a tool_result"
                    text = "\n".join(p["text"] for p in content if p["type"] == "text")
                    images = [p["source"]["data"] for p in content if p["type"] == "image"]
                transcript.add("result", (block["tool_use_id"], text, images, block["is_error"]))
        uses = [block["id"] for block in blocks if block["type"] == "tool_use"]
        assert len(set(uses)) == len(uses), "duplicate tool_use ids"
        if uses:
            assert index + 1 < len(turns), "tool_use with no user turn after it"
        if role == "user":
            previous = turns[index - 1][1] if index > 0 else []
            asked = sorted(b["id"] for b in previous if b["type"] == "tool_use")
            leading = list(itertools.takewhile(lambda b: b["type"] == "tool_result", blocks))
            assert sorted(b["tool_use_id"] for b in leading) == asked, (
                "tool_use/tool_result pairing"
            )
            assert len(leading) == sum(b["type"] == "tool_result" for b in blocks), (
                "tool_result blocks must come first in the user turn"
            )
    return transcript


# -- OpenAI Chat Completions -----------------------------------------------------------------

ASSISTANT_KEYS = {"role", "content", "tool_calls"}


def check_completions(body: dict[str, Any]) -> Transcript:
    """Chat Completions: every assistant tool call is answered by a `tool` message with its id
    before the next user/assistant message; ids of at most 40 characters; JSON-string arguments;
    no reasoning fields from another model."""
    transcript = Transcript()
    messages = body["messages"]
    assert messages[0] == {"role": "developer", "content": SYSTEM} or messages[0] == {
        "role": "system",
        "content": SYSTEM,
    }
    pending: set[str] = set()
    for message in messages[1:]:
        role = message["role"]
        assert role in ("user", "assistant", "tool"), role
        if role in ("user", "assistant"):
            assert not pending, f"tool calls {pending} unanswered before the next {role} message"
        if role == "assistant":
            assert set(message) <= ASSISTANT_KEYS, f"foreign fields {set(message) - ASSISTANT_KEYS}"
            content = message.get("content")
            calls = message.get("tool_calls") or []
            assert content or calls, "assistant message with neither content nor tool calls"
            if content:
                assert isinstance(content, str)
                transcript.add("text", content)
            ids = [call["id"] for call in calls]
            assert len(set(ids)) == len(ids), "duplicate tool call ids"
            for call in calls:
                assert call["type"] == "function"
                assert 0 < len(call["id"]) <= 40, call["id"]
                arguments = call["function"]["arguments"]
                assert isinstance(arguments, str)
                transcript.add(
                    "call", (call["id"], call["function"]["name"], json.loads(arguments))
                )
            pending = set(ids)
        elif role == "tool":
            assert message["tool_call_id"] in pending, f"tool result for {message['tool_call_id']}"
            pending.discard(message["tool_call_id"])
            assert isinstance(message["content"], str) and message["content"]
            error = message["content"] == NO_RESULT
            transcript.add("result", (message["tool_call_id"], message["content"], [], error))
        else:
            content = message["content"]
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for part in parts:
                if part["type"] == "text":
                    transcript.add("user", part["text"])
                else:
                    assert part["type"] == "image_url"
                    transcript.add("image", data_url_payload(part["image_url"]["url"]))
    assert not pending, f"tool calls {pending} never answered"
    return transcript


# -- OpenAI Responses ------------------------------------------------------------------------


def check_responses(body: dict[str, Any]) -> Transcript:
    """Responses input items: each function_call (call_id, item id starting `fc` when given)
    answered by one function_call_output with that call_id; no reasoning items or encrypted
    content from another model."""
    transcript = Transcript()
    items = body["input"]
    assert items[0]["role"] in ("developer", "system") and items[0]["content"] == SYSTEM
    calls: dict[str, str] = {}
    answered: set[str] = set()
    for item in items[1:]:
        kind = item.get("type", "message")
        assert kind != "reasoning", "a reasoning item from another model"
        assert "encrypted_content" not in item
        if kind == "function_call":
            call_id = item["call_id"]
            assert call_id and call_id not in calls, call_id
            if "id" in item:
                assert item["id"].startswith("fc"), item["id"]
            assert isinstance(item["arguments"], str)
            calls[call_id] = item["name"]
            transcript.add("call", (call_id, item["name"], json.loads(item["arguments"])))
        elif kind == "function_call_output":
            call_id = item["call_id"]
            assert call_id in calls and call_id not in answered, f"output for {call_id}"
            answered.add(call_id)
            output = item["output"]
            if isinstance(output, str):
                text, images = output, []
            else:
                text = "\n".join(p["text"] for p in output if p["type"] == "input_text")
                images = [
                    data_url_payload(p["image_url"]) for p in output if p["type"] == "input_image"
                ]
            transcript.add("result", (call_id, text, images, text == NO_RESULT))
        else:
            assert kind == "message", kind
            assert set(calls) == answered, "a message before every function call had its output"
            if item["role"] == "developer":
                continue  # instructions (gpt-5 with reasoning off gets one appended)
            if item["role"] == "assistant":
                for part in item["content"]:
                    assert part["type"] == "output_text" and part["text"].strip()
                    transcript.add("text", part["text"])
            else:
                assert item["role"] == "user", item["role"]
                content = item["content"]
                parts = (
                    [{"type": "input_text", "text": content}]
                    if isinstance(content, str)
                    else content
                )
                for part in parts:
                    if part["type"] == "input_text":
                        transcript.add("user", part["text"])
                    else:
                        transcript.add("image", data_url_payload(part["image_url"]))
    assert set(calls) == answered, f"function calls without output: {set(calls) - answered}"
    return transcript


# -- Gemini ----------------------------------------------------------------------------------


def check_gemini(body: dict[str, Any], *, gemini3: bool) -> Transcript:
    """Gemini contents: roles user/model; each model turn's functionCalls answered by
    functionResponses of the same names in the next (user) turn; no thought parts and no
    signatures from another model, only Google's documented sentinel on Gemini 3 calls."""
    transcript = Transcript()
    contents = body["contents"]
    assert body["systemInstruction"]["parts"] == [{"text": SYSTEM}]
    for index, turn in enumerate(contents):
        role = turn["role"]
        assert role in ("user", "model"), role
        assert turn["parts"], f"empty {role} turn"
        names: list[str] = []
        for part in turn["parts"]:
            assert not part.get("thought"), "a thought part from another model"
            signature = part.get("thoughtSignature")
            if "functionCall" in part:
                call = part["functionCall"]
                names.append(call["name"])
                assert signature == (GEMINI_SENTINEL if gemini3 else None), signature
                transcript.add("call", (call.get("id", call["name"]), call["name"], call["args"]))
            else:
                assert signature is None, "a foreign thoughtSignature"
            if "text" in part:
                assert part["text"].strip(), "empty text part"
                transcript.add("text" if role == "model" else "user", part["text"])
            if "inlineData" in part:
                transcript.add("image", part["inlineData"]["data"])
            if "functionResponse" in part:
                response = part["functionResponse"]
                value = response["response"]
                error = "error" in value
                nested = [proto_field(p, "inlineData")["data"] for p in response.get("parts", [])]
                transcript.add(
                    "result",
                    (
                        response.get("id", response["name"]),
                        value.get("error", value.get("output")),
                        nested,
                        error,
                    ),
                )
        if names:
            assert role == "model"
            following = contents[index + 1] if index + 1 < len(contents) else None
            assert following is not None and following["role"] == "user"
            answered = [
                p["functionResponse"]["name"] for p in following["parts"] if "functionResponse" in p
            ]
            assert answered == names, (answered, names)
    return transcript


# -- targets ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    api: str
    model: Callable[[FakeServer], Model]
    reply: Callable[[], FakeResponse]
    check: Callable[[dict[str, Any]], Transcript]
    call_key: Callable[[str, str], str]
    """(source call id, tool name) -> how the target's request refers to that call."""


def _completions_target(server: FakeServer) -> Model:
    """OpenAI's own Chat Completions, where the 40-character tool-call id limit applies."""
    return Model(
        id="gpt-4.1",
        api="openai-completions",
        provider="openai",
        base_url=f"{server.url}/v1",
        input=("text", "image"),
        context_window=1_047_576,
        max_tokens=32_768,
    )


def _anthropic_key(call_id: str, name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_-]", "_", call_id)[:64]


def _completions_key(call_id: str, name: str) -> str:
    return call_id.split("|", 1)[0][:40]


def _responses_key(call_id: str, name: str) -> str:
    return call_id.split("|", 1)[0]


def _gemini_key(call_id: str, name: str) -> str:
    return name


TARGETS = {
    "anthropic": Target(
        "anthropic",
        "anthropic-messages",
        _anthropic_model,
        lambda: anth.stream_response(anth.turn(anth.text_block(0, "Summary."))),
        check_anthropic,
        _anthropic_key,
    ),
    "completions": Target(
        "completions",
        "openai-completions",
        _completions_target,
        lambda: oai.completion_response(
            [
                oai.role_chunk(),
                oai.text_chunk("Summary."),
                oai.finish_chunk("stop"),
                oai.usage_chunk(90, 3),
            ]
        ),
        check_completions,
        _completions_key,
    ),
    "responses": Target(
        "responses",
        "openai-responses",
        _responses_model,
        lambda: ResponsesStream().message(["Summary."]).completed().response(),
        check_responses,
        _responses_key,
    ),
    "google": Target(
        "google",
        "google-generative-ai",
        _gemini_model,
        lambda: gem.text_stream("Summary."),
        lambda body: check_gemini(body, gemini3=False),
        _gemini_key,
    ),
    "google-3": Target(
        "google-3",
        "google-generative-ai",
        lambda server: _gemini_model(server, "gemini-3-pro-preview"),
        lambda: gem.text_stream("Summary."),
        lambda body: check_gemini(body, gemini3=True),
        _gemini_key,
    ),
}

# Every source against every target that is another model: all the API pairs, plus Gemini 2.5
# history continued on Gemini 3 (same API, but its signatures are foreign there).
PAIRS = [(source, target) for source in SOURCES for target in TARGETS if source != target]


@pytest.mark.parametrize(("source_name", "target_name"), PAIRS, ids=[f"{s}->{t}" for s, t in PAIRS])
async def test_conversation_continues_on_another_api_with_a_request_valid_there(
    server: FakeServer, source_name: str, target_name: str
) -> None:
    source, target = SOURCES[source_name], TARGETS[target_name]
    history, (read, shot, orphan) = await source_history(source, server)

    server.enqueue(target.reply())
    message = await stream_turn(target.model(server), history)
    assert message["stopReason"] == "stop", message.get("errorMessage")
    assert [block.get("text") for block in message["content"]] == ["Summary."]
    request: RecordedRequest = server.requests[-1]
    raw = request.body.decode()
    transcript = target.check(request.json())

    # the turns that ended in an error or an abort are gone, with everything they said
    assert ERRORED_TEXT.strip() not in raw and ABORTED_TEXT.strip() not in raw
    # nothing the source signed its output with reaches another model
    for signature in source.signatures:
        assert signature not in raw
        if source_name == "google":
            assert base64.urlsafe_b64encode(gemini_bytes(signature)).decode() not in raw
    # the source's thinking is shown as plain assistant text, next to its answer
    texts = transcript.of("text")
    assert any(THOUGHT_TEXT in text for text in texts), texts
    assert any(ANSWER in text for text in texts), texts
    # the three calls, in order, each answered: two real results, the orphan patched
    keys = [target.call_key(c["id"], c["name"]) for c in (read, shot, orphan)]
    assert [(k, name, args) for k, name, args in transcript.of("call")] == [
        (keys[0], "read", READ_ARGS),
        (keys[1], "screenshot", {}),
        (keys[2], "read", ORPHAN_ARGS),
    ]
    results = transcript.of("result")
    assert [(key, text) for key, text, _, _ in results] == [
        (keys[0], READ_OUTPUT),
        (keys[1], SHOT_OUTPUT),
        (keys[2], NO_RESULT),
    ]
    assert results[2][3] is True  # the patched result is an error
    # the screenshot travels with its result, or in the user turn right after it
    images = [image for _, _, nested, _ in results for image in nested] + transcript.of("image")
    if target_name.startswith("google"):
        assert [gemini_bytes(i) for i in images] == [base64.b64decode(PNG)]
    else:
        assert images == [PNG]
    # and the last thing the target sees is the user's question
    assert transcript.entries[-1] == ("user", FINAL_QUESTION)


async def test_responses_input_items_never_repeat_an_id_after_a_handoff(
    server: FakeServer,
) -> None:
    # Anthropic's thinking becomes a text block next to the answer: two text blocks, one message.
    history, _ = await source_history(SOURCES["anthropic"], server)
    target = TARGETS["responses"]
    server.enqueue(target.reply())
    message = await stream_turn(target.model(server), history)
    assert message["stopReason"] == "stop", message.get("errorMessage")
    ids = [item["id"] for item in server.requests[-1].json()["input"] if "id" in item]
    assert len(ids) == len(set(ids)), ids
