"""Paths the caller passes are the caller's: a run enters its workspace (the process cwd), so a
relative session file, workspace, agent dir or config path must not be read from in there; and a
config file is parsed again only when it changed."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from clawpi.ai.stream import StreamOptions
from clawpi.ai.types import Context
from clawpi.errors import ConfigError
from clawpi.runner import run_embedded_agent
from clawpi.runner.config import load_config
from clawpi.runner.lanes import CommandQueue
from clawpi.session import SessionManager
from clawpi.testing import FunctionProvider
from clawpi.testing.faux import FauxResponse, faux_text


def _config(provider: FunctionProvider, timeout_seconds: int = 30) -> dict[str, Any]:
    return provider.openclaw_config(timeoutSeconds=timeout_seconds)


def _run(name: str, workspace: str | Path, config: Any, queue: CommandQueue) -> Any:
    return run_embedded_agent(
        session_id=name,
        session_key=f"agent:main:paths:{name}",
        session_file=f"sessions/{name}.jsonl",
        workspace_dir=workspace,
        config=config,
        prompt=f"hello from {name}",
        run_id=name,
        agent_dir="agent",
        run_queue=queue,
        disable_tools=True,
    )


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The application's working directory (each test's own)."""
    directory = tmp_path / "app"
    directory.mkdir()
    monkeypatch.chdir(directory)
    return directory


async def test_relative_paths_resolve_against_the_callers_cwd_not_the_workspace(app: Path) -> None:
    async def answer(_context: Context, _options: StreamOptions) -> FauxResponse:
        return FauxResponse(content=[faux_text("hi")])

    provider = FunctionProvider(answer, provider="faux", model_id="faux-1")
    (app / "openclaw.json").write_bytes(orjson.dumps(_config(provider)))
    result = await _run("a", "ws", "openclaw.json", CommandQueue())

    assert [p.text for p in result.payloads] == ["hi"]
    assert (app / "sessions" / "a.jsonl").is_file()
    assert not (app / "ws" / "sessions").exists()  # where it landed before: inside the workspace
    session = SessionManager.open(app / "sessions" / "a.jsonl")
    assert session.get_cwd() == os.path.realpath(app / "ws")
    assert (app / "agent" / "auth.json").is_file()  # the agent dir is the app's "agent"
    assert os.getcwd() == str(app)


async def test_a_relative_path_given_while_another_run_is_in_its_workspace_is_the_callers(
    app: Path, tmp_path: Path
) -> None:
    """Run A holds the process cwd in its workspace while run B starts with relative paths."""
    entered = asyncio.Event()
    release = asyncio.Event()
    cwd_seen: list[str] = []

    async def answer(context: Context, _options: StreamOptions) -> FauxResponse:
        if "from a" in orjson.dumps(context["messages"]).decode():
            cwd_seen.append(os.getcwd())
            entered.set()
            await release.wait()
        return FauxResponse(content=[faux_text("done")])

    provider = FunctionProvider(answer, provider="faux", model_id="faux-1")
    (app / "openclaw.json").write_bytes(orjson.dumps(_config(provider)))
    elsewhere = tmp_path / "elsewhere"
    queue = CommandQueue()
    first = asyncio.create_task(_run("a", elsewhere / "ws-a", "openclaw.json", queue))
    await entered.wait()
    assert cwd_seen == [os.path.realpath(elsewhere / "ws-a")]  # the premise: A moved the cwd

    second = await _run("b", "ws-b", "openclaw.json", queue)
    assert [p.text for p in second.payloads] == ["done"]
    assert (app / "sessions" / "b.jsonl").is_file()
    assert not (elsewhere / "ws-a" / "sessions").exists()
    assert (app / "ws-b").is_dir() and not (elsewhere / "ws-a" / "ws-b").exists()
    assert not (elsewhere / "ws-a" / "agent").exists()

    release.set()
    assert [p.text for p in (await first).payloads] == ["done"]
    assert (app / "sessions" / "a.jsonl").is_file()
    assert os.getcwd() == str(app)


async def test_a_workspace_under_home_is_expanded_as_openclaw_does(
    app: Path, tmp_path: Path
) -> None:
    async def answer(_context: Context, _options: StreamOptions) -> FauxResponse:
        return FauxResponse(content=[faux_text("hi")])

    provider = FunctionProvider(answer, provider="faux", model_id="faux-1")
    home = Path(os.environ["HOME"])  # the test's own (see conftest)
    result = await _run("h", "~/ws-home", _config(provider), CommandQueue())
    assert [p.text for p in result.payloads] == ["hi"]
    assert (home / "ws-home").is_dir()
    assert not (app / "~").exists()
    config_file = home / "cfg.json"
    config_file.write_bytes(orjson.dumps(_config(provider, timeout_seconds=7)))
    assert load_config("~/cfg.json")["agents"]["defaults"]["timeoutSeconds"] == 7


