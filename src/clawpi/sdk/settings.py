"""`SettingsManager`: global settings merged with per-project settings, pi's keys and defaults.

The global file is `<agent_dir>/settings.json`; the project file `<cwd>/.clawpi/settings.json`
(or pi's `.pi/settings.json`). Project values win; nested objects merge one level deep; arrays
are replaced. Unknown keys are kept, and writes touch only the keys that changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clawpi.ai.bounded import remember
from clawpi.ai.types import ThinkingLevel
from clawpi.errors import ConfigError
from clawpi.sdk.json_file import read_json_object, update_json_file
from clawpi.sdk.paths import project_config_dir

SETTINGS_FILE = "settings.json"
VALIDATED_CACHE_SIZE = 64


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)


class CompactionSettings(_Section):
    enabled: bool = True
    reserve_tokens: int = Field(16384, alias="reserveTokens", ge=0)
    keep_recent_tokens: int = Field(20000, alias="keepRecentTokens", ge=0)


class BranchSummarySettings(_Section):
    reserve_tokens: int = Field(16384, alias="reserveTokens", ge=0)
    skip_prompt: bool = Field(False, alias="skipPrompt")


class RetrySettings(_Section):
    enabled: bool = True
    max_retries: int = Field(3, alias="maxRetries", ge=0)
    base_delay_ms: int = Field(2000, alias="baseDelayMs", ge=0)
    max_delay_ms: int = Field(60000, alias="maxDelayMs", ge=0)


class ImageSettings(_Section):
    auto_resize: bool = Field(True, alias="autoResize")
    block_images: bool = Field(False, alias="blockImages")


class ThinkingBudgets(_Section):
    minimal: int | None = None
    low: int | None = None
    medium: int | None = None
    high: int | None = None


class Settings(_Section):
    """The merged settings; field names are snake_case, the JSON keys pi's camelCase."""

    default_provider: str | None = Field(None, alias="defaultProvider")
    default_model: str | None = Field(None, alias="defaultModel")
    default_thinking_level: ThinkingLevel | None = Field(None, alias="defaultThinkingLevel")
    transport: Literal["sse", "websocket", "auto"] = "sse"
    steering_mode: Literal["all", "one-at-a-time"] = Field("one-at-a-time", alias="steeringMode")
    follow_up_mode: Literal["all", "one-at-a-time"] = Field("one-at-a-time", alias="followUpMode")
    theme: str = "dark"
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    branch_summary: BranchSummarySettings = Field(
        default_factory=BranchSummarySettings, alias="branchSummary"
    )
    retry: RetrySettings = Field(default_factory=RetrySettings)
    hide_thinking_block: bool = Field(False, alias="hideThinkingBlock")
    quiet_startup: bool = Field(False, alias="quietStartup")
    shell_path: str | None = Field(None, alias="shellPath")
    shell_command_prefix: str | None = Field(None, alias="shellCommandPrefix")
    packages: list[Any] = Field(default_factory=list)
    extensions: list[str] = Field(default_factory=list)
    skills: list[str] = Field(default_factory=list)
    prompts: list[str] = Field(default_factory=list)
    enable_skill_commands: bool = Field(True, alias="enableSkillCommands")
    images: ImageSettings = Field(default_factory=ImageSettings)
    enabled_models: list[str] | None = Field(None, alias="enabledModels")
    thinking_budgets: ThinkingBudgets | None = Field(None, alias="thinkingBudgets")


def migrate_settings(data: dict[str, Any]) -> dict[str, Any]:
    """pi's read-time migrations: queueMode, boolean websockets, object-form skills."""
    out = dict(data)
    if "queueMode" in out and "steeringMode" not in out:
        out["steeringMode"] = out.pop("queueMode")
    if isinstance(out.get("websockets"), bool) and "transport" not in out:
        out["transport"] = "websocket" if out.pop("websockets") else "sse"
    skills = out.get("skills")
    if isinstance(skills, dict):
        paths = skills.get("customDirectories") or skills.get("paths") or []
        out["skills"] = [str(p) for p in paths] if isinstance(paths, list) else []
    return out


def merge_settings(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Project over global: nested objects merged one level, everything else replaced."""
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            merged[key] = {**current, **value}
        else:
            merged[key] = value
    return merged


class SettingsManager:
    """Reads, merges and updates settings. `settings` is the validated merged view."""

    def __init__(
        self,
        agent_dir: Path | str | None = None,
        cwd: Path | str | None = None,
        *,
        overrides: dict[str, Any] | None = None,
    ) -> None:
        self.global_path = Path(agent_dir) / SETTINGS_FILE if agent_dir is not None else None
        project_dir = project_config_dir(Path(cwd)) if cwd is not None else None
        self.project_path = project_dir / SETTINGS_FILE if project_dir is not None else None
        self._overrides: dict[str, Any] = dict(overrides or {})
        self.reload()

    @classmethod
    def in_memory(cls, data: dict[str, Any] | None = None) -> SettingsManager:
        return cls(overrides=data)

    def reload(self) -> None:
        global_data = self._read(self.global_path)
        project_data = self._read(self.project_path)
        merged = merge_settings(merge_settings(global_data, project_data), self._overrides)
        self.raw = merged
        try:
            self.settings = _validated(merged)
        except ValidationError as exc:
            where = ", ".join(str(p) for p in (self.global_path, self.project_path) if p)
            raise ConfigError(_describe_validation(exc, where or "in-memory settings")) from exc

    def _read(self, path: Path | None) -> dict[str, Any]:
        return migrate_settings(read_json_object(path)) if path is not None else {}

    def set(self, key: str, value: Any, *, project: bool = False) -> None:
        """Persist one top-level key (`None` removes it) and reload the merged view."""
        path = self.project_path if project else self.global_path
        if path is None:
            if value is None:
                self._overrides.pop(key, None)
            else:
                self._overrides[key] = value
        else:

            def change(data: dict[str, Any]) -> None:
                if value is None:
                    data.pop(key, None)
                else:
                    data[key] = value

            update_json_file(path, change)
        self.reload()

    def apply_overrides(self, overrides: dict[str, Any]) -> None:
        """Runtime-only values (CLI flags, SDK arguments) that win over both files."""
        self._overrides = merge_settings(self._overrides, overrides)
        self.reload()

    # pi-style accessors used across the SDK
    def get_compaction_settings(self) -> CompactionSettings:
        return self.settings.compaction

    def get_retry_settings(self) -> RetrySettings:
        return self.settings.retry

    def get_default_model(self) -> tuple[str | None, str | None]:
        return self.settings.default_provider, self.settings.default_model

    def get_thinking_budgets(self) -> dict[str, int]:
        budgets = self.settings.thinking_budgets
        if budgets is None:
            return {}
        return {k: v for k, v in budgets.model_dump().items() if isinstance(v, int)}


def _describe_validation(exc: ValidationError, where: str) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}" for error in exc.errors()
    )
    return f"Invalid settings in {where}: {problems}"


_validated_cache: dict[bytes, Settings] = {}


def _validated(merged: dict[str, Any]) -> Settings:
    """The same settings validate to the same (frozen) object: an embedding that opens a
    session per message validates its few distinct settings once, not on every message."""
    try:
        key = orjson.dumps(merged, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # a value JSON cannot hold: validate (and report) it as it is
        return Settings.model_validate(merged)
    settings = _validated_cache.get(key)
    if settings is None:
        settings = remember(
            _validated_cache, key, Settings.model_validate(merged), VALIDATED_CACHE_SIZE
        )
    return settings
