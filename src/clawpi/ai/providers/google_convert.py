"""Context -> Gemini `generateContent` request (contents, config), as pure functions.

Kept apart from the streaming code so the conversion rules can be read (and tested) on their
own. Keys are the camelCase names of the REST API; the google-genai SDK accepts them as given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

from clawpi.ai.models import Model
from clawpi.ai.providers.google_schema import clean_schema_for_gemini
from clawpi.ai.stream import StreamOptions
from clawpi.ai.text import sanitize_surrogates
from clawpi.ai.thinking import base_max_tokens, effective_level
from clawpi.ai.transform import transform_messages
from clawpi.ai.types import AssistantMessage, Context, Message, Tool, ToolResultMessage

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
DEFAULT_API_VERSION = "v1beta"
SKIP_THOUGHT_SIGNATURE = "skip_thought_signature_validator"
"""Google's sentinel for a replayed Gemini 3 function call whose signature is unknown."""
TOOL_IMAGE_TEXT = "Tool result image:"
IMAGE_ONLY_RESULT = "(see attached image)"

_API_VERSION = re.compile(r"v\d+(?:(?:alpha|beta)\d*)?")
_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
_GEMINI3_PRO = re.compile(r"gemini-3(?:\.\d+)?-pro")
_GEMINI3_FLASH = re.compile(r"gemini-3(?:\.\d+)?-flash")
_TOOL_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_BUDGETS_25_PRO = {"minimal": 128, "low": 2048, "medium": 8192, "high": 32768}
_BUDGETS_25_FLASH = {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576}
_TOOL_CHOICE = {"auto": "AUTO", "none": "NONE", "any": "ANY", "required": "ANY"}


def split_base_url(base_url: str) -> tuple[str, str]:
    """(host part, API version) for the SDK, which appends the version to the host itself.

    pi's catalog writes the version into the base URL (`.../v1beta`); a bare host (a local
    proxy or test server) gets the default version, as the SDK would.
    """
    url = (base_url or DEFAULT_BASE_URL).rstrip("/")
    parts = urlsplit(url)
    head, _, last = parts.path.rpartition("/")
    if _API_VERSION.fullmatch(last):
        return urlunsplit(parts._replace(path=head)), last
    return url, DEFAULT_API_VERSION


def requires_tool_call_id(model_id: str) -> bool:
    """Non-Gemini models served through Google APIs match calls to results by id."""
    return model_id.startswith(("claude-", "gpt-oss-"))


def normalize_tool_call_id(call_id: str, model: Model, source: AssistantMessage) -> str:
    if not requires_tool_call_id(model.id):
        return call_id
    return _TOOL_ID_UNSAFE.sub("_", call_id)[:64]


def is_valid_thought_signature(signature: object) -> bool:
    """Signatures are protobuf bytes: anything but padded base64 is rejected by the API."""
    return (
        isinstance(signature, str)
        and len(signature) % 4 == 0
        and bool(signature)
        and _BASE64.match(signature) is not None
    )


