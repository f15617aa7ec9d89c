"""Auth profiles: which API key to try first, and how long a failing one sits out.

The rules are OpenClaw's (docs "auth profiles"), with one deliberate scoping decision: a rate
limit or an overload is a property of (key, model), so it only cools that model down on that
key; an auth or billing failure is a property of the key, so it blocks the key for every model.
Timeouts are transport trouble and never cool a key down.

Times are epoch milliseconds (the store's format); every function takes `now` so tests can
drive the clock.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from clawpi.ai.errors import FailoverReason
from clawpi.ai.mapping import is_mapping
from clawpi.runner.auth_store import (
    AuthProfileStore,
    normalize_provider_id,
    update_auth_profile_store,
)
from clawpi.runner.config_fields import finite_int
from clawpi.sdk.config_values import resolve_config_value

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
COOLDOWN_BASE_MS = MINUTE_MS
COOLDOWN_MAX_MS = HOUR_MS
COOLDOWN_FACTOR = 5
BILLING_BACKOFF_HOURS = 5.0
BILLING_MAX_HOURS = 24.0
FAILURE_WINDOW_HOURS = 24.0
_BILLING_FLOOR_MS = MINUTE_MS

PROFILE_SCOPED_REASONS: frozenset[str] = frozenset({"auth", "auth_permanent", "billing"})
"""Failures that belong to the key itself: they block the profile for every model."""
DISABLING_REASONS: frozenset[str] = frozenset({"billing", "auth_permanent"})
"""Failures that need a human (top up, new key): long "disabled" windows instead of cooldowns."""
NO_COOLDOWN_REASONS: frozenset[str] = frozenset({"timeout"})

_TYPE_RANK = {"oauth": 0, "token": 1, "api_key": 2}
_REASON_PRIORITY: tuple[str, ...] = (
    "auth_permanent",
    "auth",
    "billing",
    "format",
    "model_not_found",
    "overloaded",
    "timeout",
    "rate_limit",
    "unknown",
)

ProfileSource = Literal["auto", "user"]


def now_ms() -> int:
    return int(time.time() * 1000)


def _get(config: Mapping[str, Any] | None, *path: str) -> Any:
    node: Any = config
    for key in path:
        if not is_mapping(node):
            return None
        node = node.get(key)
    return node


# -- cooldown schedule -----------------------------------------------------------------------


@dataclass(frozen=True)
class AuthCooldownSettings:
    """`auth.cooldowns` from the config, in milliseconds."""

    billing_backoff_ms: int = int(BILLING_BACKOFF_HOURS * HOUR_MS)
    billing_backoff_ms_by_provider: Mapping[str, int] = field(default_factory=dict)
    billing_max_ms: int = int(BILLING_MAX_HOURS * HOUR_MS)
    failure_window_ms: int = int(FAILURE_WINDOW_HOURS * HOUR_MS)

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> AuthCooldownSettings:
        raw = _get(config, "auth", "cooldowns")
        if not isinstance(raw, Mapping):
            return cls()

        def hours(key: str, default: float) -> int:
            value = raw.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return int(value * HOUR_MS)
            return int(default * HOUR_MS)

        by_provider: dict[str, int] = {}
        per = raw.get("billingBackoffHoursByProvider")
        if isinstance(per, Mapping):
            for provider, value in per.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                    by_provider[normalize_provider_id(str(provider))] = int(value * HOUR_MS)
        return cls(
            billing_backoff_ms=hours("billingBackoffHours", BILLING_BACKOFF_HOURS),
            billing_backoff_ms_by_provider=by_provider,
            billing_max_ms=hours("billingMaxHours", BILLING_MAX_HOURS),
            failure_window_ms=hours("failureWindowHours", FAILURE_WINDOW_HOURS),
        )

    def billing_base_ms(self, provider: str | None) -> int:
        base = self.billing_backoff_ms
        if provider:
            base = self.billing_backoff_ms_by_provider.get(normalize_provider_id(provider), base)
        return max(_BILLING_FLOOR_MS, base)


def calculate_auth_profile_cooldown_ms(error_count: int) -> int:
    """1 min, 5 min, 25 min, then 1 h for every further failure."""
    n = max(1, error_count)
    return int(min(COOLDOWN_MAX_MS, COOLDOWN_BASE_MS * COOLDOWN_FACTOR ** min(n - 1, 3)))


def calculate_billing_disable_ms(count: int, base_ms: int, max_ms: int) -> int:
    """`base` doubling per billing failure (5 h, 10 h, 20 h, ...), capped at `max`."""
    n = max(1, count)
    return int(min(max_ms, base_ms * 2 ** min(n - 1, 10)))


# -- reading cooldown state ------------------------------------------------------------------


def _active(until: int | None, now: int) -> bool:
    return until is not None and until > 0 and now < until


def _model_entry(stats: Mapping[str, Any], model: str | None) -> dict[str, Any]:
    if not model:
        return {}
    cooldowns = stats.get("modelCooldowns")
    if not isinstance(cooldowns, dict):
        return {}
    entry = cooldowns.get(model)
    return entry if isinstance(entry, dict) else {}


def profile_unusable_until(
    store: AuthProfileStore, profile_id: str, model: str | None = None
) -> int | None:
    """The latest of the profile's cooldown, its disabled window and (for `model`) the model's
    own cooldown; None when none was ever set."""
    stats = store.usage(profile_id)
    values = [
        v
        for v in (
            finite_int(stats.get("cooldownUntil")),
            finite_int(stats.get("disabledUntil")),
            finite_int(_model_entry(stats, model).get("cooldownUntil")),
        )
        if v is not None and v > 0
    ]
    return max(values) if values else None


def is_profile_in_cooldown(
    store: AuthProfileStore,
    profile_id: str,
    model: str | None = None,
    *,
    now: int | None = None,
) -> bool:
    """True while the profile cannot be used for `model` (for any model when None given)."""
    current = now_ms() if now is None else now
    return _active(profile_unusable_until(store, profile_id, model), current)


def clear_expired_cooldowns(store: AuthProfileStore, now: int | None = None) -> bool:
    """Drop expired windows in memory; once nothing is active the error counters restart,
    so an old streak does not escalate the next cooldown forever. True when anything changed."""
    current = now_ms() if now is None else now
    stats_all = store.data.get("usageStats")
    if not isinstance(stats_all, dict):
        return False
    changed = False
    for stats in stats_all.values():
        if not isinstance(stats, dict):
            continue
        had_window = False
        cooldown = finite_int(stats.get("cooldownUntil"))
        if cooldown is not None:
            had_window = True
            if not _active(cooldown, current):
                del stats["cooldownUntil"]
                stats.pop("cooldownReason", None)
                changed = True
        disabled = finite_int(stats.get("disabledUntil"))
        if disabled is not None:
            had_window = True
            if not _active(disabled, current):
                stats.pop("disabledUntil", None)
                stats.pop("disabledReason", None)
                changed = True
        models = stats.get("modelCooldowns")
        if isinstance(models, dict):
            for key in list(models):
                entry = models[key]
                if not isinstance(entry, dict):
                    continue
                had_window = True
                if not _active(finite_int(entry.get("cooldownUntil")), current):
                    del models[key]
                    changed = True
            if not models:
                del stats["modelCooldowns"]
        still_active = any(
            _active(finite_int(stats.get(k)), current) for k in ("cooldownUntil", "disabledUntil")
        ) or bool(stats.get("modelCooldowns"))
        if (
            had_window
            and not still_active
            and (stats.get("errorCount") or stats.get("failureCounts"))
        ):
            stats["errorCount"] = 0
            stats.pop("failureCounts", None)
            changed = True
    return changed


def get_soonest_cooldown_expiry(
    store: AuthProfileStore, profile_ids: Iterable[str], model: str | None = None
) -> int | None:
    """When the first of these profiles becomes usable again (may lie in the past)."""
    values = [
        until
        for pid in profile_ids
        if (until := profile_unusable_until(store, pid, model)) is not None
    ]
    return min(values) if values else None


def resolve_profiles_unavailable_reason(
    store: AuthProfileStore,
    profile_ids: Iterable[str],
    *,
    model: str | None = None,
    now: int | None = None,
) -> FailoverReason | None:
    """The most telling reason why these profiles are all sitting out (None if none is).

    A disabled window counts far more than cooldown counters; ties go to the more permanent
    reason."""
    current = now_ms() if now is None else now
    scores: dict[str, int] = {}
    for pid in profile_ids:
        stats = store.usage(pid)
        disabled_reason = stats.get("disabledReason")
        if _active(finite_int(stats.get("disabledUntil")), current) and isinstance(
            disabled_reason, str
        ):
            scores[disabled_reason] = scores.get(disabled_reason, 0) + 1000
        if _active(finite_int(stats.get("cooldownUntil")), current):
            counts = stats.get("failureCounts")
            counts = counts if isinstance(counts, dict) else {}
            own = stats.get("cooldownReason")
            added = False
            if isinstance(own, str):
                scores[own] = scores.get(own, 0) + max(1, finite_int(counts.get(own)) or 1)
                added = True
            elif counts:
                for reason, count in counts.items():
                    n = finite_int(count)
                    if n and n > 0:
                        scores[reason] = scores.get(reason, 0) + n
                        added = True
            if not added:
                scores["rate_limit"] = scores.get("rate_limit", 0) + 1
        entry = _model_entry(stats, model)
        if _active(finite_int(entry.get("cooldownUntil")), current):
            reason = entry.get("reason")
            key = reason if isinstance(reason, str) else "rate_limit"
            scores[key] = scores.get(key, 0) + max(1, finite_int(entry.get("errorCount")) or 1)
    if not scores:
        return None

    def rank(item: tuple[str, int]) -> tuple[int, int]:
        reason, score = item
        prio = (
            _REASON_PRIORITY.index(reason) if reason in _REASON_PRIORITY else len(_REASON_PRIORITY)
        )
        return (-score, prio)

    best = min(scores.items(), key=rank)[0]
    return best if best in _REASON_PRIORITY else "unknown"  # type: ignore[return-value]


# -- order resolution ------------------------------------------------------------------------


def _credential_usable(cred: Mapping[str, Any], mode: str | None, now: int) -> bool:
    kind = cred.get("type")
    if mode and not (mode == kind or (mode == "oauth" and kind == "token")):
        return False
    if kind == "api_key":
        key = cred.get("key")
        return isinstance(key, str) and bool(key.strip())
    if kind == "token":
        token = cred.get("token")
        expires = finite_int(cred.get("expires"))
        if not (isinstance(token, str) and token.strip()):
            return False
        return expires is None or expires <= 0 or now < expires
    if kind == "oauth":
        return any(isinstance(cred.get(k), str) and cred[k].strip() for k in ("access", "refresh"))
    return False


def _config_profiles(config: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    raw = _get(config, "auth", "profiles")
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, Mapping)}


def _config_order(config: Mapping[str, Any] | None, provider: str) -> list[str] | None:
    raw = _get(config, "auth", "order")
    if not isinstance(raw, Mapping):
        return None
    for key, ids in raw.items():
        if normalize_provider_id(str(key)) == provider and isinstance(ids, list):
            return [i for i in ids if isinstance(i, str)]
    return None


def list_profiles_for_provider(store: AuthProfileStore, provider: str) -> list[str]:
    wanted = normalize_provider_id(provider)
    return [
        pid
        for pid, cred in store.profiles.items()
        if normalize_provider_id(str(cred.get("provider", ""))) == wanted
    ]


def resolve_auth_profile_order(
    config: Mapping[str, Any] | None,
    store: AuthProfileStore,
    provider: str,
    *,
    preferred_profile: str | None = None,
    model: str | None = None,
    now: int | None = None,
) -> list[str]:
    """The profiles to try for `provider`, best first.

    Base list: the store's `order` (set at runtime, e.g. by the CLI), else config
    `auth.order[provider]`, else config `auth.profiles` of that provider, else every stored
    profile of the provider. Unusable credentials are dropped. With an explicit order its
    sequence is kept; otherwise round robin (oauth, token, api_key; least recently used first).
    Profiles cooling down for `model` go last, soonest expiry first. `preferred_profile` (a
    session pin) goes first when it is in the list.
    """
    current = now_ms() if now is None else now
    wanted = normalize_provider_id(provider)
    clear_expired_cooldowns(store, current)
    config_profiles = _config_profiles(config)

    explicit = store.store_order(wanted) or _config_order(config, wanted)
    if explicit:
        base = explicit
    else:
        from_config = [
            pid
            for pid, meta in config_profiles.items()
            if normalize_provider_id(str(meta.get("provider", ""))) == wanted
        ]
        base = [pid for pid in from_config if store.profile(pid) is not None]
        if not base:
            base = list_profiles_for_provider(store, wanted)

    seen: set[str] = set()
    eligible: list[str] = []
    for pid in base:
        if pid in seen:
            continue
        cred = store.profile(pid)
        if cred is None or normalize_provider_id(str(cred.get("provider", ""))) != wanted:
            continue
        mode = config_profiles.get(pid, {}).get("mode")
        if not _credential_usable(cred, mode if isinstance(mode, str) else None, current):
            continue
        seen.add(pid)
        eligible.append(pid)

    available = [p for p in eligible if not is_profile_in_cooldown(store, p, model, now=current)]
    cooling = [p for p in eligible if p not in available]
    cooling.sort(key=lambda p: profile_unusable_until(store, p, model) or 0)
    if not explicit:
        available.sort(
            key=lambda p: (
                _TYPE_RANK.get(str((store.profile(p) or {}).get("type")), 3),
                finite_int(store.usage(p).get("lastUsed")) or 0,
            )
        )
    order = available + cooling
    if preferred_profile and preferred_profile in order:
        order.remove(preferred_profile)
        order.insert(0, preferred_profile)
    return order


def resolve_auth_profile_candidates(
    config: Mapping[str, Any] | None,
    store: AuthProfileStore,
    provider: str,
    *,
    profile_id: str | None = None,
    profile_source: ProfileSource = "auto",
    model: str | None = None,
    now: int | None = None,
) -> list[str]:
    """`resolve_auth_profile_order` plus session pins.

    A profile the user chose for this provider is the only candidate and is used even while
    cooling down (failures then move to the next model, not the next key); a user choice for
    another provider is ignored. An automatic pin (session stickiness) goes first only while
    it is usable for `model`: a cooling pin yields to the next profile.
    """
    current = now_ms() if now is None else now
    if profile_id and profile_source == "user":
        cred = store.profile(profile_id)
        if cred is not None and normalize_provider_id(
            str(cred.get("provider", ""))
        ) == normalize_provider_id(provider):
            return [profile_id]
        profile_id = None
    if profile_id and is_profile_in_cooldown(store, profile_id, model, now=current):
        profile_id = None
    return resolve_auth_profile_order(
        config, store, provider, preferred_profile=profile_id, model=model, now=current
    )


# -- marking ---------------------------------------------------------------------------------


def mark_auth_profile_used(
    store: AuthProfileStore,
    profile_id: str,
    *,
    model: str | None = None,
    now: int | None = None,
) -> None:
    """A request on this profile succeeded: stamp `lastUsed` (round robin) and clear its
    failures. With `model`, other models' cooldowns on this key stay: they are separate."""
    current = now_ms() if now is None else now

    def change(fresh: AuthProfileStore) -> None:
        if fresh.profile(profile_id) is None:
            return
        stats = fresh.usage_for_update(profile_id)
        stats["lastUsed"] = current
        stats["errorCount"] = 0
        for key in (
            "cooldownUntil",
            "cooldownReason",
            "disabledUntil",
            "disabledReason",
            "failureCounts",
        ):
            stats.pop(key, None)
        models = stats.get("modelCooldowns")
        if model is None or not isinstance(models, dict):
            stats.pop("modelCooldowns", None)
        else:
            models.pop(model, None)
            if not models:
                del stats["modelCooldowns"]

    update_auth_profile_store(store, change)


