"""Auth profiles: the store file, order resolution, cooldown schedule and scope, credentials."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import orjson
import pytest

from clawpi.errors import ConfigError
from clawpi.runner.auth_profiles import (
    HOUR_MS,
    MINUTE_MS,
    calculate_auth_profile_cooldown_ms,
    calculate_billing_disable_ms,
    clear_expired_cooldowns,
    get_soonest_cooldown_expiry,
    is_profile_in_cooldown,
    mark_auth_profile_failure,
    mark_auth_profile_good,
    mark_auth_profile_used,
    resolve_api_key_for_profile,
    resolve_auth_profile_candidates,
    resolve_auth_profile_order,
    resolve_profiles_unavailable_reason,
)
from clawpi.runner.auth_store import (
    AuthProfileStore,
    load_auth_profile_store,
    normalize_provider_id,
    update_auth_profile_store,
)

T0 = 1_800_000_000_000


def write_store(agent_dir: Path, data: dict[str, Any]) -> Path:
    agent_dir.mkdir(parents=True, exist_ok=True)
    path = agent_dir / "auth-profiles.json"
    path.write_bytes(orjson.dumps(data))
    return path


def read_store(agent_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((agent_dir / "auth-profiles.json").read_bytes())
    return data


def two_keys(**extra: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "profiles": {
            "openai:p1": {"type": "api_key", "provider": "openai", "key": "sk-one"},
            "openai:p2": {"type": "api_key", "provider": "openai", "key": "sk-two"},
        },
        **extra,
    }


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    return tmp_path / "agent"


# -- cooldown math ---------------------------------------------------------------------------


def test_cooldown_schedule_is_one_minute_times_five_to_the_n_capped_at_an_hour() -> None:
    assert [calculate_auth_profile_cooldown_ms(n) for n in range(1, 7)] == [
        1 * MINUTE_MS,
        5 * MINUTE_MS,
        25 * MINUTE_MS,
        HOUR_MS,
        HOUR_MS,
        HOUR_MS,
    ]


def test_billing_disable_doubles_from_five_hours_capped_at_a_day() -> None:
    base, cap = 5 * HOUR_MS, 24 * HOUR_MS
    assert [calculate_billing_disable_ms(n, base, cap) for n in range(1, 5)] == [
        5 * HOUR_MS,
        10 * HOUR_MS,
        20 * HOUR_MS,
        24 * HOUR_MS,
    ]


def test_repeated_rate_limits_escalate_the_model_cooldown(agent_dir: Path) -> None:
    write_store(agent_dir, two_keys())
    store = load_auth_profile_store(agent_dir)
    now = T0
    spans = []
    for _ in range(4):
        mark_auth_profile_failure(store, "openai:p1", "rate_limit", model="gpt-a", now=now)
        entry = read_store(agent_dir)["usageStats"]["openai:p1"]["modelCooldowns"]["gpt-a"]
        spans.append(entry["cooldownUntil"] - now)
        now = entry["cooldownUntil"] + 1  # the next failure comes after the window expired
    assert spans == [MINUTE_MS, 5 * MINUTE_MS, 25 * MINUTE_MS, HOUR_MS]


def test_failure_counts_reset_after_the_failure_window(agent_dir: Path) -> None:
    write_store(agent_dir, two_keys())
    store = load_auth_profile_store(agent_dir)
    mark_auth_profile_failure(store, "openai:p1", "auth", now=T0)
    mark_auth_profile_failure(store, "openai:p1", "auth", now=T0 + 2 * MINUTE_MS)
    stats = read_store(agent_dir)["usageStats"]["openai:p1"]
    assert stats["errorCount"] == 2
    assert stats["cooldownUntil"] == T0 + 2 * MINUTE_MS + 5 * MINUTE_MS

    later = T0 + 25 * HOUR_MS
    mark_auth_profile_failure(store, "openai:p1", "auth", now=later)
    stats = read_store(agent_dir)["usageStats"]["openai:p1"]
    assert stats["errorCount"] == 1
    assert stats["failureCounts"] == {"auth": 1}
    assert stats["cooldownUntil"] == later + MINUTE_MS


def test_billing_failure_disables_the_profile_for_hours(agent_dir: Path) -> None:
    write_store(agent_dir, two_keys())
    store = load_auth_profile_store(agent_dir)
    mark_auth_profile_failure(store, "openai:p1", "billing", model="gpt-a", now=T0)
    mark_auth_profile_failure(store, "openai:p1", "billing", model="gpt-a", now=T0 + 1)
    stats = read_store(agent_dir)["usageStats"]["openai:p1"]
    assert stats["disabledReason"] == "billing"
    assert stats["disabledUntil"] == T0 + 1 + 10 * HOUR_MS
    assert "modelCooldowns" not in stats


def test_billing_backoff_honours_config_and_provider_override(agent_dir: Path) -> None:
    write_store(agent_dir, two_keys())
    store = load_auth_profile_store(agent_dir)
    config = {
        "auth": {
            "cooldowns": {
                "billingBackoffHours": 2,
                "billingMaxHours": 3,
                "billingBackoffHoursByProvider": {"OpenAI": 1},
            }
        }
    }
    for i in range(3):
        mark_auth_profile_failure(store, "openai:p1", "billing", config=config, now=T0 + i)
    stats = read_store(agent_dir)["usageStats"]["openai:p1"]
    assert stats["disabledUntil"] == T0 + 2 + 3 * HOUR_MS  # 1 h, 2 h, 4 h -> capped at 3 h


def test_retry_after_replaces_the_scheduled_cooldown(agent_dir: Path) -> None:
    write_store(agent_dir, two_keys())
    store = load_auth_profile_store(agent_dir)
    mark_auth_profile_failure(
        store, "openai:p1", "rate_limit", model="gpt-a", retry_after_ms=20_000, now=T0
    )
    entry = read_store(agent_dir)["usageStats"]["openai:p1"]["modelCooldowns"]["gpt-a"]
    assert entry["cooldownUntil"] == T0 + 20_000


# -- scope -----------------------------------------------------------------------------------


def test_rate_limit_on_one_model_does_not_block_another_model_on_the_same_profile(
    agent_dir: Path,
) -> None:
    write_store(agent_dir, two_keys())
    store = load_auth_profile_store(agent_dir)
    mark_auth_profile_failure(store, "openai:p1", "rate_limit", model="gpt-a", now=T0)
    assert is_profile_in_cooldown(store, "openai:p1", "gpt-a", now=T0 + 1)
    assert not is_profile_in_cooldown(store, "openai:p1", "gpt-b", now=T0 + 1)
    order_a = resolve_auth_profile_order(None, store, "openai", model="gpt-a", now=T0 + 1)
    assert order_a[-1] == "openai:p1"


def test_overload_is_scoped_to_the_model_too(agent_dir: Path) -> None:
    write_store(agent_dir, two_keys())
    store = load_auth_profile_store(agent_dir)
    mark_auth_profile_failure(store, "openai:p1", "overloaded", model="gpt-a", now=T0)
    assert is_profile_in_cooldown(store, "openai:p1", "gpt-a", now=T0 + 1)
    assert not is_profile_in_cooldown(store, "openai:p1", "gpt-b", now=T0 + 1)


def test_auth_failure_blocks_the_profile_for_every_model(agent_dir: Path) -> None:
    write_store(agent_dir, two_keys())
    store = load_auth_profile_store(agent_dir)
    mark_auth_profile_failure(store, "openai:p1", "auth", model="gpt-a", now=T0)
    for model in ("gpt-a", "gpt-b", None):
        assert is_profile_in_cooldown(store, "openai:p1", model, now=T0 + 1)


def test_billing_blocks_the_profile_for_every_model(agent_dir: Path) -> None:
    write_store(agent_dir, two_keys())
    store = load_auth_profile_store(agent_dir)
    mark_auth_profile_failure(store, "openai:p1", "billing", model="gpt-a", now=T0)
    assert is_profile_in_cooldown(store, "openai:p1", "gpt-b", now=T0 + HOUR_MS)


def test_timeouts_never_cool_a_profile_down(agent_dir: Path) -> None:
    write_store(agent_dir, two_keys())
    store = load_auth_profile_store(agent_dir)
    assert not mark_auth_profile_failure(store, "openai:p1", "timeout", model="gpt-a", now=T0)
    assert not mark_auth_profile_failure(store, "openai:p1", None, now=T0)
    assert not is_profile_in_cooldown(store, "openai:p1", "gpt-a", now=T0 + 1)
    assert "usageStats" not in read_store(agent_dir)


def test_success_clears_the_models_cooldown_but_keeps_other_models(agent_dir: Path) -> None:
    write_store(agent_dir, two_keys())
    store = load_auth_profile_store(agent_dir)
    mark_auth_profile_failure(store, "openai:p1", "rate_limit", model="gpt-a", now=T0)
    mark_auth_profile_failure(store, "openai:p1", "rate_limit", model="gpt-b", now=T0)
    mark_auth_profile_used(store, "openai:p1", model="gpt-b", now=T0 + 5)
    stats = read_store(agent_dir)["usageStats"]["openai:p1"]
    assert stats["lastUsed"] == T0 + 5
    assert stats["errorCount"] == 0
    assert set(stats["modelCooldowns"]) == {"gpt-a"}
    mark_auth_profile_used(store, "openai:p1", now=T0 + 6)
    assert "modelCooldowns" not in read_store(agent_dir)["usageStats"]["openai:p1"]


def test_expired_cooldowns_are_cleared_and_counters_restart() -> None:
    store = AuthProfileStore(
        two_keys(
            usageStats={
                "openai:p1": {
                    "cooldownUntil": T0 - 1,
                    "errorCount": 3,
                    "failureCounts": {"rate_limit": 3},
                    "lastFailureAt": T0 - MINUTE_MS,
                },
                "openai:p2": {"disabledUntil": T0 + HOUR_MS, "disabledReason": "billing"},
            }
        )
    )
    assert clear_expired_cooldowns(store, T0)
    p1 = store.usage("openai:p1")
    assert "cooldownUntil" not in p1
    assert p1["errorCount"] == 0 and "failureCounts" not in p1
    assert p1["lastFailureAt"] == T0 - MINUTE_MS
    assert store.usage("openai:p2")["disabledReason"] == "billing"


# -- order -----------------------------------------------------------------------------------


def test_round_robin_puts_the_least_recently_used_profile_first() -> None:
    store = AuthProfileStore(
        two_keys(usageStats={"openai:p1": {"lastUsed": T0}, "openai:p2": {"lastUsed": T0 - 10}})
    )
    assert resolve_auth_profile_order(None, store, "openai", now=T0) == ["openai:p2", "openai:p1"]


def test_round_robin_rotates_after_each_use(agent_dir: Path) -> None:
    write_store(agent_dir, two_keys())
    store = load_auth_profile_store(agent_dir)
    used = []
    for i in range(4):
        first = resolve_auth_profile_order(None, store, "openai", now=T0 + i)[0]
        used.append(first)
        mark_auth_profile_used(store, first, now=T0 + i)
    assert used == ["openai:p1", "openai:p2", "openai:p1", "openai:p2"]


def test_round_robin_prefers_oauth_then_token_then_api_key() -> None:
    store = AuthProfileStore(
        {
            "profiles": {
                "a:key": {"type": "api_key", "provider": "a", "key": "k"},
                "a:tok": {"type": "token", "provider": "a", "token": "t"},
                "a:oauth": {"type": "oauth", "provider": "a", "access": "x", "refresh": "y"},
            }
        }
    )
    assert resolve_auth_profile_order(None, store, "a", now=T0) == ["a:oauth", "a:tok", "a:key"]


def test_last_good_is_recorded_but_not_preferred(agent_dir: Path) -> None:
    write_store(agent_dir, two_keys(usageStats={"openai:p2": {"lastUsed": T0}}))
    store = load_auth_profile_store(agent_dir)
    mark_auth_profile_good(store, "OpenAI", "openai:p2")
    assert read_store(agent_dir)["lastGood"] == {"openai": "openai:p2"}
    assert store.last_good("openai") == "openai:p2"
    assert resolve_auth_profile_order(None, store, "openai", now=T0)[0] == "openai:p1"


def test_profiles_in_cooldown_go_last_soonest_expiry_first() -> None:
    store = AuthProfileStore(
        {
            "profiles": {
                f"openai:p{i}": {"type": "api_key", "provider": "openai", "key": f"k{i}"}
                for i in (1, 2, 3)
            },
            "usageStats": {
                "openai:p1": {"cooldownUntil": T0 + 50_000},
                "openai:p2": {"cooldownUntil": T0 + 10_000},
            },
        }
    )
    order = resolve_auth_profile_order(None, store, "openai", now=T0)
    assert order == ["openai:p3", "openai:p2", "openai:p1"]


def test_config_order_is_kept_with_cooled_profiles_moved_last() -> None:
    store = AuthProfileStore(
        {
            "profiles": {
                f"openai:p{i}": {"type": "api_key", "provider": "openai", "key": f"k{i}"}
                for i in (1, 2, 3)
            },
            "usageStats": {"openai:p3": {"lastUsed": 0}, "openai:p2": {"cooldownUntil": T0 + 5}},
        }
    )
    config = {"auth": {"order": {"openai": ["openai:p2", "openai:p1", "openai:p3"]}}}
    order = resolve_auth_profile_order(config, store, "openai", now=T0)
    assert order == ["openai:p1", "openai:p3", "openai:p2"]


def test_store_order_overrides_config_order() -> None:
    store = AuthProfileStore(two_keys(order={"OpenAI": ["openai:p2", "openai:p1"]}))
    config = {"auth": {"order": {"openai": ["openai:p1", "openai:p2"]}}}
    assert resolve_auth_profile_order(config, store, "openai", now=T0) == [
        "openai:p2",
        "openai:p1",
    ]


def test_order_drops_unusable_credentials_unknown_ids_and_duplicates() -> None:
    store = AuthProfileStore(
        {
            "profiles": {
                "openai:blank": {"type": "api_key", "provider": "openai", "key": "  "},
                "openai:old": {"type": "token", "provider": "openai", "token": "t", "expires": 5},
                "openai:ok": {"type": "api_key", "provider": "openai", "key": "k"},
                "anthropic:x": {"type": "api_key", "provider": "anthropic", "key": "k"},
            }
        }
    )
    listed = ["openai:blank", "openai:old", "missing", "anthropic:x", "openai:ok", "openai:ok"]
    config = {"auth": {"order": {"openai": listed}}}
    assert resolve_auth_profile_order(config, store, "openai", now=T0) == ["openai:ok"]


def test_config_mode_must_match_the_stored_credential_type() -> None:
    store = AuthProfileStore(
        {
            "profiles": {
                "a:key": {"type": "api_key", "provider": "a", "key": "k"},
                "a:tok": {"type": "token", "provider": "a", "token": "t"},
            }
        }
    )
    mode = {"provider": "a", "mode": "oauth"}
    config = {"auth": {"profiles": {"a:key": mode, "a:tok": mode}}}
    assert resolve_auth_profile_order(config, store, "a", now=T0) == ["a:tok"]


def test_preferred_profile_moves_first_even_while_cooling() -> None:
    store = AuthProfileStore(two_keys(usageStats={"openai:p2": {"cooldownUntil": T0 + 5}}))
    order = resolve_auth_profile_order(None, store, "openai", preferred_profile="openai:p2", now=T0)
    assert order == ["openai:p2", "openai:p1"]


def test_user_locked_profile_is_the_only_candidate_even_in_cooldown() -> None:
    store = AuthProfileStore(two_keys(usageStats={"openai:p2": {"cooldownUntil": T0 + 5}}))
    candidates = resolve_auth_profile_candidates(
        None, store, "openai", profile_id="openai:p2", profile_source="user", now=T0
    )
    assert candidates == ["openai:p2"]


def test_auto_pinned_profile_goes_first_only_while_usable() -> None:
    store = AuthProfileStore(two_keys(usageStats={"openai:p2": {"lastUsed": T0}}))
    pinned = resolve_auth_profile_candidates(None, store, "openai", profile_id="openai:p2", now=T0)
    assert pinned == ["openai:p2", "openai:p1"]
    store.usage_for_update("openai:p2")["modelCooldowns"] = {"gpt-a": {"cooldownUntil": T0 + 9}}
    cooling = resolve_auth_profile_candidates(
        None, store, "openai", profile_id="openai:p2", model="gpt-a", now=T0
    )
    assert cooling == ["openai:p1", "openai:p2"]
    other_model = resolve_auth_profile_candidates(
        None, store, "openai", profile_id="openai:p2", model="gpt-b", now=T0
    )
    assert other_model == ["openai:p2", "openai:p1"]


def test_user_locked_profile_of_another_provider_is_ignored() -> None:
    store = AuthProfileStore(
        two_keys()
        | {
            "profiles": {
                **two_keys()["profiles"],
                "anthropic:me": {"type": "api_key", "provider": "anthropic", "key": "k"},
            }
        }
    )
    candidates = resolve_auth_profile_candidates(
        None, store, "openai", profile_id="anthropic:me", profile_source="user", now=T0
    )
    assert candidates == ["openai:p1", "openai:p2"]


def test_provider_ids_are_normalised() -> None:
    assert normalize_provider_id(" OpenAI ") == "openai"
    assert normalize_provider_id("Z.AI") == "zai"
    store = AuthProfileStore(two_keys())
    assert resolve_auth_profile_order(None, store, " OpenAI ", now=T0) == [
        "openai:p1",
        "openai:p2",
    ]


def test_unavailable_reason_prefers_disabled_windows_and_counts() -> None:
    store = AuthProfileStore(
        two_keys(
            usageStats={
                "openai:p1": {
                    "cooldownUntil": T0 + 5,
                    "failureCounts": {"rate_limit": 2, "auth": 1},
                },
                "openai:p2": {"cooldownUntil": T0 + 9},
            }
        )
    )
    ids = ["openai:p1", "openai:p2"]
    assert resolve_profiles_unavailable_reason(store, ids, now=T0) == "rate_limit"
    store.usage_for_update("openai:p2").update(
        {"disabledUntil": T0 + HOUR_MS, "disabledReason": "billing"}
    )
    assert resolve_profiles_unavailable_reason(store, ids, now=T0) == "billing"
    assert resolve_profiles_unavailable_reason(store, ids, now=T0 + 2 * HOUR_MS) is None
    assert get_soonest_cooldown_expiry(store, ids) == T0 + 5


# -- credentials -----------------------------------------------------------------------------


def test_api_key_resolves_literal_env_name_and_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWPI_TEST_WORK_KEY", "sk-from-env")
    store = AuthProfileStore(
        {
            "profiles": {
                "o:lit": {"type": "api_key", "provider": "openai", "key": "sk-literal"},
                "o:env": {"type": "api_key", "provider": "openai", "key": "CLAWPI_TEST_WORK_KEY"},
                "o:cmd": {"type": "api_key", "provider": "openai", "key": "!echo sk-from-cmd"},
                "o:tok": {"type": "token", "provider": "openai", "token": "tok", "expires": 0},
            }
        }
    )
    keys = {pid: resolve_api_key_for_profile(store, pid, now=T0) for pid in store.profiles}
    assert {pid: k.api_key if k else None for pid, k in keys.items()} == {
        "o:lit": "sk-literal",
        "o:env": "sk-from-env",
        "o:cmd": "sk-from-cmd",
        "o:tok": "tok",
    }
    assert keys["o:tok"] is not None and keys["o:tok"].type == "token"


def test_expired_token_and_unknown_profile_have_no_key() -> None:
    store = AuthProfileStore(
        {"profiles": {"o:t": {"type": "token", "provider": "o", "token": "t", "expires": T0}}}
    )
    assert resolve_api_key_for_profile(store, "o:t", now=T0) is None
    assert resolve_api_key_for_profile(store, "o:t", now=T0 - 1) is not None
    assert resolve_api_key_for_profile(store, "nope", now=T0) is None


# -- the store file --------------------------------------------------------------------------


def test_unknown_fields_survive_a_write(agent_dir: Path) -> None:
    data = two_keys(extraTopLevel={"a": 1})
    data["profiles"]["openai:p1"]["note"] = "keep me"
    data["usageStats"] = {"openai:p1": {"customStat": 7}}
    write_store(agent_dir, data)
    store = load_auth_profile_store(agent_dir)
    mark_auth_profile_failure(store, "openai:p1", "rate_limit", model="m", now=T0)
    saved = read_store(agent_dir)
    assert saved["extraTopLevel"] == {"a": 1}
    assert saved["profiles"]["openai:p1"]["note"] == "keep me"
    assert saved["usageStats"]["openai:p1"]["customStat"] == 7
    assert (agent_dir / "auth-profiles.json").stat().st_mode & 0o777 == 0o600


def test_missing_store_loads_empty_and_a_corrupt_one_is_a_clear_error(agent_dir: Path) -> None:
    assert load_auth_profile_store(agent_dir).profiles == {}
    agent_dir.mkdir(parents=True)
    (agent_dir / "auth-profiles.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"auth-profiles\.json"):
        load_auth_profile_store(agent_dir)
    assert (agent_dir / "auth-profiles.json").read_text() == "{not json"


def test_marks_apply_to_the_fresh_file_not_a_stale_copy(agent_dir: Path) -> None:
    write_store(agent_dir, two_keys())
    stale = load_auth_profile_store(agent_dir)
    other = load_auth_profile_store(agent_dir)
    mark_auth_profile_used(other, "openai:p2", now=T0)
    mark_auth_profile_failure(stale, "openai:p1", "auth", now=T0)
    saved = read_store(agent_dir)["usageStats"]
    assert saved["openai:p2"]["lastUsed"] == T0
    assert saved["openai:p1"]["errorCount"] == 1
    assert stale.usage("openai:p2")["lastUsed"] == T0  # refreshed in place


def _mark_many(args: tuple[str, str, int]) -> None:
    agent_dir, profile_id, count = args
    store = load_auth_profile_store(agent_dir)
    for i in range(count):
        mark_auth_profile_failure(store, profile_id, "rate_limit", model=f"m{i}", now=T0 + i)


def test_concurrent_writers_in_several_processes_lose_nothing(agent_dir: Path) -> None:
    profiles = {
        f"openai:p{i}": {"type": "api_key", "provider": "openai", "key": f"k{i}"} for i in range(4)
    }
    write_store(agent_dir, {"version": 1, "profiles": profiles})
    jobs = [(str(agent_dir), pid, 15) for pid in profiles] * 2
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(_mark_many, jobs)
    stats = read_store(agent_dir)["usageStats"]
    for pid in profiles:
        assert stats[pid]["errorCount"] == 30
        assert stats[pid]["failureCounts"] == {"rate_limit": 30}
        assert set(stats[pid]["modelCooldowns"]) == {f"m{i}" for i in range(15)}


def test_in_memory_store_is_changed_without_a_file() -> None:
    store = AuthProfileStore(two_keys())
    update_auth_profile_store(store, lambda s: s.set_last_good("openai", "openai:p1"))
    mark_auth_profile_failure(store, "openai:p1", "auth", now=T0)
    assert store.last_good("openai") == "openai:p1"
    assert is_profile_in_cooldown(store, "openai:p1", now=T0)


def test_unavailable_reason_names_the_profile_wide_cause_not_older_model_limits(
    agent_dir: Path,
) -> None:
    write_store(agent_dir, two_keys())
    store = load_auth_profile_store(agent_dir)
    for pid in ("openai:p1", "openai:p2"):
        for i in range(3):
            mark_auth_profile_failure(store, pid, "rate_limit", model=f"m{i}", now=T0)
        mark_auth_profile_failure(store, pid, "auth", model="m0", now=T0)
    ids = ["openai:p1", "openai:p2"]
    assert resolve_profiles_unavailable_reason(store, ids, model="gpt-x", now=T0 + 1) == "auth"
    mark_auth_profile_used(store, "openai:p1", now=T0 + 2)
    assert "cooldownReason" not in read_store(agent_dir)["usageStats"]["openai:p1"]
