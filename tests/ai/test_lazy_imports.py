"""Importing clawpi must not import the vendor SDKs: they load when a model of their API is used."""

from __future__ import annotations

import subprocess
import sys

SDKS = ("openai", "anthropic", "google.genai", "httpx2")


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {SDKS!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return {name for name in out.stdout.strip().split(",") if name}


def test_import_clawpi_and_ai_loads_no_provider_sdk() -> None:
    assert _loaded_after("import clawpi, clawpi.ai, clawpi.testing") == set()


def test_first_use_of_an_api_loads_only_its_sdk() -> None:
    code = (
        "from clawpi.ai import Model\n"
        "from clawpi.ai.stream import get_api_provider\n"
        "get_api_provider('anthropic-messages')\n"
    )
    loaded = _loaded_after(code)
    assert "anthropic" in loaded
    assert "openai" not in loaded
    assert "google.genai" not in loaded
