"""Cross-provider handoff: make a history written by any model valid for the target model.

Runs before every request. It never mutates the caller's messages, and it is deterministic
(no clocks, no random ids), so the same history always produces the same request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

from clawpi.ai.models import Model
from clawpi.ai.prefix_memo import Pass, ResumableMemo
from clawpi.ai.text import sanitize_surrogates
from clawpi.ai.types import (
    AssistantContent,
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserContent,
)

# (tool call id, target model, the assistant message the call came from) -> id for the target
NormalizeToolCallId = Callable[[str, Model, AssistantMessage], str]

NO_RESULT_TEXT = "No result provided"
IMAGE_OMITTED_TEXT = "(image omitted: this model does not accept images)"


def is_same_model(message: AssistantMessage, model: Model) -> bool:
    return (
        message.get("provider") == model.provider
        and message.get("api") == model.api
        and message.get("model") == model.id
    )


def transform_messages(
    messages: list[Message],
    model: Model,
    normalize_tool_call_id: NormalizeToolCallId | None = None,
    *,
    owner: object | None = None,
) -> list[Message]:
    """Return the history the target model should see (see pi-mono §1.8 for the rules).

    With `owner` (something that lives as long as the conversation, see
    `StreamOptions.history_owner`), what was made of the history for the same model last time
    is kept, and only what the history gained since is transformed.
    """
    key = (model, normalize_tool_call_id)
    if owner is None:
        return _repair_pass(_adapt_pass(messages, 0, None, key).outputs, 0, None, None).outputs
    return _repaired(owner, _adapted(owner, messages, key))


_AdaptKey = tuple[Model, NormalizeToolCallId | None]


def _adapt_pass(
    messages: list[Message], _start: int, id_map: dict[str, str] | None, key: _AdaptKey
) -> Pass[dict[str, str]]:
    """Each message for the target model; `id_map` (call ids rewritten so far) carries on."""
    model, normalize_tool_call_id = key
    id_map = {} if id_map is None else id_map
    adapted: list[Message] = []
    images_ok = model.supports_images
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            adapted.append(
                _adapt_assistant(
                    cast(AssistantMessage, message), model, normalize_tool_call_id, id_map
                )
            )
        elif role == "toolResult":
            result = cast(ToolResultMessage, message)
            new_id = id_map.get(result["toolCallId"])
            content = _clean_user_content(result["content"], images_ok, keep_empty=False)
            if new_id is not None or content is not result["content"]:
                copy = dict(result)
                if new_id is not None:
                    copy["toolCallId"] = new_id
                copy["content"] = content
                result = cast(ToolResultMessage, copy)
            adapted.append(result)
        elif role == "user":
            content_value = message.get("content")
            if isinstance(content_value, str):
                cleaned_text = sanitize_surrogates(content_value)
                if cleaned_text is not content_value:
                    message = cast(Message, {**message, "content": cleaned_text})
            elif isinstance(content_value, list):
                parts = _clean_user_content(
                    cast(list[UserContent], content_value), images_ok, keep_empty=True
                )
                if not parts:
                    continue
                if parts is not content_value:
                    message = cast(Message, {**message, "content": parts})
            adapted.append(message)
        else:
            adapted.append(message)
    return Pass(adapted, len(messages), len(adapted), id_map)


def _adapt_assistant(
    message: AssistantMessage,
    model: Model,
    normalize: NormalizeToolCallId | None,
    id_map: dict[str, str],
) -> AssistantMessage:
    same = is_same_model(message, model)
    blocks: list[AssistantContent] = []
    changed = False
    for block in message.get("content", []):
        kind = block.get("type")
        if kind == "thinking":
            thinking: Any = block
            if thinking.get("redacted"):
                if same:
                    blocks.append(block)
                else:
                    changed = True
                continue
            if same and thinking.get("thinkingSignature"):
                blocks.append(block)
                continue
            text = sanitize_surrogates(thinking.get("thinking", ""))
            if not text.strip():
                changed = True
                continue
            if same:
                blocks.append(block)
            else:
                blocks.append({"type": "text", "text": text})
                changed = True
        elif kind == "text":
            text_block: Any = block
            text = sanitize_surrogates(text_block.get("text", ""))
            if same and text is text_block.get("text"):
                blocks.append(block)
            else:
                new_text: Any = {"type": "text", "text": text}
                if same and "textSignature" in text_block:
                    new_text["textSignature"] = text_block["textSignature"]
                blocks.append(new_text)
                changed = True
        elif kind == "toolCall":
            call = cast(ToolCall, block)
            if same:
                blocks.append(block)
                continue
            new_call: ToolCall = {
                "type": "toolCall",
                "id": call["id"],
                "name": call["name"],
                "arguments": call.get("arguments") or {},
            }
            if normalize is not None:
                new_id = normalize(call["id"], model, message)
                if new_id != call["id"]:
                    id_map[call["id"]] = new_id
                    new_call["id"] = new_id
            blocks.append(new_call)
            changed = True
        else:
            blocks.append(block)
    if not changed:
        return message
    copy = dict(message)
    copy["content"] = blocks
    return cast(AssistantMessage, copy)


def _clean_user_content(
    content: list[UserContent], images_ok: bool, *, keep_empty: bool
) -> list[UserContent]:
    """Sanitize text and drop images the model cannot take; returns `content` when unchanged."""
    out: list[UserContent] = []
    changed = False
    dropped_image = False
    for part in content:
        if part.get("type") == "image" and not images_ok:
            changed = True
            dropped_image = True
            continue
        if part.get("type") == "text":
            text = cast(Any, part)["text"]
            clean = sanitize_surrogates(text)
            if clean is not text:
                out.append({"type": "text", "text": clean})
                changed = True
                continue
        out.append(part)
    if not changed:
        return content
    if not out and dropped_image and not keep_empty:
        out.append({"type": "text", "text": IMAGE_OMITTED_TEXT})
    return out


def _closes_calls(message: Message) -> bool:
    """Whether the order repair answers the calls still open when it reaches `message`."""
    role = message.get("role")
    if role == "user":
        return True
    return role == "assistant" and message.get("stopReason") not in ("error", "aborted")


def _repair_pass(messages: list[Message], _start: int, _state: None, _key: None) -> Pass[None]:
    """Drop errored/aborted assistant turns; give orphaned tool calls a synthetic result.

    The output is settled up to the last message that answers the open calls (it closes
    them): what follows cannot change it, as long as that message is still there.
    """
    result: list[Message] = []
    pending: list[ToolCall] = []
    answered: set[str] = set()
    pending_time = 0
    settled, settled_outputs = 0, 0

    def flush() -> None:
        result.extend(
            {
                "role": "toolResult",
                "toolCallId": call["id"],
                "toolName": call["name"],
                "content": [{"type": "text", "text": NO_RESULT_TEXT}],
                "isError": True,
                "timestamp": pending_time,
            }
            for call in pending
            if call["id"] not in answered
        )
        pending.clear()
        answered.clear()

    for index, message in enumerate(messages):
        role = message.get("role")
        if _closes_calls(message):
            flush()
            settled, settled_outputs = index, len(result)
        if role == "assistant":
            assistant = cast(AssistantMessage, message)
            if assistant.get("stopReason") in ("error", "aborted"):
                continue
            pending_time = assistant.get("timestamp", 0)
            pending.extend(
                cast(ToolCall, b)
                for b in assistant.get("content", [])
                if b.get("type") == "toolCall"
            )
        elif role == "toolResult":
            answered.add(cast(ToolResultMessage, message)["toolCallId"])
        result.append(message)
    # orphans at the very end stay as they are: the caller may still be running those tools
    if not pending:
        return Pass(result, len(messages), len(result), None)
    return Pass(result, settled, settled_outputs, None, closed_by=1)


# Per conversation (see `transform_messages`' owner).
_adapted: Final = ResumableMemo(_adapt_pass)
_repaired: Final = ResumableMemo(_repair_pass)
