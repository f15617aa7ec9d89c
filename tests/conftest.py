"""Tests never read the machine's own state: HOME and clawpi's state dir point at temp dirs,
and temporary files (e.g. the exec tool's full-output logs) go to a per-test dir, not /tmp."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.http_server import FakeServer

_KEY_VARS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_OAUTH_TOKEN",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GROQ_API_KEY",
    "OPENROUTER_API_KEY",
    "XAI_API_KEY",
    "MISTRAL_API_KEY",
    "CEREBRAS_API_KEY",
)


@pytest.fixture(autouse=True)
def _isolated_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAWPI_STATE_DIR", str(home / ".clawpi"))
    scratch = tmp_path_factory.mktemp("tmp")
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.delenv("CLAWPI_AGENT_DIR", raising=False)
    for name in _KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "ANTHROPIC_", "GOOGLE_GENAI")):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path