def mark_auth_profile_good(store: AuthProfileStore, provider: str, profile_id: str) -> None:
    """Remember the last profile that worked for the provider (informational: round robin
    deliberately does not prefer it)."""

    def change(fresh: AuthProfileStore) -> None:
        if fresh.profile(profile_id) is not None:
            fresh.set_last_good(provider, profile_id)

    update_auth_profile_store(store, change)


def mark_auth_profile_failure(
    store: AuthProfileStore,
    profile_id: str,
    reason: FailoverReason | None,
    *,
    model: str | None = None,
    config: Mapping[str, Any] | None = None,
    retry_after_ms: int | None = None,
    now: int | None = None,
) -> bool:
    """Record a failure and start the matching cooldown; False when nothing was recorded.

    Timeouts (and unclassified failures) are not the key's fault and record nothing.
    Billing and revoked keys get the long disabled window; other auth failures cool the whole
    profile; anything else cools only (profile, `model`). A provider's Retry-After replaces the
    scheduled cooldown (capped at the schedule's maximum). An active window is never shortened.
    """
    if reason is None or reason in NO_COOLDOWN_REASONS:
        return False
    current = now_ms() if now is None else now
    settings = AuthCooldownSettings.from_config(config)
    recorded = False

    def change(fresh: AuthProfileStore) -> None:
        nonlocal recorded
        cred = fresh.profile(profile_id)
        if cred is None:
            return
        recorded = True
        stats = fresh.usage_for_update(profile_id)
        last = finite_int(stats.get("lastFailureAt"))
        if last is not None and current - last > settings.failure_window_ms:
            stats["errorCount"] = 0
            stats.pop("failureCounts", None)
        stats["errorCount"] = (finite_int(stats.get("errorCount")) or 0) + 1
        counts = stats.get("failureCounts")
        if not isinstance(counts, dict):
            counts = stats["failureCounts"] = {}
        counts[reason] = (finite_int(counts.get(reason)) or 0) + 1
        stats["lastFailureAt"] = current

        if reason in DISABLING_REASONS:
            base = settings.billing_base_ms(str(cred.get("provider", "")))
            span = calculate_billing_disable_ms(counts[reason], base, settings.billing_max_ms)
            existing = finite_int(stats.get("disabledUntil"))
            until = current + span
            if _active(existing, current) and existing is not None:
                until = max(until, existing)
            stats["disabledUntil"] = until
            stats["disabledReason"] = reason
            return

        if reason in PROFILE_SCOPED_REASONS or not model:
            span = _cooldown_span(stats["errorCount"], retry_after_ms)
            _extend(stats, "cooldownUntil", current + span, current)
            stats["cooldownReason"] = reason
            return

        models = stats.get("modelCooldowns")
        if not isinstance(models, dict):
            models = stats["modelCooldowns"] = {}
        entry = models.get(model)
        if not isinstance(entry, dict):
            entry = models[model] = {}
        entry_last = finite_int(entry.get("lastFailureAt"))
        if entry_last is not None and current - entry_last > settings.failure_window_ms:
            entry["errorCount"] = 0
        entry["errorCount"] = (finite_int(entry.get("errorCount")) or 0) + 1
        entry["lastFailureAt"] = current
        entry["reason"] = reason
        _extend(
            entry,
            "cooldownUntil",
            current + _cooldown_span(entry["errorCount"], retry_after_ms),
            current,
        )

    update_auth_profile_store(store, change)
    return recorded


