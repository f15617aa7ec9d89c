"""The `clawpi` command. Subcommands import what they need only when they run, so `--help` and
start-up stay quick."""

from __future__ import annotations

import asyncio
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="clawpi",
    help="An embeddable agent runtime: run a tool-using agent from the shell.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
sessions_app = typer.Typer(help="List and inspect session files.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")


class Mode(StrEnum):
    text = "text"
    json = "json"
    rpc = "rpc"


@app.command()
def run(
    prompt: Annotated[
        list[str] | None, typer.Argument(help="Prompt(s), sent one after another.")
    ] = None,
    provider: Annotated[
        str | None, typer.Option(help="Provider id (anthropic, openai, local, ...).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model: provider/id[:thinking] or an id.")
    ] = None,
    thinking: Annotated[
        str | None, typer.Option(help="off, minimal, low, medium, high, xhigh.")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="Send requests to this URL.")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option("--api-key", help="API key for this run only.")
    ] = None,
    session: Annotated[
        Path | None, typer.Option(help="Session file to use (created if missing).")
    ] = None,
    continue_: Annotated[
        bool, typer.Option("--continue", "-c", help="Continue the latest session.")
    ] = False,
    no_session: Annotated[
        bool, typer.Option("--no-session", help="Keep the session in memory.")
    ] = False,
    mode: Annotated[
        Mode, typer.Option(help="text, json (events as JSON lines) or rpc.")
    ] = Mode.text,
    tools: Annotated[str | None, typer.Option(help="Comma-separated tools to enable.")] = None,
    no_tools: Annotated[bool, typer.Option("--no-tools", help="Run without tools.")] = False,
    system_prompt: Annotated[
        str | None,
        typer.Option("--system-prompt", help="Replace the system prompt (text or a file)."),
    ] = None,
    append_system_prompt: Annotated[
        str | None, typer.Option("--append-system-prompt", help="Append to the system prompt.")
    ] = None,
    extension: Annotated[
        list[str] | None,
        typer.Option(
            "--extension", "-e", help="Load an extension (.py file, package dir or module)."
        ),
    ] = None,
    cwd: Annotated[Path | None, typer.Option(help="Working directory of the agent.")] = None,
    agent_dir: Annotated[
        Path | None,
        typer.Option(
            "--agent-dir",
            envvar="CLAWPI_AGENT_DIR",
            help="Agent directory (settings, auth, models).",
        ),
    ] = None,
    sandbox: Annotated[
        bool, typer.Option(help="Run exec inside bubblewrap, confined to the workspace.")
    ] = False,
) -> None:
    """Run the agent on PROMPT (text mode streams the answer)."""
    from clawpi.cli.setup import RunOptions

    options = RunOptions(
        prompts=list(prompt or []),
        provider=provider,
        model=model,
        thinking=thinking,
        base_url=base_url,
        api_key=api_key,
        session=session,
        continue_session=continue_,
        no_session=no_session,
        mode=mode.value,
        tools=tools,
        no_tools=no_tools,
        system_prompt=system_prompt,
        append_system_prompt=append_system_prompt,
        extensions=list(extension or []),
        cwd=cwd,
        agent_dir=agent_dir,
        sandbox=sandbox,
    )
    if options.mode != "rpc" and not options.prompts:
        if sys.stdin.isatty():
            _fail('Give a prompt: clawpi run "your question" (or pipe one on stdin)')
        piped = sys.stdin.read().strip()
        if not piped:
            _fail("No prompt given on the command line or on stdin")
        options.prompts = [piped]
    raise typer.Exit(asyncio.run(_run(options)))


async def _run(options: object) -> int:
    from clawpi.cli.modes import run_json_mode, run_text_mode
    from clawpi.cli.output import error
    from clawpi.cli.rpc import RpcServer
    from clawpi.cli.setup import RunOptions, build_session
    from clawpi.errors import ClawpiError

    assert isinstance(options, RunOptions)
    try:
        session = await build_session(options)
    except ClawpiError as exc:
        error(f"Error: {exc}")
        return 2
    try:
        if session.model_fallback_message:
            error(session.model_fallback_message)
        if options.mode == "json":
            return await run_json_mode(session, options.prompts)
        if options.mode == "rpc":
            return await RpcServer(session).serve()
        return await run_text_mode(session, options.prompts)
    except ClawpiError as exc:
        error(f"Error: {exc}")
        return 1
    finally:
        await session.dispose()


@app.command()
def models(
    provider: Annotated[str | None, typer.Argument(help="Only this provider.")] = None,
    available: Annotated[
        bool, typer.Option("--available", help="Only models with credentials.")
    ] = False,
    agent_dir: Annotated[
        Path | None, typer.Option("--agent-dir", envvar="CLAWPI_AGENT_DIR")
    ] = None,
) -> None:
    """List models (built-in and models.json) and whether they have credentials."""
    from clawpi.cli.listing import print_models

    raise typer.Exit(print_models(provider, available, agent_dir))


@sessions_app.command("list")
def sessions_list(
    cwd: Annotated[
        Path | None, typer.Option(help="Sessions of this directory (default: all).")
    ] = None,
    session_dir: Annotated[
        Path | None, typer.Option("--session-dir", help="Look in this directory.")
    ] = None,
) -> None:
    """List sessions, newest first."""
    from clawpi.cli.listing import print_sessions

    raise typer.Exit(print_sessions(cwd, session_dir))


@sessions_app.command("show")
def sessions_show(path: Annotated[Path, typer.Argument(help="Session file.")]) -> None:
    """Print the conversation of a session's current branch."""
    from clawpi.cli.listing import print_session

    raise typer.Exit(print_session(path))


@sessions_app.command("tree")
def sessions_tree(path: Annotated[Path, typer.Argument(help="Session file.")]) -> None:
    """Print a session's entry tree (branches, labels, compactions)."""
    from clawpi.cli.listing import print_tree

    raise typer.Exit(print_tree(path))


def _fail(message: str) -> None:
    sys.stderr.write(f"Error: {message}\n")
    raise typer.Exit(2)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
