"""The transcript policy matrix (seed 004's table, reference §4.11)."""

from __future__ import annotations

import pytest

from clawpi.runner.transcript_policy import (
    ThoughtSignaturePolicy,
    TranscriptPolicy,
    resolve_transcript_policy,
)

GEMINI_SIGNATURES = ThoughtSignaturePolicy(allow_base64_only=True, include_camel_case=True)


def test_anthropic_sanitizes_ids_strictly_repairs_pairing_and_validates_anthropic_turns() -> None:
    policy = resolve_transcript_policy("anthropic-messages", "anthropic", "claude-sonnet-4-5")
    assert policy == TranscriptPolicy(
        sanitize_mode="full",
        sanitize_tool_call_ids=True,
        tool_call_id_mode="strict",
        preserve_native_anthropic_tool_use_ids=True,
        repair_tool_use_result_pairing=True,
        normalize_antigravity_thinking_blocks=False,
        apply_google_turn_ordering=False,
        validate_gemini_turns=False,
        validate_anthropic_turns=True,
        allow_synthetic_tool_results=True,
    )


def test_google_gets_thought_signature_sanitizing_turn_ordering_and_gemini_validation() -> None:
    policy = resolve_transcript_policy("google-generative-ai", "google", "gemini-2.5-pro")
    assert policy.sanitize_mode == "full"
    assert policy.sanitize_tool_call_ids and policy.tool_call_id_mode == "strict"
    assert policy.sanitize_thought_signatures == GEMINI_SIGNATURES
    assert policy.repair_tool_use_result_pairing
    assert policy.apply_google_turn_ordering and policy.validate_gemini_turns
    assert not policy.validate_anthropic_turns
    assert policy.allow_synthetic_tool_results
    assert not policy.normalize_antigravity_thinking_blocks


def test_plain_openai_is_images_only_without_id_sanitizing_or_anthropic_validation() -> None:
    for api in ("openai-completions", "openai-responses"):
        policy = resolve_transcript_policy(api, "openai", "gpt-5")
        assert policy.sanitize_mode == "images-only"
        assert not policy.sanitize_tool_call_ids and policy.tool_call_id_mode is None
        assert not policy.validate_anthropic_turns and not policy.validate_gemini_turns
        assert not policy.apply_google_turn_ordering
        assert not policy.allow_synthetic_tool_results
        assert policy.repair_tool_use_result_pairing


def test_openai_responses_api_without_provider_is_openai() -> None:
    policy = resolve_transcript_policy("openai-responses", None, "gpt-5")
    assert policy.sanitize_mode == "images-only"
    assert not policy.sanitize_tool_call_ids


@pytest.mark.parametrize(
    ("api", "provider", "model"),
    [
        ("openai-completions", "mistral", "mistral-large-latest"),
        ("openai-completions", "ollama", "devstral:24b"),
        ("openai-completions", "openrouter", "mistralai/codestral-2501"),
    ],
)
def test_mistral_by_provider_or_model_hint_uses_strict9_ids(
    api: str, provider: str, model: str
) -> None:
    policy = resolve_transcript_policy(api, provider, model)
    assert policy.sanitize_mode == "full"
    assert policy.sanitize_tool_call_ids and policy.tool_call_id_mode == "strict9"
    assert not policy.allow_synthetic_tool_results
    assert not policy.apply_google_turn_ordering


def test_moonshot_via_openai_completions_validates_anthropic_turns() -> None:
    policy = resolve_transcript_policy("openai-completions", "moonshot", "kimi-k2")
    assert policy.validate_anthropic_turns
    assert policy.preserve_kimi_tool_call_ids


def test_bedrock_is_full_sanitize_with_anthropic_rules() -> None:
    policy = resolve_transcript_policy("bedrock-converse-stream", "amazon-bedrock", "claude-x")
    assert policy.sanitize_mode == "full"
    assert policy.validate_anthropic_turns and policy.allow_synthetic_tool_results
    assert resolve_transcript_policy(None, "bedrock", "x").sanitize_mode == "full"


def test_openrouter_and_opencode_do_not_merge_turns() -> None:
    for provider in ("openrouter", "opencode"):
        policy = resolve_transcript_policy("openai-completions", provider, "some/model")
        assert not policy.validate_anthropic_turns
        assert not policy.sanitize_tool_call_ids


def test_minimax_forces_strict_tool_call_ids() -> None:
    by_provider = resolve_transcript_policy("openai-completions", "minimax", "abab-7")
    by_model = resolve_transcript_policy("openai-completions", "openrouter", "minimax/minimax-m2")
    for policy in (by_provider, by_model):
        assert policy.sanitize_tool_call_ids and policy.tool_call_id_mode == "strict"


def test_claude_via_antigravity_normalizes_thinking_and_preserves_signatures() -> None:
    policy = resolve_transcript_policy("google-antigravity", "google-antigravity", "claude-opus-4")
    assert policy.normalize_antigravity_thinking_blocks and policy.preserve_signatures
    assert policy.validate_gemini_turns
    gemini = resolve_transcript_policy("google-antigravity", "google-antigravity", "gemini-3-pro")
    assert not gemini.normalize_antigravity_thinking_blocks


def test_openrouter_gemini_strips_non_base64_thought_signatures() -> None:
    policy = resolve_transcript_policy("openai-completions", "openrouter", "google/gemini-2.5")
    assert policy.sanitize_thought_signatures == GEMINI_SIGNATURES
    assert policy.sanitize_mode == "full"
    assert not policy.apply_google_turn_ordering


def test_github_copilot_claude_drops_thinking_blocks() -> None:
    assert resolve_transcript_policy(
        "openai-completions", "github-copilot", "claude-sonnet-4"
    ).drop_thinking_blocks
    assert not resolve_transcript_policy(
        "openai-completions", "github-copilot", "gpt-5"
    ).drop_thinking_blocks


def test_strict_openai_compatible_server_sanitizes_ids_and_validates_turns() -> None:
    policy = resolve_transcript_policy("openai-completions", "vllm", "qwen3-32b")
    assert policy.sanitize_tool_call_ids and policy.tool_call_id_mode == "strict"
    assert policy.validate_anthropic_turns
    assert policy.sanitize_mode == "images-only"


def test_unknown_everything_is_a_safe_default() -> None:
    policy = resolve_transcript_policy(None, None, None)
    assert policy.sanitize_mode == "images-only"
    assert policy.repair_tool_use_result_pairing
    assert not policy.validate_anthropic_turns


def test_provider_ids_are_case_insensitive() -> None:
    assert resolve_transcript_policy(
        "anthropic-messages", "Anthropic", "claude"
    ) == resolve_transcript_policy("anthropic-messages", "anthropic", "claude")
