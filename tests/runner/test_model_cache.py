"""A run's model is resolved once per configuration: a config changed between messages (even
in place, as a hot reload does) is resolved anew."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawpi.ai.errors import FailoverError
from clawpi.ai.stream import StreamOptions
from clawpi.ai.types import Context
from clawpi.testing.faux import FauxResponse, faux_text
from tests.runner.test_concurrency import Harness


async def _answer(_context: Context, _options: StreamOptions) -> FauxResponse:
    return FauxResponse(content=[faux_text("ok")])


async def test_a_config_changed_in_place_between_messages_is_resolved_anew(
    tmp_path: Path,
) -> None:
    harness = Harness(tmp_path, _answer)
    assert [p.text for p in (await harness.run("chat", "one")).payloads] == ["ok"]

    harness.config["agents"]["defaults"]["contextTokens"] = 1_000  # below the hard minimum
    with pytest.raises(FailoverError, match="context window too small"):
        await harness.run("chat", "two")

    del harness.config["agents"]["defaults"]["contextTokens"]
    harness.config["models"]["providers"]["faux"]["models"][0]["contextWindow"] = 8_000
    with pytest.raises(FailoverError, match="context window too small"):
        await harness.run("chat", "three")

    harness.config["models"]["providers"]["faux"]["models"][0]["contextWindow"] = 64_000
    assert [p.text for p in (await harness.run("chat", "four")).payloads] == ["ok"]
