"""Model fallback: when a model fails for a reason another model may not share, try the next.

Candidates are the requested model, the configured fallbacks and the configured primary. A
candidate whose every auth profile sits out a cooldown is skipped without a request (or probed
once, to notice a recovery early). Aborts, context overflow (the cure is compaction, not a
smaller model) and local coordination errors stop the chain at once. When everything failed the
error lists every attempt, so the real cause is not hidden behind "all models failed".
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from clawpi.ai.errors import (
    FailoverError,
    FailoverReason,
    coerce_to_failover_error,
    extract_leading_http_status,
    is_likely_context_overflow_error,
    is_timeout_error,
)
from clawpi.errors import AbortedError
from clawpi.runner.auth_profiles import (
    get_soonest_cooldown_expiry,
    is_profile_in_cooldown,
    now_ms,
    resolve_auth_profile_order,
    resolve_profiles_unavailable_reason,
)
from clawpi.runner.auth_store import (
    AuthProfileStore,
    auth_profiles_path,
    load_auth_profile_store,
    normalize_provider_id,
)
from clawpi.runner.run_queue import CommandLaneError

T = TypeVar("T")

logger = logging.getLogger("clawpi.runner.fallback")

DEFAULT_PROVIDER = "anthropic"
MIN_PROBE_INTERVAL_MS = 30_000
PROBE_MARGIN_MS = 2 * 60_000
PROBE_STATE_TTL_MS = 24 * 60 * 60_000
MAX_PROBE_KEYS = 256

_PROBE_REASONS = frozenset({"rate_limit", "overloaded", "billing", "unknown"})
_TRANSIENT_PROBE_REASONS = frozenset({"rate_limit", "overloaded", "unknown"})
_PROBE_SLOT_KEPT_ON = frozenset(
    {"model_not_found", "format", "auth", "auth_permanent", "session_expired"}
)

_cooldown_probe: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "clawpi_cooldown_probe", default=False
)


def is_cooldown_probe_allowed() -> bool:
    """Inside `run` of `run_with_model_fallback`: True when this call is a probe of a provider
    whose profiles all cool down, so the runner may use a cooling profile once."""
    return _cooldown_probe.get()


# -- candidates ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelCandidate:
    provider: str
    model: str

    @property
    def key(self) -> str:
        return f"{self.provider}/{self.model}"


def _get(config: Mapping[str, Any] | None, *path: str) -> Any:
    node: Any = config
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def build_model_alias_index(config: Mapping[str, Any] | None) -> dict[str, ModelCandidate]:
    """`agents.defaults.models` entries with an `alias`: lower-cased alias -> model."""
    models = _get(config, "agents", "defaults", "models")
    index: dict[str, ModelCandidate] = {}
    if not isinstance(models, Mapping):
        return index
    for ref, entry in models.items():
        alias = entry.get("alias") if isinstance(entry, Mapping) else None
        if not isinstance(alias, str) or not alias.strip():
            continue
        parsed = parse_model_ref(str(ref), DEFAULT_PROVIDER)
        if parsed is not None:
            index[alias.strip().lower()] = parsed
    return index


def parse_model_ref(
    raw: str,
    default_provider: str,
    aliases: Mapping[str, ModelCandidate] | None = None,
) -> ModelCandidate | None:
    """`provider/model`, an alias, or a bare model id of `default_provider`; None if blank."""
    text = raw.strip()
    if not text:
        return None
    if aliases and text.lower() in aliases:
        return aliases[text.lower()]
    provider, sep, model = text.partition("/")
    if not sep:
        return ModelCandidate(normalize_provider_id(default_provider), text)
    if not provider.strip() or not model.strip():
        return None
    return ModelCandidate(normalize_provider_id(provider), model.strip())


def _configured_model(config: Mapping[str, Any] | None) -> tuple[str | None, list[str]]:
    raw = _get(config, "agents", "defaults", "model")
    if isinstance(raw, str):
        return raw, []
    if not isinstance(raw, Mapping):
        return None, []
    primary = raw.get("primary")
    fallbacks = raw.get("fallbacks")
    return (
        primary if isinstance(primary, str) else None,
        [f for f in fallbacks if isinstance(f, str)] if isinstance(fallbacks, list) else [],
    )


def resolve_fallback_candidates(
    config: Mapping[str, Any] | None,
    provider: str,
    model: str,
    fallbacks_override: Sequence[str] | None = None,
) -> list[ModelCandidate]:
    """Requested model, fallbacks, configured primary; deduplicated, in that order.

    Configured fallbacks belong to the configured primary: for a requested model of another
    provider they apply only when that model is itself one of them. An explicit
    `fallbacks_override` (even empty) replaces them and drops the primary.
    """
    aliases = build_model_alias_index(config)
    default_provider = provider.strip() or DEFAULT_PROVIDER
    requested = parse_model_ref(f"{default_provider}/{model.strip()}", default_provider)
    if requested is None:
        raise ValueError(f"No model given for provider {provider!r}")
    primary_raw, fallback_raws = _configured_model(config)
    primary = parse_model_ref(primary_raw, default_provider, aliases) if primary_raw else None

    candidates: list[ModelCandidate] = [requested]
    if fallbacks_override is not None:
        fallbacks = [parse_model_ref(f, default_provider, aliases) for f in fallbacks_override]
    else:
        fallbacks = [parse_model_ref(f, default_provider, aliases) for f in fallback_raws]
        foreign = primary is not None and primary.provider != requested.provider
        if foreign and requested not in fallbacks:
            fallbacks = []
    candidates.extend(f for f in fallbacks if f is not None)
    if fallbacks_override is None and primary is not None:
        candidates.append(primary)

    seen: set[str] = set()
    unique: list[ModelCandidate] = []
    for candidate in candidates:
        if candidate.key not in seen:
            seen.add(candidate.key)
            unique.append(candidate)
    return unique


# -- probe throttle --------------------------------------------------------------------------


class ProbeThrottle:
    """At most one cooldown probe per provider (and agent dir) every 30 s, process-wide."""

    def __init__(self) -> None:
        self._last: dict[str, int] = {}

    def _prune(self, now: int) -> None:
        for key in [k for k, t in self._last.items() if now - t > PROBE_STATE_TTL_MS]:
            del self._last[key]

    def is_open(self, key: str, now: int) -> bool:
        self._prune(now)
        last = self._last.get(key)
        return last is None or now - last >= MIN_PROBE_INTERVAL_MS

    def mark(self, key: str, now: int) -> None:
        self._prune(now)
        self._last[key] = now
        while len(self._last) > MAX_PROBE_KEYS:
            oldest = min(self._last, key=self._last.__getitem__)
            del self._last[oldest]


_default_throttle = ProbeThrottle()


# -- attempts and errors ---------------------------------------------------------------------


@dataclass(frozen=True)
class FallbackAttempt:
    """One candidate that did not produce a result: tried and failed, or skipped."""

    provider: str
    model: str
    error: str
    reason: FailoverReason | None = None
    status: int | None = None
    code: str | None = None
    skipped: bool = False

    def describe(self) -> str:
        suffix = f" ({self.reason})" if self.reason else ""
        return f"{self.provider}/{self.model}: {self.error}{suffix}"


@dataclass
class ModelFallbackResult(Generic[T]):
    result: T
    provider: str
    model: str
    attempts: list[FallbackAttempt] = field(default_factory=list)


class AllModelsFailedError(FailoverError):
    """Every candidate failed or was skipped; `attempts` says how each one went."""

    def __init__(self, attempts: Sequence[FallbackAttempt]) -> None:
        summary = " | ".join(a.describe() for a in attempts) or "no candidates"
        reasons = {a.reason for a in attempts}
        reason: FailoverReason = "unknown"
        if len(reasons) == 1:
            only = next(iter(reasons))
            reason = only if only is not None else "unknown"
        last = attempts[-1] if attempts else None
        super().__init__(
            f"All models failed ({len(attempts)}): {summary}",
            reason=reason,
            provider=last.provider if last else None,
            model=last.model if last else None,
        )
        self.attempts = list(attempts)


FallbackErrorCallback = Callable[[ModelCandidate, BaseException, int, int], Awaitable[None] | None]


def _chain_names(err: BaseException) -> set[str]:
    names: set[str] = set()
    current: BaseException | None = err
    depth = 0
    while current is not None and depth < 25:
        names.add(type(current).__name__)
        current = current.__cause__ or current.__context__
        depth += 1
    return names


def _stops_the_chain(err: BaseException) -> bool:
    """User aborts, queue/lock coordination errors and context overflow never fall back."""
    if isinstance(err, CommandLaneError):
        return True
    names = _chain_names(err)
    if "SessionWriteLockError" in names:
        return True
    if (isinstance(err, AbortedError) or "AbortError" in names) and not is_timeout_error(err):
        return True
    return is_likely_context_overflow_error(str(err))


def _failed_attempt(
    candidate: ModelCandidate, err: BaseException, failover: FailoverError | None
) -> FallbackAttempt:
    message = (failover.message if failover is not None else str(err)) or type(err).__name__
    lead = extract_leading_http_status(message)
    status = lead[0] if lead is not None else (failover.status if failover is not None else None)
    return FallbackAttempt(
        candidate.provider,
        candidate.model,
        message,
        failover.reason if failover is not None else "unknown",
        status,
        failover.code if failover is not None else None,
    )


# -- the loop --------------------------------------------------------------------------------


@dataclass
class _Decision:
    attempt: bool
    reason: FailoverReason
    error: str = ""
    mark_probe: bool = False


def _cooldown_decision(
    candidate: ModelCandidate,
    *,
    is_primary: bool,
    requested_model: bool,
    has_fallbacks: bool,
    prefer_cross_provider: bool,
    store: AuthProfileStore,
    profile_ids: list[str],
    throttle: ProbeThrottle,
    throttle_key: str,
    now: int,
) -> _Decision:
    reason = (
        resolve_profiles_unavailable_reason(store, profile_ids, model=candidate.model, now=now)
        or "unknown"
    )
    should_probe = False
    if is_primary and not prefer_cross_provider and throttle.is_open(throttle_key, now):
        soonest = get_soonest_cooldown_expiry(store, profile_ids, candidate.model)
        should_probe = not has_fallbacks or soonest is None or now >= soonest - PROBE_MARGIN_MS
    if reason in ("auth", "auth_permanent"):
        return _Decision(
            False, reason, f"Provider {candidate.provider} has {reason} issue (skipping all models)"
        )
    if reason == "billing":
        single = is_primary and not has_fallbacks and throttle.is_open(throttle_key, now)
        if is_primary and (should_probe or single):
            return _Decision(True, reason, mark_probe=True)
        return _Decision(
            False, reason, f"Provider {candidate.provider} has billing issue (skipping all models)"
        )
    if (is_primary and (not requested_model or should_probe)) or (
        not is_primary and reason in _TRANSIENT_PROBE_REASONS
    ):
        return _Decision(True, reason, mark_probe=is_primary and should_probe)
    return _Decision(
        False,
        reason,
        f"Provider {candidate.provider} is in cooldown (all profiles unavailable)",
    )


def _profile_state(
    config: Mapping[str, Any] | None, store: AuthProfileStore, candidate: ModelCandidate, now: int
) -> tuple[list[str], bool]:
    """The provider's profiles and whether any of them can serve the candidate now."""
    ids = resolve_auth_profile_order(config, store, candidate.provider, now=now)
    available = any(not is_profile_in_cooldown(store, pid, candidate.model, now=now) for pid in ids)
    return ids, available or not ids


