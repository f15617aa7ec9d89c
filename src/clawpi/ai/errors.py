"""Reading provider errors: which kind of failure a raw error text is, and what to do about it.

Providers word the same failure a hundred ways ("429 Too Many Requests", "resource has been
exhausted", `{"type":"overloaded_error"}`). The runner must decide from that text alone whether
to rotate the API key, fall back to another model, compact the session or give up, and the reply
layer must show the user a sentence instead of a JSON dump. Both read the verdicts here.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import orjson

from clawpi.ai.overflow import is_overflow_error_text
from clawpi.ai.types import AssistantMessage
from clawpi.errors import ClawpiError

FailoverReason: TypeAlias = Literal[
    "auth",
    "auth_permanent",
    "format",
    "rate_limit",
    "overloaded",
    "billing",
    "timeout",
    "model_not_found",
    "session_expired",
    "server_error",
    "no_error_details",
    "unknown",
]

FAILOVER_REASON_STATUS: Mapping[str, int] = {
    "billing": 402,
    "server_error": 500,
    "rate_limit": 429,
    "overloaded": 503,
    "auth": 401,
    "auth_permanent": 403,
    "timeout": 408,
    "format": 400,
    "model_not_found": 404,
    "session_expired": 410,
}

BILLING_LONG_TEXT_LIMIT = 512
"""Past this length only hard 402 markers count as billing: long texts mention "credits" freely."""


def resolve_failover_status(reason: FailoverReason | None) -> int | None:
    """The HTTP status that stands for a failover reason (none for unknown ones)."""
    return FAILOVER_REASON_STATUS.get(reason or "")


class FailoverError(ClawpiError):
    """A provider failure that another auth profile or another model might not have.

    Raised by the runner so the model-fallback loop can move on; `reason` says why.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: FailoverReason,
        provider: str | None = None,
        model: str | None = None,
        profile_id: str | None = None,
        status: int | None = None,
        code: str | None = None,
        raw_error: str | None = None,
        session_id: str | None = None,
        lane: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason: FailoverReason = reason
        self.provider = provider
        self.model = model
        self.profile_id = profile_id
        self.status = status if status is not None else resolve_failover_status(reason)
        self.code = code
        self.raw_error = raw_error
        self.session_id = session_id
        self.lane = lane

    def __repr__(self) -> str:
        where = "/".join(p for p in (self.provider, self.model) if p)
        return f"FailoverError(reason={self.reason!r}, status={self.status}, {where!r}, {self.message!r})"


# -- API error payloads ----------------------------------------------------------------------

_ERROR_PAYLOAD_PREFIX = re.compile(
    r"^(?:error|api\s*error|apierror|openai\s*error|anthropic\s*error|gateway\s*error)[:\s-]+",
    re.IGNORECASE,
)
_STATUS_PREFIX = re.compile(r"^(\d{3})\s+", re.DOTALL)
HTTP_STATUS_PREFIX_RE = re.compile(r"^(?:http\s*)?(\d{3})\s+(.+)$", re.IGNORECASE | re.DOTALL)
_HTTP_ERROR_HINTS = (
    "error",
    "bad request",
    "not found",
    "unauthorized",
    "forbidden",
    "internal server",
    "service unavailable",
    "gateway",
    "rate limit",
    "overloaded",
    "timeout",
    "timed out",
    "invalid",
    "too many requests",
    "permission",
)


@dataclasses.dataclass(frozen=True, slots=True)
class ApiErrorInfo:
    """What a provider's JSON error body says, pulled out of `429 {"type":"error",...}`."""

    http_code: str | None = None
    type: str | None = None
    message: str | None = None
    request_id: str | None = None
    code: str | None = None