def _write(path: Path, timeout_seconds: int, mtime_ns: int) -> None:
    """The config, with a given mtime (the same size for every two-digit timeout)."""
    path.write_bytes(orjson.dumps({"agents": {"defaults": {"timeoutSeconds": timeout_seconds}}}))
    os.utime(path, ns=(mtime_ns, mtime_ns))


def _timeout(path: Path | str) -> Any:
    return load_config(path)["agents"]["defaults"]["timeoutSeconds"]


def test_a_config_file_is_parsed_again_only_when_its_stamp_changes(app: Path) -> None:
    path = app / "openclaw.json"
    settled = 1_700_000_000 * 10**9  # long ago: the stamp vouches for the content
    _write(path, 11, settled)
    assert _timeout("openclaw.json") == 11
    _write(path, 22, settled)  # same size, same inode, same mtime: the cached parse is used
    assert _timeout(path) == 11
    _write(path, 33, settled + 1)  # any change of mtime is seen
    assert _timeout(path) == 33
    path.write_bytes(orjson.dumps({"agents": {"defaults": {"timeoutSeconds": 4}}}))
    assert _timeout(path) == 4  # an ordinary edit (new mtime and size)
    config = load_config(path)
    config["extra"] = True  # the caller's copy is its own at the top level
    assert "extra" not in load_config(path)


def test_a_config_file_modified_just_now_is_not_trusted_to_its_stamp(app: Path) -> None:
    path = app / "openclaw.json"
    now = os.stat(app).st_mtime_ns  # this clock tick: a second edit may keep the same stamp
    _write(path, 11, now)
    assert _timeout(path) == 11
    _write(path, 22, now)
    assert _timeout(path) == 22


def test_config_file_errors_name_the_file(app: Path) -> None:
    with pytest.raises(ConfigError, match=str(app / "missing.json")):
        load_config("missing.json")
    (app / "list.json").write_text("[1]")
    with pytest.raises(ConfigError, match="must hold a JSON object"):
        load_config(app / "list.json")


@pytest.mark.parametrize(
    ("kind", "make", "reason"),
    [
        ("session", lambda root: root / "adir", "is a directory"),
        ("session", lambda root: root / "afile" / "s.jsonl", "a file is in the way"),
        ("workspace", lambda root: root / "afile", "a file is in the way"),
        ("workspace", lambda root: root / "afile" / "sub", "a file is in the way"),
    ],
)
async def test_an_unusable_session_file_or_workspace_is_a_config_error_naming_it(
    app: Path, kind: str, make: Any, reason: str
) -> None:
    async def answer(_context: Context, _options: StreamOptions) -> FauxResponse:
        return FauxResponse(content=[faux_text("hi")])

    provider = FunctionProvider(answer, provider="faux", model_id="faux-1")
    (app / "afile").write_text("not a directory")
    (app / "adir").mkdir()
    bad = make(app)
    args: dict[str, Any] = {
        "session_id": "bad",
        "session_key": "agent:main:paths:bad",
        "session_file": bad if kind == "session" else app / "ok.jsonl",
        "workspace_dir": bad if kind == "workspace" else app / "ws",
        "config": _config(provider),
        "prompt": "hi",
        "agent_dir": app / "agent",
        "run_queue": CommandQueue(),
        "disable_tools": True,
    }
    what = "Session file" if kind == "session" else "Workspace"
    with pytest.raises(
        ConfigError, match=f"^{what} {re.escape(str(bad))} cannot be used: {reason}"
    ):
        await run_embedded_agent(**args)
    assert os.getcwd() == str(app)
    assert (app / "afile").read_text() == "not a directory"  # nothing was written over it
    args.update(session_file=app / "ok.jsonl", workspace_dir=app / "ws")
    result = await run_embedded_agent(**args)  # the runner is fine for the next run
    assert [p.text for p in result.payloads] == ["hi"]


def test_model_registries_are_reused_per_agent_dir_and_not_kept_for_every_dir(
    tmp_path: Path,
) -> None:
    """A gateway with an agent dir per tenant: each dir's registry is reused while its files
    stay the same, and only the most recently used dirs' registries are kept."""
    from clawpi.runner import run as run_module

    dirs = [tmp_path / f"agent{i}" for i in range(run_module._REGISTRY_CACHE_SIZE + 6)]
    first = [run_module.agent_model_registry(d) for d in dirs]
    assert run_module.agent_model_registry(dirs[-1]) is first[-1]  # reused: files unchanged
    kept = {key for key in run_module._registries if key.startswith(str(tmp_path))}
    assert len(kept) == run_module._REGISTRY_CACHE_SIZE
    assert str(dirs[0]) not in kept and str(dirs[-1]) in kept
    assert run_module.agent_model_registry(dirs[0]) is not first[0]  # built again