async def run_with_model_fallback(
    config: Mapping[str, Any] | None,
    provider: str,
    model: str,
    run: Callable[[str, str], Awaitable[T]],
    *,
    agent_dir: Path | str | None = None,
    auth_store: AuthProfileStore | None = None,
    fallbacks_override: Sequence[str] | None = None,
    on_error: FallbackErrorCallback | None = None,
    clock: Callable[[], int] = now_ms,
    probe_throttle: ProbeThrottle | None = None,
) -> ModelFallbackResult[T]:
    """Call `run(provider, model)` for each candidate until one returns.

    Auth-profile cooldowns come from `auth_store` or `<agent_dir>/auth-profiles.json` (re-read
    before each candidate, so failures the previous attempt recorded count). Raises the single
    error when only one candidate was involved, else `AllModelsFailedError`.
    """
    candidates = resolve_fallback_candidates(config, provider, model, fallbacks_override)
    requested = candidates[0]
    throttle = probe_throttle or _default_throttle
    store_path = auth_profiles_path(agent_dir) if agent_dir is not None else None

    def current_store() -> AuthProfileStore | None:
        if auth_store is not None:
            return auth_store
        if store_path is not None and store_path.exists() and agent_dir is not None:
            return load_auth_profile_store(agent_dir)
        return None

    has_fallbacks = len(candidates) > 1
    prefer_cross_provider = False
    store = current_store()
    if store is not None and has_fallbacks:
        ids, available = _profile_state(config, store, requested, clock())
        if not available:
            reason = resolve_profiles_unavailable_reason(
                store, ids, model=requested.model, now=clock()
            )
            cross = [c for c in candidates[1:] if c.provider != requested.provider]
            runnable = [c for c in cross if _profile_state(config, store, c, clock())[1]]
            if reason in _TRANSIENT_PROBE_REASONS and runnable:
                prefer_cross_provider = True
                same = [c for c in candidates[1:] if c.provider == requested.provider]
                candidates = [requested, *cross, *same]

    attempts: list[FallbackAttempt] = []
    last_error: BaseException | None = None
    probed_providers: set[str] = set()
    total = len(candidates)
    for index, candidate in enumerate(candidates):
        is_primary = index == 0
        probe = False
        transient_probe_provider: str | None = None
        store = current_store()
        if store is not None:
            now = clock()
            ids, available = _profile_state(config, store, candidate, now)
            if not available:
                throttle_key = f"{agent_dir or ''}::{candidate.provider}"
                decision = _cooldown_decision(
                    candidate,
                    is_primary=is_primary,
                    requested_model=candidate == requested,
                    has_fallbacks=has_fallbacks,
                    prefer_cross_provider=prefer_cross_provider,
                    store=store,
                    profile_ids=ids,
                    throttle=throttle,
                    throttle_key=throttle_key,
                    now=now,
                )
                if not decision.attempt:
                    attempts.append(
                        FallbackAttempt(
                            candidate.provider,
                            candidate.model,
                            decision.error,
                            decision.reason,
                            skipped=True,
                        )
                    )
                    logger.info("model fallback: skip %s: %s", candidate.key, decision.error)
                    continue
                if decision.mark_probe:
                    throttle.mark(throttle_key, now)
                if decision.reason in _PROBE_REASONS:
                    transient = decision.reason in _TRANSIENT_PROBE_REASONS
                    if transient and candidate.provider in probed_providers:
                        error = (
                            f"Provider {candidate.provider} is in cooldown "
                            "(probe already attempted this run)"
                        )
                        attempts.append(
                            FallbackAttempt(
                                candidate.provider,
                                candidate.model,
                                error,
                                decision.reason,
                                skipped=True,
                            )
                        )
                        continue
                    probe = True
                    if transient:
                        transient_probe_provider = candidate.provider
                logger.info(
                    "model fallback: probing %s during cooldown (%s)",
                    candidate.key,
                    decision.reason,
                )

        token = _cooldown_probe.set(probe)
        try:
            result = await run(candidate.provider, candidate.model)
        except Exception as err:
            failover = coerce_to_failover_error(
                err, provider=candidate.provider, model=candidate.model
            )
            if transient_probe_provider is not None and (
                failover is None or failover.reason not in _PROBE_SLOT_KEPT_ON
            ):
                probed_providers.add(transient_probe_provider)
            if _stops_the_chain(err):
                raise
            if failover is None and index == total - 1:
                raise
            last_error = failover if failover is not None else err
            attempts.append(_failed_attempt(candidate, err, failover))
            logger.info(
                "model fallback: %s failed (%s)",
                candidate.key,
                failover.reason if failover is not None else type(err).__name__,
            )
            if on_error is not None:
                maybe = on_error(candidate, last_error, index + 1, total)
                if maybe is not None:
                    await maybe
            continue
        finally:
            _cooldown_probe.reset(token)

        if index > 0:
            not_found = next((a for a in attempts if a.reason == "model_not_found"), None)
            if not_found is not None:
                logger.warning(
                    'Model "%s/%s" not found. Fell back to "%s".',
                    not_found.provider,
                    not_found.model,
                    candidate.key,
                )
        return ModelFallbackResult(result, candidate.provider, candidate.model, attempts)

    if len(attempts) <= 1 and last_error is not None:
        raise last_error
    raise AllModelsFailedError(attempts) from last_error