def _is_error_payload(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    if value.get("type") == "error":
        return True
    if isinstance(value.get("request_id"), str) or isinstance(value.get("requestId"), str):
        return True
    err = value.get("error")
    if isinstance(err, dict):
        return any(isinstance(err.get(k), str) for k in ("message", "type", "code"))
    return False


def parse_api_error_payload(raw: str | None) -> dict[str, Any] | None:
    """The provider's error object when `raw` is (an optionally prefixed) JSON error body."""
    trimmed = (raw or "").strip()
    if not trimmed.endswith("}"):  # every candidate below is a stripped suffix of `trimmed`
        return None
    candidates = [trimmed]
    status = _STATUS_PREFIX.match(trimmed)
    if status:
        candidates.append(trimmed[status.end() :].strip())
    prefix = _ERROR_PAYLOAD_PREFIX.match(trimmed)
    if prefix:
        after = trimmed[prefix.end() :].strip()
        candidates.append(after)
        status = _STATUS_PREFIX.match(after)
        if status:
            candidates.append(after[status.end() :].strip())
    for candidate in candidates:
        if not (candidate.startswith("{") and candidate.endswith("}")):
            continue
        try:
            parsed = orjson.loads(candidate)
        except orjson.JSONDecodeError:
            continue
        if _is_error_payload(parsed):
            return dict(parsed)
    return None


def get_api_error_payload_fingerprint(raw: str | None) -> str | None:
    """A stable key for an error body (sorted keys), so the same error is recognised twice."""
    payload = parse_api_error_payload(raw)
    if payload is None:
        return None
    return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode()


def is_raw_api_error_payload(raw: str | None) -> bool:
    """Whether the text is structurally a provider's JSON error body (never matches prose)."""
    return parse_api_error_payload(raw) is not None


def parse_api_error_info(raw: str | None) -> ApiErrorInfo | None:
    """The type, message and request id of a JSON error body, with its leading HTTP status."""
    trimmed = (raw or "").strip()
    if not trimmed:
        return None
    http_code: str | None = None
    candidate = trimmed
    match = re.match(r"^(\d{3})\s+(.+)$", candidate, re.DOTALL)
    if match:
        http_code = match.group(1)
        candidate = match.group(2).strip()
    payload = parse_api_error_payload(candidate)
    if payload is None:
        return None
    # Google nests the real failure under error.details[-1] only in some gateways; the common
    # shapes are {"error": {...}} (OpenAI, Google, Anthropic) and a flat {"message": ...}.
    err = payload.get("error")
    err_type: str | None = None
    err_message: str | None = None
    err_code: str | None = None
    if isinstance(err, dict):
        err_type = _str(err.get("type"))
        raw_code = err.get("code")
        err_code = _str(raw_code) if not isinstance(raw_code, int) else str(raw_code)
        if err_type is None and isinstance(raw_code, str):
            err_type = raw_code
        if err_type is None:
            err_type = _str(err.get("status"))
        err_message = _str(err.get("message"))
    elif isinstance(err, str):
        err_type = err
    request_id = _str(payload.get("request_id")) or _str(payload.get("requestId"))
    return ApiErrorInfo(
        http_code=http_code,
        type=err_type or _str(payload.get("type")),
        message=err_message or _str(payload.get("message")),
        request_id=request_id,
        code=err_code or _str(payload.get("code")),
    )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def extract_leading_http_status(raw: str) -> tuple[int, str] | None:
    """`(status, rest)` when the text starts with an HTTP status such as `503 Service ...`."""
    match = HTTP_STATUS_PREFIX_RE.match(raw.strip())
    if not match:
        return None
    return int(match.group(1)), match.group(2).strip()


def is_likely_http_error_text(raw: str) -> bool:
    """`<4xx/5xx> <message that reads like an error>`, as SDKs render failed responses."""
    lead = extract_leading_http_status(raw)
    if lead is None or lead[0] < 400:
        return False
    rest = lead[1].lower()
    return any(hint in rest for hint in _HTTP_ERROR_HINTS)


_HTML_PAGE = re.compile(r"<!doctype html|<html[\s>]|<head[\s>]|<body[\s>]|cloudflare", re.I)


def is_cloudflare_or_html_error_page(raw: str) -> bool:
    """A CDN or gateway answered with an HTML page instead of the API's JSON."""
    return bool(_HTML_PAGE.search(raw[:2000]))


def format_raw_assistant_error_for_ui(raw: str | None) -> str:
    """A one-line rendering of a raw provider error: `HTTP 429 rate_limit_error: ...`."""
    trimmed = (raw or "").strip()
    if not trimmed:
        return "LLM request failed with an unknown error."
    lead = extract_leading_http_status(trimmed)
    if lead and is_cloudflare_or_html_error_page(trimmed):
        return (
            f"The AI service is temporarily unavailable (HTTP {lead[0]}). "
            "Please try again in a moment."
        )
    if lead and not lead[1].startswith("{"):
        return f"HTTP {lead[0]}: {lead[1]}"
    info = parse_api_error_info(trimmed)
    if info is not None and info.message:
        prefix = f"HTTP {info.http_code}" if info.http_code else "LLM error"
        kind = f" {info.type}" if info.type else ""
        request = f" (request_id: {info.request_id})" if info.request_id else ""
        return f"{prefix}{kind}: {info.message}{request}"
    if info is not None or is_json_body(trimmed):
        # A body with nothing to read in it: say what is known rather than show its JSON.
        status = f"HTTP {lead[0]}" if lead else ""
        kind = info.type if info is not None and info.type else ""
        known = " ".join(part for part in (status, kind) if part)
        if not known:
            return "LLM request failed with an unknown error."
        request = f" (request_id: {info.request_id})" if info and info.request_id else ""
        return f"LLM request failed ({known}) and the provider gave no error message.{request}"
    return trimmed if len(trimmed) <= 600 else f"{trimmed[:600]}…"


def is_raw_error_dump(raw: str) -> bool:
    """A provider's response dumped as an error: a JSON error body, `<status> <error text>`,
    or any JSON body; rendered by `format_raw_assistant_error_for_ui`, never shown as is."""
    return is_raw_api_error_payload(raw) or is_likely_http_error_text(raw) or is_json_body(raw)


def is_json_body(raw: str) -> bool:
    """Whether the text, after an optional leading HTTP status, is a JSON object or array: a
    response body an SDK put in its error message, never something to show a user."""
    lead = extract_leading_http_status(raw)
    body = (lead[1] if lead else raw).strip()
    if not body or body[0] not in "{[" or body[-1] not in "}]":
        return False
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return True


# -- pattern sets ----------------------------------------------------------------------------


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def _matches(raw: str, patterns: tuple[str | re.Pattern[str], ...]) -> bool:
    if not raw:
        return False
    lower = raw.lower()
    for p in patterns:
        if isinstance(p, str):
            if p in lower:
                return True
        elif p.search(lower):
            return True
    return False


_RATE_LIMIT: tuple[str | re.Pattern[str], ...] = (
    _rx(r"rate[_ ]limit|too many requests|\b429\b"),
    "model_cooldown",
    "exceeded your current quota",
    "resource has been exhausted",
    "quota exceeded",
    "resource_exhausted",
    "usage limit",
    _rx(r"\btpm\b"),
    "tokens per minute",
    "tokens per day",
)
_OVERLOADED: tuple[str | re.Pattern[str], ...] = (
    _rx(r'overloaded_error|"type"\s*:\s*"overloaded_error"'),
    "overloaded",
    _rx(r"service unavailable.*(overload|capacity|high demand)"),
    _rx(r"(overload|capacity|high demand).*service unavailable"),
    "high demand",
)
_TIMEOUT: tuple[str | re.Pattern[str], ...] = (
    "timeout",
    "timed out",
    "service unavailable",
    "deadline exceeded",
    "connection error",
    "network error",
    "network request failed",
    "fetch failed",
    "socket hang up",
    _rx(
        r"\b(?:econnrefused|econnreset|econnaborted|enetunreach|ehostunreach|ehostdown|"
        r"enetreset|etimedout|esockettimedout|epipe|enotfound|eai_again)\b"
    ),
    _rx(r"without sending (?:any )?chunks?"),
    _rx(r"(?:unhandled )?(?:stop )?reason:\s*(?:abort|error|malformed_response|network_error)\b"),
    "provider returned error",
)
_BILLING_HARD_402 = _rx(
    r"status(?: code)?:\s*402\b|\bhttp\s*402\b|error code\s*402\b|"
    r"\b(?:got|returned|received)\s+(?:an?\s+)?(?:http\s+)?402\b|^\s*402\s+payment"
)
_BILLING: tuple[str | re.Pattern[str], ...] = (
    "payment required",
    "insufficient credits",
    "insufficient_quota",
    "credit balance",
    "plans & billing",
    "insufficient balance",
    "insufficient usd or diem balance",
    "requires more credits",
)
_BILLING_HEAD = _rx(r"^\s*(?:billing|credit balance|payment required)")
_BILLING_HINT = _rx(r"upgrade|credits|payment|plan")
_AUTH_PERMANENT: tuple[str | re.Pattern[str], ...] = (
    _rx(r"api key (?:has been )?(?:revoked|invalid|deactivated|deleted)"),
    "invalid_api_key",
    _rx(r"key has been (?:disabled|revoked)"),
    "account has been deactivated",
    _rx(r"could not (?:authenticate|validate).*(?:api key|credentials)"),
    "permission_error",
    "not allowed for this organization",
)
_AUTH: tuple[str | re.Pattern[str], ...] = (
    _rx(r"invalid[_ ]?api[_ ]?key"),
    "incorrect api key",
    "invalid token",
    "authentication",
    "re-authenticate",
    "oauth token refresh failed",
    "unauthorized",
    "forbidden",
    "access denied",
    _rx(r"insufficient permissions?"),
    _rx(r"missing scopes?:"),
    "expired",
    "token has expired",
    _rx(r"\b401\b"),
    _rx(r"\b403\b"),
    "no credentials found",
    "no api key found",
)
_FORMAT: tuple[str | re.Pattern[str], ...] = (
    "string should match pattern",
    "tool_use.id",
    "tool_use_id",
    "messages.1.content.1.tool_use.id",
    "invalid request format",
    _rx(r"tool call id was .* must be"),
)
_PERIODIC_USAGE_LIMIT = _rx(
    r"\b(?:daily|weekly|monthly)(?:/(?:daily|weekly|monthly))* (?:usage )?limits? "
    r"(?:(?:has|have) been )?(?:exhausted|reached|exceeded)"
)
_MODEL_NOT_FOUND: tuple[str | re.Pattern[str], ...] = (
    "model_not_found",
    _rx(r"\bmodel\b[^.\n]{0,80}\b(?:not found|does not exist|is not supported|not available)"),
    _rx(r"\bunknown model\b"),
    _rx(r"\bno such model\b"),
    _rx(r"is not a valid model id"),
    _rx(r"models/[\w.\-]+ is not found"),
)
_SESSION_EXPIRED = _rx(
    r"\b(?:session|conversation)\b[^.\n]{0,40}\b(?:not found|expired|is invalid|invalid|does not exist)"
)
_TRANSIENT_STATUS = frozenset({499, 500, 502, 503, 504, 521, 522, 523, 524, 529})
_GENERIC_INTERNAL = _rx(
    r"^\s*(?:an )?internal (?:server )?error(?: occurred| has occurred)?\.?\s*$|"
    r"internal error encountered|\binternal_error\b"
)
_SERVER_ERROR_TEXT = _rx(
    r"internal server error|bad gateway|gateway timeout|server_error|upstream error"
)
_API_ERROR_TRANSIENT = _rx(r"try again|temporar|overload|unavailable|internal|retry")
_RETRYABLE_402 = _rx(r"try again|retry|temporar|cooldown")
_402_LIMIT = _rx(r"usage limit|rate limit")
_SUBSCRIPTION_QUOTA = _rx(r"subscription quota limit")
_RESET_HINT = _rx(r"\breset|spend limit|refresh")
_OPENROUTER_KEY_LIMIT = _rx(r"key (?:budget )?limit exceeded")
_OAUTH_REFRESH = _rx(
    r"oauth token refresh failed|refresh token (?:is )?(?:invalid|expired|revoked)"
)
_REASONING_REQUIRED = _rx(r"reasoning is (?:required|mandatory)")


def is_rate_limit_error_message(raw: str) -> bool:
    return _matches(raw, _RATE_LIMIT)


def is_overloaded_error_message(raw: str) -> bool:
    return _matches(raw, _OVERLOADED)


def is_timeout_error_message(raw: str) -> bool:
    return _matches(raw, _TIMEOUT)


def is_periodic_usage_limit_error_message(raw: str) -> bool:
    return bool(_PERIODIC_USAGE_LIMIT.search(raw))


def is_billing_error_message(raw: str) -> bool:
    """Out of credits or balance. Long texts count only with a hard 402 marker."""
    if not raw:
        return False
    lower = raw.lower()
    if _BILLING_HARD_402.search(lower):
        return True
    if len(lower) > BILLING_LONG_TEXT_LIMIT:
        return False
    if _matches(lower, _BILLING):
        return True
    return bool(_BILLING_HEAD.search(lower) and _BILLING_HINT.search(lower)) or (
        "billing" in lower and bool(_BILLING_HINT.search(lower))
    )


def is_auth_permanent_error_message(raw: str) -> bool:
    return _matches(raw, _AUTH_PERMANENT)


def is_auth_error_message(raw: str) -> bool:
    return _matches(raw, _AUTH)


def is_model_not_found_error_message(raw: str) -> bool:
    return _matches(raw, _MODEL_NOT_FOUND)


def is_session_expired_error_message(raw: str) -> bool:
    return bool(_SESSION_EXPIRED.search(raw))


_ROLE_ORDERING = _rx(
    r"incorrect role information|roles must alternate|400.*\brole\b|\"message\".*role.*information|"
    r"must alternate between|conversation roles must|expected .*role.* but got"
)


def is_role_ordering_error(raw: str) -> bool:
    """The provider rejected the transcript's user/assistant alternation."""
    return bool(raw and _ROLE_ORDERING.search(raw))


_TOOL_CALL_INPUT_MISSING = _rx(
    r"tool_(?:use|call)\.(?:input|arguments).*?(?:field required|required)"
)
_TOOL_CALL_INPUT_PATH = _rx(r"messages\.\d+\.content\.\d+\.tool_(?:use|call)\.(?:input|arguments)")


def is_missing_tool_call_input_error(raw: str) -> bool:
    return bool(raw and (_TOOL_CALL_INPUT_MISSING.search(raw) or _TOOL_CALL_INPUT_PATH.search(raw)))


_IMAGE_DIMENSION = _rx(
    r"image dimensions exceed max allowed size(?: for many-image requests)?:\s*(\d+)\s*pixels"
)
_IMAGE_DIMENSION_PATH = _rx(r"messages\.(\d+)\.content\.(\d+)\.image")
_IMAGE_SIZE = _rx(r"image exceeds\s*(\d+(?:\.\d+)?)\s*mb")


@dataclasses.dataclass(frozen=True, slots=True)
class ImageDimensionError:
    raw: str
    max_dimension_px: int | None = None
    message_index: int | None = None
    content_index: int | None = None


def parse_image_dimension_error(raw: str) -> ImageDimensionError | None:
    """Anthropic's many-image pixel limit, with the limit and the offending block's position."""
    if not raw or "image dimensions exceed max allowed size" not in raw.lower():
        return None
    limit = _IMAGE_DIMENSION.search(raw)
    path = _IMAGE_DIMENSION_PATH.search(raw)
    return ImageDimensionError(
        raw=raw,
        max_dimension_px=int(limit.group(1)) if limit else None,
        message_index=int(path.group(1)) if path else None,
        content_index=int(path.group(2)) if path else None,
    )


def is_image_dimension_error_message(raw: str) -> bool:
    return parse_image_dimension_error(raw) is not None


def parse_image_size_error(raw: str) -> float | None:
    """The megabyte limit of an `image exceeds 5 MB maximum` error (0.0 when unstated)."""
    lower = (raw or "").lower()
    if "image exceeds" not in lower or "mb" not in lower:
        return None
    match = _IMAGE_SIZE.search(raw)
    return float(match.group(1)) if match else 0.0


def is_image_size_error(raw: str | None) -> bool:
    return parse_image_size_error(raw or "") is not None


def is_cloud_code_assist_format_error(raw: str) -> bool:
    """A request-shape rejection (bad tool-call ids and the like), not an image problem."""
    return not is_image_dimension_error_message(raw) and _matches(raw, _FORMAT)


is_format_error_message = is_cloud_code_assist_format_error


# -- context overflow ------------------------------------------------------------------------

_CONTEXT_OVERFLOW_SUBSTRINGS = (
    "request_too_large",
    "request exceeds the maximum size",
    "context length exceeded",
    "maximum context length",
    "prompt is too long",
    "prompt too long",
    "exceeds model context window",
    "model token limit",
    "context overflow:",
    "exceed context limit",
    "exceeds the model's maximum context",
    "context_window_exceeded",
    "上下文过长",
    "上下文超出",
    "上下文长度超",
    "超出最大上下文",
    "请压缩上下文",
)
_TPM_HINT = _rx(r"\btpm\b|tokens per minute|tokens per min\b|rate[_ ]limit|too many requests")
_CONTEXT_WINDOW_TOO_SMALL = _rx(r"context window.*(?:too small|minimum is)")
_CONTEXT_OVERFLOW_HINT = _rx(
    r"context.*overflow|context window.*(?:too (?:large|long)|exceed|over|limit|max(?:imum)?|requested|sent|tokens)|"
    r"(?:prompt|request|input).*(?:context|window|length|token).*(?:too (?:large|long)|exceed|over|limit|max(?:imum)?)"
)


def is_context_overflow_error(raw: str | None) -> bool:
    """The provider said the prompt does not fit the model's context window (strict check)."""
    if not raw:
        return False
    lower = raw.lower()
    if _TPM_HINT.search(lower) or _REASONING_REQUIRED.search(lower):
        return False
    if any(s in lower for s in _CONTEXT_OVERFLOW_SUBSTRINGS):
        return True
    if "invalid_argument" in lower and "maximum number of tokens" in lower:
        return True
    if "input exceeds" in lower and "maximum number of tokens" in lower:
        return True
    if "request size exceeds" in lower and ("context window" in lower or "context length" in lower):
        return True
    if (
        "exceed" in lower
        and "context" in lower
        and ("max_tokens" in lower or "input length" in lower)
    ):
        return True
    if "413" in lower and "too large" in lower:
        return True
    return is_overflow_error_text(raw)


def is_likely_context_overflow_error(raw: str | None) -> bool:
    """The strict check, or overflow-like wording that is not a billing or rate-limit error."""
    if not raw:
        return False
    if _CONTEXT_WINDOW_TOO_SMALL.search(raw):
        return False
    if is_billing_error_message(raw) or is_rate_limit_error_message(raw):
        return False
    if is_context_overflow_error(raw):
        return True
    return bool(_CONTEXT_OVERFLOW_HINT.search(raw)) and not _TPM_HINT.search(raw)


def is_compaction_failure_error(raw: str | None) -> bool:
    """Compaction itself overflowed: retrying with compaction again cannot help."""
    if not raw:
        return False
    lower = raw.lower()
    mentions = (
        "summarization failed" in lower or "auto-compaction" in lower or "compaction" in lower
    )
    if not mentions:
        return False
    return is_likely_context_overflow_error(raw) or "context overflow" in lower


# -- classification --------------------------------------------------------------------------


def _classify_402(lower: str) -> FailoverReason:
    if _RETRYABLE_402.search(lower) and _402_LIMIT.search(lower):
        return "rate_limit"
    if _PERIODIC_USAGE_LIMIT.search(lower) and _RESET_HINT.search(lower):
        return "rate_limit"
    if _SUBSCRIPTION_QUOTA.search(lower) and _RESET_HINT.search(lower):
        return "rate_limit"
    return "billing"


def classify_failover_reason(raw: str | None, provider: str | None = None) -> FailoverReason | None:
    """Why a provider call failed, from its error text alone; None when it is not a failover.

    Context overflow is deliberately None: the cure is compaction, not another model.
    """
    if not raw or not raw.strip():
        return None
    text = raw.strip()
    lower = text.lower()
    if is_image_dimension_error_message(text) or is_image_size_error(text):
        return None
    if is_session_expired_error_message(text):
        return "session_expired"
    if is_model_not_found_error_message(text):
        return "model_not_found"
    if is_context_overflow_error(text):
        return None
    lead = extract_leading_http_status(text)
    if _BILLING_HARD_402.search(lower) or (lead is not None and lead[0] == 402):
        return _classify_402(lower)
    if _OPENROUTER_KEY_LIMIT.search(lower):
        return "billing"
    if _PERIODIC_USAGE_LIMIT.search(lower):
        return "billing" if is_billing_error_message(text) else "rate_limit"
    if is_rate_limit_error_message(text):
        return "rate_limit"
    if is_overloaded_error_message(text):
        return "overloaded"
    if re.search(r'"type"\s*:\s*"server_error"', lower):
        return "server_error"
    if lead is not None and lead[0] in _TRANSIENT_STATUS:
        return "overloaded" if lead[0] == 529 else "timeout"
    if _GENERIC_INTERNAL.search(lower):
        return "timeout"
    if is_billing_error_message(text):
        return "billing"
    if _OAUTH_REFRESH.search(lower):
        return "auth_permanent"
    if is_auth_permanent_error_message(text):
        return "auth_permanent"
    if is_auth_error_message(text):
        return "auth"
    if lower.rstrip(".") == "an unknown error occurred":
        return "timeout"
    if "provider returned error" in lower:
        return "timeout"
    if _SERVER_ERROR_TEXT.search(lower):
        return "timeout"
    if re.search(r'"type"\s*:\s*"api_error"', lower) and _API_ERROR_TRANSIENT.search(lower):
        return "timeout"
    if is_cloud_code_assist_format_error(text):
        return "format"
    if lower == "unknown error (no error details in response)":
        return "no_error_details"
    if is_timeout_error_message(text):
        return "timeout"
    return None


_RATE_LIMIT_CODE = _rx(
    r"^(?:resource_exhausted|rate_limit(?:ed|_exceeded)?|too_many_requests|throttl\w*)$"
)
_TIMEOUT_CODES = frozenset(
    {
        "etimedout",
        "esockettimedout",
        "econnreset",
        "econnaborted",
        "econnrefused",
        "epipe",
        "enetunreach",
        "ehostunreach",
        "eai_again",
        "enotfound",
        "und_err_connect_timeout",
    }
)
_NO_BODY = _rx(r"^\s*\d{3}\s*(?:status code)?\s*\(no body\)")


def classify_failover_signal(
    status: int | None,
    message: str | None = None,
    code: str | None = None,
    provider: str | None = None,
) -> FailoverReason | None:
    """Like `classify_failover_reason`, but trusting an HTTP status or error code when known.

    The status comes from the error object or, failing that, a leading `NNN` in the message.
    """
    text = (message or "").strip()
    if status is None:
        lead = extract_leading_http_status(text)
        status = lead[0] if lead else None
    if code:
        normalized = code.strip().lower()
        if _RATE_LIMIT_CODE.match(normalized):
            return "rate_limit"
        if normalized == "deactivated_workspace":
            return "auth_permanent"
        if normalized in ("overloaded", "overloaded_error"):
            return "overloaded"
        if normalized in _TIMEOUT_CODES:
            return "timeout"
    from_text = classify_failover_reason(text, provider) if text else None
    if status is None:
        return from_text
    if is_cloudflare_or_html_error_page(text) and (status in (408, 499) or status >= 500):
        return "timeout"
    if status == 402:
        return _classify_402(text.lower())
    if status == 429:
        if "moonshot" in (provider or "").lower() and is_billing_error_message(text):
            return "billing"
        return "rate_limit"
    if status in (401, 403):
        if is_auth_permanent_error_message(text) or _OAUTH_REFRESH.search(text):
            return "auth_permanent"
        if is_billing_error_message(text):
            return "billing"
        return "auth"
    if status == 408:
        return "timeout"
    if status == 410:
        if from_text in ("session_expired", "billing", "auth", "auth_permanent"):
            return from_text
        return "timeout"
    if status == 404:
        if is_context_overflow_error(text):
            return None
        if from_text in ("session_expired", "billing", "auth", "auth_permanent"):
            return from_text
        return "model_not_found"
    if status in (499, 503):
        return "overloaded" if is_overloaded_error_message(text) else "timeout"
    if status in (500, 502, 504):
        if re.search(r"server_error|internal server error", text, re.I):
            return "server_error"
        return "timeout"
    if status == 529:
        return "overloaded"
    if status in (400, 422):
        if _NO_BODY.search(text):
            return None
        if is_context_overflow_error(text):
            return None
        if from_text is not None and from_text != "server_error":
            return from_text
        return "format"
    if status >= 500:
        return from_text or "timeout"
    return from_text


def is_failover_error_message(raw: str) -> bool:
    return classify_failover_reason(raw) is not None


def _assistant_error_text(message: AssistantMessage | None) -> str | None:
    if not message or message.get("stopReason") != "error":
        return None
    return message.get("errorMessage") or ""


def is_rate_limit_assistant_error(message: AssistantMessage | None) -> bool:
    text = _assistant_error_text(message)
    return text is not None and is_rate_limit_error_message(text)


def is_auth_assistant_error(message: AssistantMessage | None) -> bool:
    text = _assistant_error_text(message)
    return text is not None and (
        is_auth_error_message(text) or is_auth_permanent_error_message(text)
    )


def is_billing_assistant_error(message: AssistantMessage | None) -> bool:
    text = _assistant_error_text(message)
    return text is not None and is_billing_error_message(text)


def is_failover_assistant_error(message: AssistantMessage | None) -> bool:
    text = _assistant_error_text(message)
    return text is not None and is_failover_error_message(text)


# -- exceptions ------------------------------------------------------------------------------

_MAX_CAUSE_DEPTH = 25
_TIMEOUT_EXCEPTION_NAMES = frozenset(
    {
        "TimeoutError",
        "ReadTimeout",
        "ConnectTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "APITimeoutError",
    }
)


def _walk(err: BaseException) -> list[Any]:
    seen: set[int] = set()
    chain: list[Any] = []
    current: Any = err
    while current is not None and id(current) not in seen and len(chain) < _MAX_CAUSE_DEPTH:
        seen.add(id(current))
        chain.append(current)
        nxt = getattr(current, "error", None)
        if not isinstance(nxt, BaseException):
            nxt = getattr(current, "__cause__", None) or getattr(current, "__context__", None)
        current = nxt
    return chain


def _status_of(obj: Any) -> int | None:
    for attr in ("status", "status_code", "statusCode"):
        value = getattr(obj, attr, None)
        if isinstance(value, int) and 100 <= value <= 599:
            return value
    return None


def is_timeout_error(err: BaseException) -> bool:
    """A timeout in any form: TimeoutError, timeout wording, or an abort caused by a timeout."""
    for item in _walk(err):
        if isinstance(item, TimeoutError) or type(item).__name__ in _TIMEOUT_EXCEPTION_NAMES:
            return True
        text = str(item)
        if is_timeout_error_message(text) or "request was aborted" in text.lower():
            return True
    return False


def coerce_to_failover_error(
    err: BaseException,
    *,
    provider: str | None = None,
    model: str | None = None,
    profile_id: str | None = None,
    session_id: str | None = None,
    lane: str | None = None,
) -> FailoverError | None:
    """Turn any exception into a `FailoverError` when its status, code or text says failover.

    The cause chain is walked (bounded and cycle-safe). Session-lock timeouts are local
    coordination errors, never a reason to change model: they return None.
    """
    if isinstance(err, FailoverError):
        return err
    chain = _walk(err)
    if any(type(e).__name__ == "SessionWriteLockError" for e in chain):
        return None
    status: int | None = None
    code: str | None = None
    message = ""
    for item in chain:
        status = status if status is not None else _status_of(item)
        raw_code = getattr(item, "code", None)
        if code is None and isinstance(raw_code, str):
            code = raw_code
        if not message:
            message = str(getattr(item, "message", None) or item or "").strip()
        provider = provider or _str(getattr(item, "provider", None))
    reason = classify_failover_signal(status, message, code, provider)
    if reason is None and is_timeout_error(err):
        reason = "timeout"
    if reason is None:
        return None
    return FailoverError(
        message or type(err).__name__,
        reason=reason,
        provider=provider,
        model=model,
        profile_id=profile_id,
        status=status,
        code=code,
        raw_error=message,
        session_id=session_id,
        lane=lane,
    )


def describe_failover_error(err: BaseException) -> dict[str, Any]:
    """A log-friendly summary of an exception: message, reason, status and code."""
    failover = coerce_to_failover_error(err)
    if failover is None:
        return {"message": str(err) or type(err).__name__}
    return {
        "message": failover.message,
        "reason": failover.reason,
        "status": failover.status,
        "code": failover.code,
    }
