"""Skill env overrides: set only what is unset, restore exactly, share between runs, refuse
dangerous variables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clawpi.runner.skills_env import (
    active_skill_env_keys,
    apply_skill_env_overrides,
    skill_env_target,
)
from clawpi.sdk.resources import ResourceLoader

VARS = ("SKILLTEST_TOKEN", "SKILLTEST_REGION", "SKILLTEST_API_KEY", "SKILLTEST_OTHER")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARS:
        monkeypatch.delenv(name, raising=False)


def _config(**entries: object) -> dict[str, object]:
    return {"skills": {"entries": entries}}


def test_sets_unset_variables_and_restore_removes_exactly_them() -> None:
    config = _config(weather={"env": {"SKILLTEST_TOKEN": "t1", "SKILLTEST_REGION": "eu"}})
    restore = apply_skill_env_overrides([{"name": "weather"}], config)
    assert os.environ["SKILLTEST_TOKEN"] == "t1"
    assert os.environ["SKILLTEST_REGION"] == "eu"
    # a child process (what a skill script is) sees them
    out = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ['SKILLTEST_TOKEN'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "t1"
    restore()
    assert "SKILLTEST_TOKEN" not in os.environ
    assert "SKILLTEST_REGION" not in os.environ
    restore()  # a second call is harmless


def test_an_already_set_variable_is_never_overridden_nor_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SKILLTEST_TOKEN", "operator")
    config = _config(weather={"env": {"SKILLTEST_TOKEN": "skill", "SKILLTEST_REGION": "eu"}})
    restore = apply_skill_env_overrides([{"name": "weather"}], config)
    assert os.environ["SKILLTEST_TOKEN"] == "operator"
    restore()
    assert os.environ["SKILLTEST_TOKEN"] == "operator"
    assert "SKILLTEST_REGION" not in os.environ


def test_api_key_maps_to_the_primary_env_from_skill_front_matter(tmp_path: Path) -> None:
    skill_dir = tmp_path / "agent" / "skills" / "maps"
    skill_dir.mkdir(parents=True)
    (skill_dir / "SKILL.md").write_text(
        "---\nname: maps\ndescription: Map lookups\n"
        "metadata:\n  openclaw:\n    primaryEnv: SKILLTEST_API_KEY\n---\nUse the maps API.\n"
    )
    loader = ResourceLoader(tmp_path / "ws", tmp_path / "agent")
    skills = [s for s in loader.skills if s.name == "maps"]
    assert skill_env_target(skills[0]) is not None
    restore = apply_skill_env_overrides(skills, _config(maps={"apiKey": "  k-123  "}))
    assert os.environ["SKILLTEST_API_KEY"] == "k-123"
    restore()
    assert "SKILLTEST_API_KEY" not in os.environ


def test_api_key_without_primary_env_sets_nothing() -> None:
    restore = apply_skill_env_overrides([{"name": "x"}], _config(x={"apiKey": "k"}))
    assert active_skill_env_keys() == {}
    restore()


def test_disabled_or_unconfigured_skills_set_nothing() -> None:
    config = _config(off={"enabled": False, "env": {"SKILLTEST_TOKEN": "t"}})
    restore = apply_skill_env_overrides([{"name": "off"}, {"name": "unknown"}], config)
    assert "SKILLTEST_TOKEN" not in os.environ
    restore()


def test_dangerous_and_invalid_keys_are_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    path_before = os.environ.get("PATH")
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    config = _config(
        evil={
            "env": {
                "PATH": "/tmp/evil",
                "LD_PRELOAD": "/tmp/evil.so",
                "PYTHONPATH": "/tmp",
                "ld_library_path": "/tmp",
                "BAD-NAME": "x",
                "SKILLTEST_OTHER": "fine",
            }
        }
    )
    restore = apply_skill_env_overrides([{"name": "evil"}], config)
    assert os.environ.get("PATH") == path_before
    assert "LD_PRELOAD" not in os.environ
    assert "PYTHONPATH" not in os.environ
    assert "ld_library_path" not in os.environ
    assert "BAD-NAME" not in os.environ
    assert os.environ["SKILLTEST_OTHER"] == "fine"
    restore()
    assert "SKILLTEST_OTHER" not in os.environ


def test_concurrent_runs_share_a_variable_until_the_last_one_restores() -> None:
    config = _config(weather={"env": {"SKILLTEST_TOKEN": "t1"}})
    first = apply_skill_env_overrides([{"name": "weather"}], config)
    second = apply_skill_env_overrides([{"name": "weather"}], config)
    assert active_skill_env_keys() == {"SKILLTEST_TOKEN": 2}
    first()
    assert os.environ["SKILLTEST_TOKEN"] == "t1"  # the second run still needs it
    second()
    assert "SKILLTEST_TOKEN" not in os.environ
    assert active_skill_env_keys() == {}


def test_a_second_run_wanting_another_value_does_not_clobber_the_first() -> None:
    first = apply_skill_env_overrides(
        [{"name": "a"}], _config(a={"env": {"SKILLTEST_TOKEN": "from-a"}})
    )
    second = apply_skill_env_overrides(
        [{"name": "b"}], _config(b={"env": {"SKILLTEST_TOKEN": "from-b"}})
    )
    assert os.environ["SKILLTEST_TOKEN"] == "from-a"
    second()
    assert os.environ["SKILLTEST_TOKEN"] == "from-a"
    first()
    assert "SKILLTEST_TOKEN" not in os.environ


def test_skill_key_from_metadata_selects_the_config_entry() -> None:
    restore = apply_skill_env_overrides(
        [{"name": "weather-pro", "skillKey": "weather", "primaryEnv": "SKILLTEST_API_KEY"}],
        _config(weather={"apiKey": "k"}),
    )
    assert os.environ["SKILLTEST_API_KEY"] == "k"
    restore()