def _cooldown_span(error_count: int, retry_after_ms: int | None) -> int:
    if retry_after_ms is not None and retry_after_ms > 0:
        return min(COOLDOWN_MAX_MS, int(retry_after_ms))
    return calculate_auth_profile_cooldown_ms(error_count)


def _extend(target: dict[str, Any], key: str, until: int, now: int) -> None:
    existing = finite_int(target.get(key))
    if existing is not None and _active(existing, now):
        until = max(until, existing)
    target[key] = until


# -- credentials -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedProfileKey:
    """The secret to send for a profile. Never log `api_key`."""

    api_key: str
    profile_id: str
    provider: str
    type: str
    email: str | None = None


def resolve_api_key_for_profile(
    store: AuthProfileStore,
    profile_id: str,
    *,
    now: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> ResolvedProfileKey | None:
    """The usable secret of a profile, None when it has none (blank, expired, unknown id).

    `key` and `token` values go through the config-value rules: `!command`, the name of an
    environment variable, or the literal. OAuth profiles yield their access token while it is
    valid (refreshing is the provider plugin's business).
    """
    current = now_ms() if now is None else now
    cred = store.profile(profile_id)
    if cred is None:
        return None
    kind = str(cred.get("type", ""))
    provider = normalize_provider_id(str(cred.get("provider", "")))
    email = cred.get("email") if isinstance(cred.get("email"), str) else None
    secret: Any
    if kind == "api_key":
        secret = cred.get("key")
    elif kind == "token":
        secret = cred.get("token")
    elif kind == "oauth":
        secret = cred.get("access")
    else:
        return None
    if not isinstance(secret, str) or not secret.strip():
        return None
    expires = finite_int(cred.get("expires"))
    if kind in ("token", "oauth") and expires is not None and expires > 0 and current >= expires:
        return None
    value = resolve_config_value(secret.strip(), environ) if kind != "oauth" else secret.strip()
    if not value:
        return None
    return ResolvedProfileKey(value, profile_id, provider, kind, email)
