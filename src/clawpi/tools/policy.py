"""Tool policy: profiles, groups and allow / also-allow / deny lists, in OpenClaw's order.

Each stage filters what the previous one let through, so a later stage can only narrow the
set. Within a stage deny always wins, and an empty allow list means "everything".
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from clawpi.agent.tool import AgentTool
from clawpi.errors import ConfigError

logger = logging.getLogger(__name__)

ToolProfile = Literal["minimal", "coding", "messaging", "full"]

TOOL_NAME_ALIASES: dict[str, str] = {"bash": "exec", "apply-patch": "apply_patch"}

# OpenClaw's groups; clawpi also ships pi's grep/find/ls, which belong with the file tools.
TOOL_GROUPS: dict[str, tuple[str, ...]] = {
    "group:memory": ("memory_search", "memory_get"),
    "group:web": ("web_search", "web_fetch"),
    "group:fs": ("read", "write", "edit", "apply_patch", "grep", "find", "ls"),
    "group:runtime": ("exec", "process"),
    "group:sessions": (
        "sessions_list", "sessions_history", "sessions_send", "sessions_spawn", "session_status",
    ),
    "group:ui": ("browser", "canvas"),
    "group:automation": ("cron", "gateway"),
    "group:messaging": ("message",),
    "group:nodes": ("nodes",),
}  # fmt: skip
TOOL_GROUPS["group:openclaw"] = tuple(
    dict.fromkeys(name for group in TOOL_GROUPS.values() for name in group)
)

TOOL_PROFILES: dict[str, tuple[str, ...] | None] = {
    "minimal": ("session_status",),
    "coding": ("group:fs", "group:runtime", "group:sessions", "group:memory", "image"),
    "messaging": (
        "group:messaging", "sessions_list", "sessions_history", "sessions_send", "session_status",
    ),
    "full": None,
}  # fmt: skip

CORE_TOOL_NAMES = frozenset(TOOL_GROUPS["group:openclaw"]) | {"image"}

# Sub-agents do not manage sessions, schedules, the gateway or memory unless configured to.
DEFAULT_SUBAGENT_DENY = (
    "sessions_list", "sessions_history", "sessions_send", "sessions_spawn",
    "gateway", "cron", "memory_search", "memory_get",
)  # fmt: skip


def normalize_tool_name(name: str) -> str:
    key = name.strip().lower()
    return TOOL_NAME_ALIASES.get(key, key)


def expand_entries(entries: Iterable[str]) -> list[str]:
    """Lower-case, alias and expand `group:*` entries; keeps glob entries as they are."""
    out: list[str] = []
    for entry in entries:
        name = normalize_tool_name(entry)
        if not name:
            continue
        out.extend(TOOL_GROUPS.get(name, (name,)))
    return list(dict.fromkeys(out))


def _matcher(entries: Sequence[str]) -> re.Pattern[str] | None:
    if not entries:
        return None
    parts = [re.escape(e).replace(r"\*", ".*") for e in entries]
    return re.compile("(?:" + "|".join(parts) + r")\Z")


@dataclasses.dataclass(frozen=True, slots=True)
class ToolPolicy:
    """One policy layer as it appears in config (`tools`, an agent, a group, the sandbox).

    `by_provider` keys are a provider id (`openai`) or `provider/model`; the exact model key
    wins over the provider key.
    """

    profile: ToolProfile | None = None
    allow: tuple[str, ...] = ()
    also_allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    by_provider: Mapping[str, ToolPolicy] = dataclasses.field(default_factory=dict)

    def for_provider(self, provider: str | None, model_id: str | None) -> ToolPolicy | None:
        if not provider or not self.by_provider:
            return None
        keys = {k.strip().lower(): v for k, v in self.by_provider.items()}
        if model_id:
            exact = keys.get(f"{provider}/{model_id}".lower())
            if exact is not None:
                return exact
        return keys.get(provider.lower())


@dataclasses.dataclass(frozen=True, slots=True)
class ToolPolicyConfig:
    """Every layer that may narrow the tool set, applied in OpenClaw's order by
    `resolve_allowed_tools`: profile, provider profile, global, global provider, agent,
    agent provider, group/channel, sandbox, sub-agent."""

    tools: ToolPolicy = dataclasses.field(default_factory=ToolPolicy)
    agent: ToolPolicy | None = None
    group: ToolPolicy | None = None
    sandbox: ToolPolicy | None = None
    subagent: ToolPolicy | None = None
    is_subagent: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class _Stage:
    label: str
    allow: tuple[str, ...]
    deny: tuple[str, ...]


def _profile_allow(profile: str | None, also_allow: Sequence[str]) -> tuple[str, ...] | None:
    if profile is None:
        return None
    if profile not in TOOL_PROFILES:
        raise ConfigError(
            f"Unknown tool profile {profile!r} (tools.profile); use one of"
            f" {', '.join(TOOL_PROFILES)}."
        )
    base = TOOL_PROFILES[profile]
    if base is None:
        return None
    return (*base, *also_allow)


def _stages(config: ToolPolicyConfig, provider: str | None, model_id: str | None) -> list[_Stage]:
    tools = config.tools
    agent = config.agent or ToolPolicy()
    stages: list[_Stage] = []
    profile = agent.profile or tools.profile
    profile_allow = _profile_allow(profile, (*tools.also_allow, *agent.also_allow))
    if profile_allow is not None:
        stages.append(_Stage(f"profile {profile}", profile_allow, ()))
    provider_tools = tools.for_provider(provider, model_id)
    if provider_tools is not None:
        allow = _profile_allow(provider_tools.profile, provider_tools.also_allow)
        if allow is not None:
            stages.append(_Stage(f"provider profile {provider_tools.profile}", allow, ()))
    provider_agent = agent.for_provider(provider, model_id)
    layers = [
        ("tools", tools),
        ("tools.byProvider", provider_tools),
        ("agent", config.agent),
        ("agent.byProvider", provider_agent),
        ("group", config.group),
        ("sandbox", config.sandbox),
    ]
    for label, layer in layers:
        if layer is None:
            continue
        allow = layer.allow
        if allow and layer.also_allow:
            allow = (*allow, *layer.also_allow)
        stages.append(_Stage(label, allow, layer.deny))
    if config.is_subagent:
        sub = config.subagent
        if sub is None:
            stages.append(_Stage("subagent", (), DEFAULT_SUBAGENT_DENY))
        else:
            stages.append(_Stage("subagent", sub.allow, sub.deny))
    return stages


def _apply_stage(names: list[str], stage: _Stage, known: frozenset[str]) -> list[str]:
    allow = expand_entries(stage.allow)
    deny = _matcher(expand_entries(stage.deny))
    if allow and not any(entry in known or "*" in entry for entry in allow):
        logger.warning(
            "Tool policy %s: allow list %s names no known tool; ignoring it so core tools "
            "stay available.", stage.label, allow,
        )  # fmt: skip
        allow = []
    if "exec" in allow and "apply_patch" not in allow:
        allow.append("apply_patch")  # older configs allowed apply_patch through exec
    allow_match = _matcher(allow)
    result = []
    for name in names:
        key = normalize_tool_name(name)
        if deny is not None and deny.match(key):
            continue
        if allow_match is not None and not allow_match.match(key):
            continue
        result.append(name)
    return result


def resolve_allowed_tools(
    names: Iterable[str],
    config: ToolPolicyConfig | None,
    *,
    provider: str | None = None,
    model_id: str | None = None,
) -> list[str]:
    """The subset of `names` every policy stage lets through, in the original order."""
    current = list(names)
    if config is None:
        return current
    known = CORE_TOOL_NAMES | {normalize_tool_name(n) for n in current}
    for stage in _stages(config, provider, model_id):
        current = _apply_stage(current, stage, known)
    return current


def filter_tools(
    tools: Sequence[AgentTool],
    config: ToolPolicyConfig | None,
    *,
    provider: str | None = None,
    model_id: str | None = None,
) -> list[AgentTool]:
    """The tools the policy allows, in their original order."""
    names = [tool.name for tool in tools]
    allowed = set(resolve_allowed_tools(names, config, provider=provider, model_id=model_id))
    return [tool for tool in tools if tool.name in allowed]
