"""Which history repairs a provider/model needs before its request (OpenClaw's transcript policy).

Providers disagree about what a valid transcript is: Anthropic wants strictly alternating turns
and every `tool_use` answered, Gemini rejects a history that opens with a model turn, Mistral
takes only 9-character alphanumeric tool-call ids, OpenAI keeps its own `call_...|fc_...` ids.
The runner resolves one `TranscriptPolicy` per attempt and the sanitize pipeline, the turn
validators and the tool-result guard read their switches from it.

The matrix is seed 004's table, refined with the reference's newest rules (§4.11):

| switch                         | Anthropic | Google            | OpenAI      | Mistral       |
| ------------------------------ | --------- | ----------------- | ----------- | ------------- |
| sanitize_mode                  | full      | full              | images-only | full          |
| sanitize_tool_call_ids         | yes       | yes               | no (*)      | yes (strict9) |
| repair_tool_use_result_pairing | yes       | yes               | yes (*)     | yes (*)       |
| normalize_antigravity_thinking | no        | Claude via Google | no          | no            |
| apply_google_turn_ordering     | no        | yes               | no          | no            |
| validate turns                 | Anthropic | Gemini            | no          | no            |
| allow_synthetic_tool_results   | yes       | yes               | no          | no            |

(*) where the seed's table and the reference's newest code differ, the newest code wins: OpenAI
keeps its native tool-call ids (rewriting them breaks the Responses API's call/item pairing),
and the pairing repair runs for every provider (OpenAI rejects a tool result whose call is gone,
which a dropped malformed call or a cut history can produce).

Beyond the table: strict OpenAI-compatible servers (`openai-completions` other than OpenAI,
OpenRouter and opencode; Mistral and Moonshot among them) get strict ids and Anthropic-style turn
merging; MiniMax always gets strict ids; Gemini behind OpenRouter gets thought-signature
cleaning; GitHub Copilot's Claude gets its thinking blocks dropped; native `toolu_` ids stay as
they are for Anthropic and Kimi's `functions.<name>:<n>` ids for Kimi/Moonshot.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final, Literal

SanitizeMode = Literal["full", "images-only"]
ToolCallIdMode = Literal["strict", "strict9"]

GOOGLE_APIS: Final = frozenset(
    {"google-generative-ai", "google-gemini-cli", "google-antigravity", "google-vertex"}
)
ANTHROPIC_APIS: Final = frozenset({"anthropic-messages", "bedrock-converse-stream"})
ANTHROPIC_PROVIDERS: Final = frozenset({"anthropic", "amazon-bedrock"})
OPENAI_APIS: Final = frozenset(
    {"openai", "openai-completions", "openai-responses", "openai-codex-responses"}
)
OPENAI_RESPONSES_APIS: Final = frozenset(
    {"openai-responses", "openai-codex-responses", "azure-openai-responses"}
)
OPENAI_PROVIDERS: Final = frozenset(
    {"openai", "openai-codex", "azure", "azure-openai", "azure-openai-responses"}
)
TURN_MERGE_EXCLUDED_PROVIDERS: Final = frozenset({"openrouter", "opencode"})
"""OpenAI-compatible routers that accept any turn order (they translate per upstream)."""
GEMINI_ROUTER_PROVIDERS: Final = frozenset({"openrouter", "opencode", "kilocode"})
MISTRAL_MODEL_HINTS: Final = (
    "mistral",
    "mixtral",
    "codestral",
    "pixtral",
    "devstral",
    "ministral",
    "mistralai",
)
MINIMAX_PROVIDERS: Final = frozenset({"minimax", "minimax-cn"})
KIMI_PROVIDERS: Final = frozenset({"moonshot", "moonshotai", "kimi", "kimi-coding"})
_PROVIDER_ALIASES: Final = {"bedrock": "amazon-bedrock", "aws-bedrock": "amazon-bedrock"}


@dataclass(frozen=True, slots=True)
class ThoughtSignaturePolicy:
    """How to strip `thought_signature`/`thoughtSignature` from non-thinking blocks.

    `allow_base64_only`: keep only values that are valid base64 (Gemini's own signatures);
    otherwise only Claude-style `msg_...` values are stripped. `include_camel_case`: also look at
    the camelCase key pi writes.
    """

    allow_base64_only: bool = False
    include_camel_case: bool = False


@dataclass(frozen=True, slots=True)
class TranscriptPolicy:
    """The history repairs one provider/model needs; see the module docstring for the table."""

    sanitize_mode: SanitizeMode = "full"
    sanitize_tool_call_ids: bool = False
    tool_call_id_mode: ToolCallIdMode | None = None
    preserve_kimi_tool_call_ids: bool = False
    preserve_native_anthropic_tool_use_ids: bool = False
    repair_tool_use_result_pairing: bool = True
    preserve_signatures: bool = False
    sanitize_thought_signatures: ThoughtSignaturePolicy | None = None
    normalize_antigravity_thinking_blocks: bool = False
    drop_thinking_blocks: bool = False
    apply_google_turn_ordering: bool = False
    validate_gemini_turns: bool = False
    validate_anthropic_turns: bool = False
    allow_synthetic_tool_results: bool = False


def normalize_provider_id(provider: str | None) -> str:
    """Lower-cased provider id with the common aliases folded (`bedrock` -> `amazon-bedrock`)."""
    value = (provider or "").strip().lower()
    return _PROVIDER_ALIASES.get(value, value)


def is_google_model_api(model_api: str | None) -> bool:
    return model_api in GOOGLE_APIS


def is_openai_responses_api(model_api: str | None) -> bool:
    return model_api in OPENAI_RESPONSES_APIS


def is_antigravity_claude(
    model_api: str | None, provider: str | None, model_id: str | None
) -> bool:
    """Claude served through Google's Antigravity (Cloud Code Assist) endpoint."""
    via_antigravity = (
        normalize_provider_id(provider) == "google-antigravity"
        or (model_api or "").lower() == "google-antigravity"
    )
    return via_antigravity and "claude" in (model_id or "").lower()


def _is_mistral(provider: str, model_id: str) -> bool:
    return provider == "mistral" or any(hint in model_id for hint in MISTRAL_MODEL_HINTS)


def _is_minimax(provider: str, model_id: str) -> bool:
    return provider in MINIMAX_PROVIDERS or "minimax" in model_id


def _is_openai(model_api: str | None, provider: str) -> bool:
    if provider in OPENAI_PROVIDERS:
        return True
    if model_api in OPENAI_RESPONSES_APIS:
        return True
    return not provider and model_api in OPENAI_APIS


@functools.lru_cache(maxsize=256)
def resolve_transcript_policy(
    model_api: str | None, provider: str | None, model_id: str | None
) -> TranscriptPolicy:
    """The policy for one target model (its API, provider id and model id; any may be None).

    Policies are frozen, so one per model is kept and shared (asked for twice a message)."""
    prov = normalize_provider_id(provider)
    model = (model_id or "").lower()
    is_google = is_google_model_api(model_api)
    is_anthropic = model_api in ANTHROPIC_APIS or prov in ANTHROPIC_PROVIDERS
    is_openai = _is_openai(model_api, prov)
    is_strict_openai_compatible = (
        model_api == "openai-completions"
        and not is_openai
        and prov not in TURN_MERGE_EXCLUDED_PROVIDERS
    )
    is_mistral = _is_mistral(prov, model)
    is_minimax = _is_minimax(prov, model)
    is_router_gemini = prov in GEMINI_ROUTER_PROVIDERS and "gemini" in model
    antigravity_claude = is_antigravity_claude(model_api, prov, model)

    needs_full_sanitize = is_google or is_anthropic or is_mistral or is_router_gemini
    sanitize_ids = not is_openai and (
        is_google or is_anthropic or is_mistral or is_minimax or is_strict_openai_compatible
    )
    id_mode: ToolCallIdMode | None = None
    if sanitize_ids:
        id_mode = "strict9" if is_mistral else "strict"
    thought_signatures = (
        ThoughtSignaturePolicy(allow_base64_only=True, include_camel_case=True)
        if not is_openai and (is_google or is_router_gemini)
        else None
    )
    return TranscriptPolicy(
        sanitize_mode="full" if needs_full_sanitize and not is_openai else "images-only",
        sanitize_tool_call_ids=sanitize_ids,
        tool_call_id_mode=id_mode,
        preserve_kimi_tool_call_ids=sanitize_ids and prov in KIMI_PROVIDERS,
        preserve_native_anthropic_tool_use_ids=sanitize_ids and is_anthropic,
        repair_tool_use_result_pairing=True,
        preserve_signatures=antigravity_claude,
        sanitize_thought_signatures=thought_signatures,
        normalize_antigravity_thinking_blocks=antigravity_claude,
        drop_thinking_blocks=prov == "github-copilot" and "claude" in model,
        apply_google_turn_ordering=is_google and not is_openai,
        validate_gemini_turns=is_google and not is_openai,
        validate_anthropic_turns=not is_openai and (is_anthropic or is_strict_openai_compatible),
        allow_synthetic_tool_results=not is_openai and (is_google or is_anthropic),
    )
