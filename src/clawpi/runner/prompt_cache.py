"""An attempt's system prompt, built again only when something that goes into it has changed.

The prompt depends on the workspace's bootstrap files, the tools, the skills, the model and a
few settings. Building it (reading and trimming the files, assembling the sections, the report)
costs more than the rest of a turn's set-up, and it is the same from one message to the next:
a turn now only stats the bootstrap files to see whether any of them changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from clawpi.ai.bounded import remember
from clawpi.ai.models import Model
from clawpi.runner.config import agent_defaults
from clawpi.runner.file_stamps import Stamp, file_stamps
from clawpi.runner.system_prompt import (
    BOOTSTRAP_FILE_NAMES,
    SUBAGENT_BOOTSTRAP_FILES,
    SystemPromptParams,
    build_agent_system_prompt,
    build_bootstrap_context_files,
    build_skills_prompt,
    detect_runtime_info,
    load_workspace_bootstrap_files,
    resolve_bootstrap_max_chars,
    resolve_bootstrap_total_max_chars,
    system_prompt_report,
)
from clawpi.sdk.resources import ResourceLoader

CACHE_SIZE = 64
_prompts: dict[bytes, tuple[str, bytes]] = {}
_skills_prompts: dict[int, tuple[ResourceLoader, str | None]] = {}


def _bootstrap_stamps(workspace_dir: str, subagent: bool) -> list[Stamp]:
    """Stamps of every file the bootstrap could read."""
    names = [n for n in BOOTSTRAP_FILE_NAMES if not subagent or n in SUBAGENT_BOOTSTRAP_FILES]
    if not subagent:
        names.append("memory.md")  # read in place of a missing MEMORY.md
    return file_stamps(workspace_dir, names)


def _skills_prompt(loader: ResourceLoader) -> str | None:
    """Per loader (the runner keeps one per workspace for a while); the entry holds the loader,
    so its id cannot be reused by another while cached."""
    cached = _skills_prompts.get(id(loader))
    if cached is not None and cached[0] is loader:
        return cached[1]
    prompt = build_skills_prompt(loader.skills) if loader.skills else None
    remember(_skills_prompts, id(loader), (loader, prompt), CACHE_SIZE)
    return prompt


def attempt_system_prompt(
    *,
    workspace_dir: str,
    prompt_mode: str,
    config: Mapping[str, Any],
    model: Model,
    tool_names: Sequence[str],
    tool_summaries: Mapping[str, str],
    loader: ResourceLoader,
    extra_system_prompt: str | None,
    thinking_level: str | None,
    reasoning_mode: str | None,
) -> tuple[str, dict[str, Any]]:
    """The system prompt and its report (a fresh dict each call: callers may keep or change it)."""
    subagent = prompt_mode == "minimal"
    skills_prompt = _skills_prompt(loader)
    max_chars = resolve_bootstrap_max_chars(config)
    total_max_chars = resolve_bootstrap_total_max_chars(config)
    timezone = agent_defaults(config).get("userTimezone")
    if not isinstance(timezone, str):
        timezone = None  # like every agents.defaults value of the wrong type: as if unset
    key = orjson.dumps(
        [
            workspace_dir,
            prompt_mode,
            list(tool_names),
            dict(tool_summaries),
            skills_prompt,
            len(loader.skills),
            extra_system_prompt,
            timezone,
            model.provider,
            model.id,
            thinking_level,
            reasoning_mode,
            max_chars,
            total_max_chars,
            _bootstrap_stamps(workspace_dir, subagent),
        ],
        default=str,
    )
    cached = _prompts.get(key)
    if cached is not None:
        return cached[0], orjson.loads(cached[1])
    files = load_workspace_bootstrap_files(workspace_dir, subagent=subagent)
    prompt_params = SystemPromptParams(
        workspace_dir=workspace_dir,
        prompt_mode=prompt_mode,  # type: ignore[arg-type]
        tool_names=list(tool_names),
        tool_summaries=dict(tool_summaries),
        skills_prompt=skills_prompt,
        context_files=build_bootstrap_context_files(
            files, max_chars=max_chars, total_max_chars=total_max_chars
        ),
        extra_system_prompt=extra_system_prompt,
        user_timezone=timezone,
        runtime=detect_runtime_info(model=f"{model.provider}/{model.id}"),
        default_think_level=thinking_level,
        reasoning_level=reasoning_mode,
    )
    prompt = build_agent_system_prompt(prompt_params)
    report = system_prompt_report(prompt_params, skills_count=len(loader.skills))
    remember(_prompts, key, (prompt, orjson.dumps(report)), CACHE_SIZE)
    return prompt, report
