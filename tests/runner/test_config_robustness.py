"""A config with any value in any place the runner reads never crashes a run: the run answers,
or fails with one of clawpi's own errors (a `ConfigError` saying what is wrong, a failover when
no model is usable), never a `TypeError` or `AttributeError` from deep inside."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawpi.ai.stream import StreamOptions
from clawpi.ai.types import Context
from clawpi.errors import ClawpiError, ConfigError
from clawpi.runner import run_embedded_agent
from clawpi.runner.lanes import CommandQueue
from clawpi.testing import FunctionProvider
from clawpi.testing.faux import FauxResponse, faux_text

SEEN_DEMO_ENV: list[str | None] = []
"""What the skill variable `DEMO` was while the model answered."""


async def _answer(_context: Context, _options: StreamOptions) -> FauxResponse:
    SEEN_DEMO_ENV.append(os.environ.get("DEMO"))
    return FauxResponse(content=[faux_text("fine")])


PROVIDER = FunctionProvider(_answer, provider="faux", model_id="faux-1")

BASE: dict[str, Any] = {
    "models": {
        "providers": {
            "faux": {
                "api": PROVIDER.model.api,
                "baseUrl": PROVIDER.model.base_url,
                "apiKey": "x",
                "headers": {"x-a": "1"},
                "models": [
                    {
                        "id": "faux-1",
                        "name": "Faux",
                        "contextWindow": 100_000,
                        "maxTokens": 4_000,
                        "input": ["text"],
                        "cost": {"input": 1, "output": 2},
                        "compat": {},
                        "headers": {},
                    }
                ],
            }
        }
    },
    "agents": {
        "defaults": {
            "model": {"primary": "faux/faux-1", "fallbacks": []},
            "maxConcurrent": 4,
            "timeoutSeconds": 30,
            "thinkingDefault": "off",
            "userTimezone": "UTC",
            "contextTokens": 100_000,
            "bootstrapMaxChars": 20_000,
            "bootstrapTotalMaxChars": 50_000,
            "imageMaxDimensionPx": 1200,
            "toolResultMaxChars": 400_000,
            "llm": {"idleTimeoutSeconds": 60},
            "compaction": {
                "mode": "safeguard",
                "enabled": True,
                "reserveTokensFloor": 20_000,
                "keepRecentTokens": 20_000,
                "timeoutSeconds": 60,
                "maxHistoryShare": 0.5,
                "recentTurnsPreserve": 2,
                "identifierPolicy": "strict",
                "identifierInstructions": "keep ids",
                "customInstructions": "be brief",
                "qualityGuard": {"enabled": True, "maxRetries": 1},
            },
            "contextPruning": {
                "mode": "cache-ttl",
                "ttl": "5m",
                "keepLastAssistants": 3,
                "softTrimRatio": 0.3,
                "hardClearRatio": 0.5,
                "minPrunableToolChars": 50_000,
                "softTrim": {"maxChars": 4_000, "headChars": 1_500, "tailChars": 1_500},
                "hardClear": {"enabled": True, "placeholder": "[cleared]"},
                "tools": {"allow": ["exec"], "deny": []},
            },
            "sandbox": {"mode": "off"},
            "subagents": {"maxConcurrent": 8},
        }
    },
    "auth": {
        "order": {"faux": []},
        "cooldowns": {"billingBackoffHours": 5, "billingBackoffHoursByProvider": {"faux": 1}},
    },
    "channels": {
        "telegram": {"historyLimit": 50, "dmHistoryLimit": 20, "dms": {"42": {"historyLimit": 9}}}
    },
    "skills": {"entries": {"demo": {"enabled": True, "env": {"DEMO": "1"}, "apiKey": "k"}}},
    "tools": {
        "profile": "coding",
        "allow": [],
        "deny": [],
        "alsoAllow": [],
        "byProvider": {"faux": {"deny": []}},
        "exec": {
            "applyPatch": {"enabled": False, "allowModels": []},
            "security": "allowlist",
            "safeBins": ["ls"],
            "pathPrepend": [],
            "backgroundMs": 10_000,
            "timeoutSec": 60,
        },
        "fs": {"workspaceOnly": True},
        "sandbox": {"tools": {"allow": [], "deny": []}},
        "subagents": {"tools": {"deny": []}},
    },
}


def _paths(node: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


PATHS = _paths(BASE)


def _values(keys: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
        lambda children: (
            st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=3)
        ),
        max_leaves=6,
    )


json_values = _values(st.text(max_size=8))
"""What a JSON file can hold."""
config_values = _values(st.text(max_size=8) | st.integers(0, 9))
"""What a config passed as a dict can hold besides: keys that are not strings."""


def _set(config: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    node: Any = config
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _changed(base: dict[str, Any], changes: list[tuple[tuple[str | int, ...], Any]]) -> Any:
    """A deep copy of `base` with each change applied where its path still exists."""
    result = copy.deepcopy(base)
    for path, value in changes:
        try:
            _set(result, path, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change replaced a parent of this path
    return result


async def _run(config: dict[str, Any], root: Path) -> Any:
    skill = root / "agent" / "skills" / "demo"  # the skill `skills.entries.demo` configures
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text("---\nname: demo\ndescription: A demo skill.\n---\nDemo.\n")
    return await run_embedded_agent(
        session_id="s",
        session_key="agent:main:telegram:direct:42",
        session_file=root / "sessions" / "s.jsonl",
        workspace_dir=root / "ws",
        config=config,
        prompt="hello",
        timeout_ms=30_000,
        run_id="r",
        agent_dir=root / "agent",
        run_queue=CommandQueue(),
    )


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(changes=st.lists(st.tuples(st.sampled_from(PATHS), config_values), min_size=1, max_size=3))
def test_any_value_anywhere_in_the_config_answers_or_fails_with_a_clawpi_error(
    changes: list[tuple[tuple[str | int, ...], Any]],
) -> None:
    config = _changed(BASE, changes)
    environ, cwd = dict(os.environ), os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            result = asyncio.run(_run(config, Path(tmp)))
        except ClawpiError:
            result = None
        # skill env overrides and the workspace cwd are undone, whatever the config held
        assert dict(os.environ) == environ
        assert os.getcwd() == cwd
        if result is None:
            return
        assert result.payloads, result
        assert all(isinstance(payload.text, str | None) for payload in result.payloads)


def test_the_unchanged_config_answers_with_the_skill_env_set_only_during_the_run() -> None:
    SEEN_DEMO_ENV.clear()
    assert "DEMO" not in os.environ
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(_run(copy.deepcopy(BASE), Path(tmp)))
    assert [payload.text for payload in result.payloads] == ["fine"]
    assert SEEN_DEMO_ENV == ["1"]
    assert "DEMO" not in os.environ


def _run_with(changes: list[tuple[tuple[str | int, ...], Any]]) -> Any:
    config = copy.deepcopy(BASE)
    for path, value in changes:
        _set(config, path, value)
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(_run(config, Path(tmp)))


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            ("models", "providers", "faux", "models", 0, "cost", "input"),
            "cheap",
            "Config models.providers.faux.models[0].cost.input must be a number of at least 0,"
            ' not "cheap": fix it in the config',
        ),
        (
            ("models", "providers", "faux", "headers", "x-a"),
            None,
            "Config models.providers.faux.headers.x-a must be a string, not null",
        ),
        (
            ("models", "providers", "faux", "models", 0, "input"),
            ["text", "video"],
            "Config models.providers.faux.models[0].input[1] must be 'text' or 'image', not \"video\"",
        ),
        (
            ("models", "providers", "faux", "models"),
            {"id": "faux-1"},
            "Config models.providers.faux.models must be a list of model objects",
        ),
        (
            ("models", "providers", "faux", "models", 0, "contextWindow"),
            -5,
            "Config models.providers.faux.models[0].contextWindow must be a number of at least 0, not -5",
        ),
    ],
)
def test_a_model_definition_of_the_wrong_shape_is_a_config_error_naming_its_place(
    path: tuple[str | int, ...], value: Any, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _run_with([(path, value)])
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("agents", "defaults", "compaction"), True),
        (("agents", "defaults", "compaction", "keepRecentTokens"), "lots"),
        (("agents", "defaults", "compaction", "reserveTokensFloor"), None),
        (("agents", "defaults"), None),
        (("agents",), 5),
        (("agents", "defaults", "userTimezone"), ["UTC"]),
        (("agents", "defaults", "sandbox"), "on"),
        (("channels",), [1, 2]),
        (("skills", "entries"), "demo"),
    ],
)
def test_a_wrong_agents_defaults_value_reads_as_unset_and_the_run_answers(
    path: tuple[str | int, ...], value: Any
) -> None:
    if (path[:2] == ("agents", "defaults") and len(path) == 2) or path == ("agents",):
        # without agents.defaults there is no primary model: name it per run instead
        config = copy.deepcopy(BASE)
        _set(config, path, value)
        with tempfile.TemporaryDirectory() as tmp:
            result = asyncio.run(_run_model(config, Path(tmp)))
    else:
        result = _run_with([(path, value)])
    assert [payload.text for payload in result.payloads] == ["fine"]


async def _run_model(config: dict[str, Any], root: Path) -> Any:
    return await run_embedded_agent(
        session_id="s",
        session_key="agent:main:telegram:direct:42",
        session_file=root / "s.jsonl",
        workspace_dir=root / "ws",
        config=config,
        prompt="hello",
        provider="faux",
        model="faux-1",
        agent_dir=root / "agent",
        run_queue=CommandQueue(),
    )


STORE: dict[str, Any] = {
    "version": 1,
    "profiles": {
        "faux:p1": {"type": "api_key", "provider": "faux", "key": "k1"},
        "faux:p2": {"type": "token", "provider": "faux", "token": "t2", "expires": 9e12},
    },
    "order": {"faux": ["faux:p1", "faux:p2"]},
    "usageStats": {
        "faux:p1": {
            "lastUsed": 1,
            "cooldownUntil": 0,
            "errorCount": 1,
            "failureCounts": {"rate_limit": 1},
            "lastFailureAt": 1,
            "modelCooldowns": {"faux-1": {"cooldownUntil": 0, "errorCount": 1}},
        },
        "faux:p2": {"disabledUntil": 0, "disabledReason": "billing"},
    },
    "lastGood": {"faux": "faux:p1"},
}
STORE_PATHS = _paths(STORE)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    changes=st.lists(st.tuples(st.sampled_from(STORE_PATHS), json_values), min_size=1, max_size=3)
)
def test_any_value_anywhere_in_the_auth_profile_store_answers_or_fails_with_a_clawpi_error(
    changes: list[tuple[tuple[str | int, ...], Any]],
) -> None:
    store = _changed(STORE, changes)
    config = copy.deepcopy(BASE)
    del config["models"]["providers"]["faux"]["apiKey"]  # keys come from the store
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "agent").mkdir()
        # stdlib json writes what orjson would refuse to: integers beyond 64 bits, NaN
        (root / "agent" / "auth-profiles.json").write_text(json.dumps(store))
        try:
            result = asyncio.run(_run(config, root))
        except ClawpiError:
            return
        assert result.payloads, result
        json.loads((root / "agent" / "auth-profiles.json").read_text())  # still JSON