def build_payload(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The SDK call's arguments: `{"model", "contents", "config"}` (what `on_payload` sees)."""
    config: dict[str, Any] = {"maxOutputTokens": base_max_tokens(model, options.max_tokens)}
    if options.temperature is not None:
        config["temperature"] = options.temperature
    system_prompt = context.get("systemPrompt")
    if system_prompt:
        config["systemInstruction"] = sanitize_surrogates(system_prompt)
    tools = context.get("tools") or []
    if tools:
        config["tools"] = convert_tools(tools)
        if isinstance(options.tool_choice, str):
            mode = _TOOL_CHOICE.get(options.tool_choice.lower(), "AUTO")
            config["toolConfig"] = {"functionCallingConfig": {"mode": mode}}
    thinking = thinking_config(model, options)
    if thinking is not None:
        config["thinkingConfig"] = thinking
    return {
        "model": model.id,
        "contents": convert_messages(
            model, context.get("messages") or [], owner=options.history_owner
        ),
        "config": config,
    }


def thinking_config(model: Model, options: StreamOptions) -> dict[str, Any] | None:
    """pi's mapping: thinkingLevel for Gemini 3, a token budget for the others."""
    level = effective_level(options.reasoning)
    if level is None or not model.reasoning:
        return None
    effort = "high" if level == "xhigh" else level
    model_id = model.id.lower()
    if _GEMINI3_PRO.search(model_id):
        return {
            "includeThoughts": True,
            "thinkingLevel": "LOW" if effort in ("minimal", "low") else "HIGH",
        }
    if _GEMINI3_FLASH.search(model_id):
        return {"includeThoughts": True, "thinkingLevel": effort.upper()}
    return {
        "includeThoughts": True,
        "thinkingBudget": _budget(model_id, effort, options.thinking_budgets),
    }


def _budget(model_id: str, effort: str, custom: Mapping[str, int] | None) -> int:
    if custom and effort in custom:
        return int(custom[effort])
    if "2.5-pro" in model_id:
        return _BUDGETS_25_PRO[effort]
    if "2.5-flash" in model_id:
        return _BUDGETS_25_FLASH[effort]
    return -1  # dynamic: the model decides


def convert_tools(tools: list[Tool]) -> list[dict[str, Any]]:
    declarations = [
        {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "parametersJsonSchema": clean_schema_for_gemini(tool.get("parameters") or {}),
        }
        for tool in tools
    ]
    return [{"functionDeclarations": declarations}]


def convert_messages(
    model: Model, messages: list[Message], *, owner: object | None = None
) -> list[dict[str, Any]]:
    """Gemini `contents`: user/model turns; consecutive tool results share one user turn."""
    contents: list[dict[str, Any]] = []
    images_ok = model.supports_images
    gemini3 = "gemini-3" in model.id.lower()
    send_ids = requires_tool_call_id(model.id)
    responses: list[dict[str, Any]] | None = None  # the open turn of function responses
    result_images: list[dict[str, Any]] | None = None  # their images (models before Gemini 3)
    for message in transform_messages(messages, model, normalize_tool_call_id, owner=owner):
        role = message.get("role")
        if role != "toolResult":
            responses = result_images = None
        if role == "user":
            parts = _user_parts(message.get("content"), images_ok)
            if parts:
                contents.append({"role": "user", "parts": parts})
        elif role == "assistant":
            parts = _model_parts(cast(AssistantMessage, message), model, gemini3, send_ids)
            if parts:
                contents.append({"role": "model", "parts": parts})
        elif role == "toolResult":
            result = cast(ToolResultMessage, message)
            images = _image_parts(result.get("content", [])) if images_ok else []
            response = _function_response(result, images if gemini3 else [], send_ids)
            if responses is None:
                responses = []
                contents.append({"role": "user", "parts": responses})
            responses.append(response)
            if images and not gemini3:
                if result_images is None:
                    result_images = [{"text": TOOL_IMAGE_TEXT}]
                    contents.append({"role": "user", "parts": result_images})
                result_images.extend(images)
    return contents


def _user_parts(content: Any, images_ok: bool) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": sanitize_surrogates(content)}] if content else []
    parts: list[dict[str, Any]] = []
    for item in content or []:
        kind = item.get("type")
        if kind == "text":
            text = item.get("text") or ""
            if text:
                parts.append({"text": sanitize_surrogates(text)})
        elif kind == "image" and images_ok:
            parts.append({"inlineData": {"mimeType": item["mimeType"], "data": item["data"]}})
    return parts


def _model_parts(
    message: AssistantMessage, model: Model, gemini3: bool, send_ids: bool
) -> list[dict[str, Any]]:
    same = message.get("provider") == model.provider and message.get("model") == model.id
    parts: list[dict[str, Any]] = []
    for block in message.get("content", []):
        raw: Any = block
        kind = raw.get("type")
        if kind == "text":
            text = raw.get("text") or ""
            signature = _kept_signature(same, raw.get("textSignature"))
            if text.strip() or signature:
                part: dict[str, Any] = {"text": sanitize_surrogates(text)}
                if signature:
                    part["thoughtSignature"] = signature
                parts.append(part)
        elif kind == "thinking":
            text = raw.get("thinking") or ""
            signature = _kept_signature(same, raw.get("thinkingSignature"))
            if not text.strip() and not signature:
                continue
            if same:
                part = {"thought": True, "text": sanitize_surrogates(text)}
                if signature:
                    part["thoughtSignature"] = signature
            else:
                part = {"text": sanitize_surrogates(text)}
            parts.append(part)
        elif kind == "toolCall":
            call: dict[str, Any] = {"name": raw["name"], "args": raw.get("arguments") or {}}
            if send_ids:
                call["id"] = raw["id"]
            part = {"functionCall": call}
            signature = _kept_signature(same, raw.get("thoughtSignature"))
            if signature:
                part["thoughtSignature"] = signature
            elif gemini3:
                part["thoughtSignature"] = SKIP_THOUGHT_SIGNATURE
            parts.append(part)
    return parts


def _kept_signature(same_model: bool, signature: object) -> str | None:
    return signature if same_model and is_valid_thought_signature(signature) else None  # type: ignore[return-value]


def _image_parts(content: list[Any]) -> list[dict[str, Any]]:
    return [
        {"inlineData": {"mimeType": item["mimeType"], "data": item["data"]}}
        for item in content
        if item.get("type") == "image"
    ]


def _function_response(
    result: ToolResultMessage, nested_images: list[dict[str, Any]], send_ids: bool
) -> dict[str, Any]:
    content: list[Any] = list(result.get("content", []))
    text = "\n".join(item.get("text") or "" for item in content if item.get("type") == "text")
    has_images = any(item.get("type") == "image" for item in content)
    value = sanitize_surrogates(text) if text else (IMAGE_ONLY_RESULT if has_images else "")
    response: dict[str, Any] = {
        "name": result["toolName"],
        "response": {"error": value} if result.get("isError") else {"output": value},
    }
    if nested_images:
        response["parts"] = nested_images  # Gemini 3 takes images inside the function response
    if send_ids:
        response["id"] = result["toolCallId"]
    return {"functionResponse": response}
