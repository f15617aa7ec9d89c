"""Extensions: Python modules that hook a session's events and add tools and commands.

An extension is a factory `extension(api)` (sync or async) found in a `.py` file, a package
directory, a `module:attr` spec, or an installed entry point of group `clawpi.extensions`. It
registers handlers with `api.on(event, handler)`; a handler gets `(event_dict, ctx)` and may
return a result the session acts on (pi's event table). A handler that raises is reported as an
extension error and the run goes on, except for `tool_call`, where raising blocks the tool.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from clawpi.agent.events import AGENT_EVENT_TYPES
from clawpi.agent.tool import AgentTool
from clawpi.errors import ConfigError

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "clawpi.extensions"
FACTORY_NAMES = ("extension", "setup")

Handler: TypeAlias = Callable[[dict[str, Any], "ExtensionContext"], Any]
CommandHandler: TypeAlias = Callable[[str, "ExtensionContext"], Awaitable[None] | None]

EVENTS = frozenset(
    {
        "resources_discover",
        "session_start",
        "session_before_switch",
        "session_switch",
        "session_before_fork",
        "session_fork",
        "session_before_compact",
        "session_compact",
        "session_before_tree",
        "session_tree",
        "session_shutdown",
        "input",
        "before_agent_start",
        *AGENT_EVENT_TYPES,
        "context",
        "before_provider_request",
        "model_select",
        "tool_call",
        "tool_result",
        "user_bash",
        "auto_compaction_start",
        "auto_compaction_end",
        "auto_retry_start",
        "auto_retry_end",
    }
)


class SessionActions(Protocol):
    """What an extension may ask of the session it is loaded into (AgentSession implements it)."""

    def ext_append_entry(self, custom_type: str, data: Any) -> str: ...
    async def ext_send_message(
        self, message: Mapping[str, Any], trigger_turn: bool, deliver_as: str | None
    ) -> None: ...
    async def ext_send_user_message(self, content: Any, deliver_as: str | None) -> None: ...
    def ext_set_session_name(self, name: str) -> None: ...
    def ext_get_session_name(self) -> str | None: ...
    def ext_set_label(self, entry_id: str, label: str | None) -> None: ...
    def ext_get_active_tools(self) -> list[str]: ...
    def ext_set_active_tools(self, names: Sequence[str]) -> None: ...
    def ext_get_thinking_level(self) -> str: ...
    def ext_set_thinking_level(self, level: str) -> None: ...
    def ext_context(self) -> ExtensionContext: ...


@dataclasses.dataclass
class ExtensionContext:
    """Handed to every handler: where the session runs and what it can do right now."""

    cwd: Path
    session_manager: Any
    model_registry: Any
    model: Any
    is_idle: Callable[[], bool]
    abort: Callable[[], None]
    has_pending_messages: Callable[[], bool]
    get_system_prompt: Callable[[], str]
    has_ui: bool = False


@dataclasses.dataclass
class RegisteredTool:
    tool: AgentTool
    prompt_snippet: str | None = None
    prompt_guidelines: tuple[str, ...] = ()
    extension: str = ""


@dataclasses.dataclass
class RegisteredCommand:
    name: str
    handler: CommandHandler
    description: str = ""
    extension: str = ""


@dataclasses.dataclass
class ExtensionError:
    extension: str
    event: str
    error: str

    def to_event(self) -> dict[str, Any]:
        return {
            "type": "extension_error",
            "extensionPath": self.extension,
            "event": self.event,
            "error": self.error,
        }


class ExtensionAPI:
    """The object a factory receives. Registration happens at load; actions need a session."""

    def __init__(self, runner: ExtensionRunner, name: str) -> None:
        self._runner = runner
        self.name = name
        self._flags: dict[str, Any] = {}

    # -- registration ----------------------------------------------------------------------

    def on(self, event: str, handler: Handler) -> None:
        if event not in EVENTS:
            raise ConfigError(
                f"extension {self.name}: unknown event {event!r}; known: {', '.join(sorted(EVENTS))}"
            )
        self._runner._handlers.setdefault(event, []).append((self.name, handler))

    def register_tool(
        self,
        tool: AgentTool,
        *,
        prompt_snippet: str | None = None,
        prompt_guidelines: Sequence[str] = (),
    ) -> None:
        """Add a tool (a built-in tool of the same name is replaced); it becomes active."""
        self._runner.tools[tool.name] = RegisteredTool(
            tool, prompt_snippet, tuple(prompt_guidelines), self.name
        )

    def register_command(self, name: str, handler: CommandHandler, description: str = "") -> None:
        self._runner.commands[name] = RegisteredCommand(name, handler, description, self.name)

    def register_flag(self, name: str, default: Any = None) -> None:
        self._flags.setdefault(name, self._runner.flag_values.get(name, default))

    def get_flag(self, name: str) -> Any:
        return self._flags.get(name, self._runner.flag_values.get(name))

    # -- actions (need a bound session) ----------------------------------------------------

    def _session(self) -> SessionActions:
        session = self._runner.session
        if session is None:
            raise RuntimeError(
                f"extension {self.name}: session actions are available once the session "
                "has started (call them from an event handler, not from the factory)"
            )
        return session

    def append_entry(self, custom_type: str, data: Any = None) -> str:
        return self._session().ext_append_entry(custom_type, data)

    async def send_message(
        self,
        message: Mapping[str, Any],
        *,
        trigger_turn: bool = False,
        deliver_as: str | None = None,
    ) -> None:
        await self._session().ext_send_message(message, trigger_turn, deliver_as)

    async def send_user_message(self, content: Any, *, deliver_as: str | None = None) -> None:
        await self._session().ext_send_user_message(content, deliver_as)

    def set_session_name(self, name: str) -> None:
        self._session().ext_set_session_name(name)

    def get_session_name(self) -> str | None:
        return self._session().ext_get_session_name()

    def set_label(self, entry_id: str, label: str | None) -> None:
        self._session().ext_set_label(entry_id, label)

    def get_active_tools(self) -> list[str]:
        return self._session().ext_get_active_tools()

    def set_active_tools(self, names: Sequence[str]) -> None:
        self._session().ext_set_active_tools(names)

    def get_thinking_level(self) -> str:
        return self._session().ext_get_thinking_level()

    def set_thinking_level(self, level: str) -> None:
        self._session().ext_set_thinking_level(level)


class ExtensionRunner:
    """Loaded extensions and the dispatch rules for each event."""

    def __init__(self, flag_values: Mapping[str, Any] | None = None) -> None:
        self._handlers: dict[str, list[tuple[str, Handler]]] = {}
        self.tools: dict[str, RegisteredTool] = {}
        self.commands: dict[str, RegisteredCommand] = {}
        self.flag_values = dict(flag_values or {})
        self.extensions: list[str] = []
        self.errors: list[ExtensionError] = []
        self.session: SessionActions | None = None
        self.on_error: Callable[[ExtensionError], None] | None = None

    def has_handlers(self, event: str) -> bool:
        return bool(self._handlers.get(event))

    # -- loading ---------------------------------------------------------------------------

    async def load(self, factory: Callable[[ExtensionAPI], Any], name: str) -> None:
        api = ExtensionAPI(self, name)
        result = factory(api)
        if inspect.isawaitable(result):
            await result
        self.extensions.append(name)

    async def load_spec(self, spec: str | Path | Callable[[ExtensionAPI], Any]) -> None:
        """A factory, a `.py` file, a package dir, or `module[:attr]`. Errors say what failed."""
        if callable(spec):
            await self.load(spec, getattr(spec, "__module__", repr(spec)))
            return
        factory, name = resolve_factory(str(spec))
        await self.load(factory, name)

    async def load_entry_points(self) -> None:
        for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                await self.load(point.load(), f"entry-point:{point.name}")
            except Exception as exc:
                self._report(f"entry-point:{point.name}", "load", exc)

    # -- dispatch --------------------------------------------------------------------------

    def _report(self, extension: str, event: str, exc: BaseException) -> None:
        error = ExtensionError(extension, event, f"{type(exc).__name__}: {exc}")
        self.errors.append(error)
        log.warning("extension %s failed in %s: %s", extension, event, error.error)
        if self.on_error is not None:
            self.on_error(error)

    async def _call(
        self, name: str, handler: Handler, event: dict[str, Any], ctx: ExtensionContext
    ) -> tuple[bool, Any]:
        """(True, result) or (False, None) after reporting the handler's exception."""
        try:
            result = handler(event, ctx)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            self._report(name, event["type"], exc)
            return False, None
        return True, result

    async def emit(self, event: dict[str, Any], ctx: ExtensionContext) -> list[Any]:
        """Run every handler for `event["type"]`; returns their non-None results in order."""
        results = []
        for name, handler in self._handlers.get(event["type"], ()):
            ok, result = await self._call(name, handler, event, ctx)
            if ok and result is not None:
                results.append(result)
        return results

    async def emit_input(
        self, text: str, images: list[Any], source: str, ctx: ExtensionContext
    ) -> tuple[str, list[Any], bool]:
        """Chained: `transform` rewrites text/images, `handled` stops. Returns (text, images, handled)."""
        for name, handler in self._handlers.get("input", ()):
            event = {"type": "input", "text": text, "images": images, "source": source}
            _, result = await self._call(name, handler, event, ctx)
            if not isinstance(result, Mapping):
                continue
            action = result.get("action")
            if action == "handled":
                return text, images, True
            if action == "transform":
                text = str(result.get("text", text))
                images = list(result.get("images", images) or [])
        return text, images, False

    async def emit_before_agent_start(
        self, prompt: str, images: list[Any], system_prompt: str, ctx: ExtensionContext
    ) -> tuple[list[dict[str, Any]], str | None]:
        """(custom messages to inject, system prompt for this turn or None)."""
        messages: list[dict[str, Any]] = []
        replaced: str | None = None
        current = system_prompt
        for name, handler in self._handlers.get("before_agent_start", ()):
            event = {
                "type": "before_agent_start",
                "prompt": prompt,
                "images": images,
                "systemPrompt": current,
            }
            _, result = await self._call(name, handler, event, ctx)
            if not isinstance(result, Mapping):
                continue
            if isinstance(result.get("message"), Mapping):
                messages.append(dict(result["message"]))
            if isinstance(result.get("systemPrompt"), str):
                current = replaced = result["systemPrompt"]
        return messages, replaced

    async def emit_context(self, messages: list[Any], ctx: ExtensionContext) -> list[Any]:
        """Chained over a deep copy: each handler may return `{"messages": [...]}`."""
        if not self.has_handlers("context"):
            return messages
        current = copy.deepcopy(messages)
        for name, handler in self._handlers.get("context", ()):
            _, result = await self._call(
                name, handler, {"type": "context", "messages": current}, ctx
            )
            if isinstance(result, Mapping) and isinstance(result.get("messages"), list):
                current = result["messages"]
        return current

    def emit_before_provider_request(
        self, payload: dict[str, Any], ctx: ExtensionContext
    ) -> dict[str, Any]:
        """Chained and synchronous (providers build the request synchronously); a handler that
        returns an awaitable is reported, since its result would arrive too late."""
        current = payload
        for name, handler in self._handlers.get("before_provider_request", ()):
            try:
                result = handler({"type": "before_provider_request", "payload": current}, ctx)
                if inspect.isawaitable(result):
                    if inspect.iscoroutine(result):
                        result.close()
                    raise TypeError("before_provider_request handlers must be synchronous")
            except Exception as exc:
                self._report(name, "before_provider_request", exc)
                continue
            if isinstance(result, dict):
                current = result
        return current

    async def emit_tool_call(
        self, tool_name: str, tool_call_id: str, args: Any, ctx: ExtensionContext
    ) -> str | None:
        """The block reason of the first blocking handler (a raising handler blocks), else None."""
        for name, handler in self._handlers.get("tool_call", ()):
            event = {
                "type": "tool_call",
                "toolName": tool_name,
                "toolCallId": tool_call_id,
                "input": args,
            }
            try:
                result = handler(event, ctx)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as exc:
                self._report(name, "tool_call", exc)
                return f"Extension {name} failed while checking this tool call: {exc}"
            if isinstance(result, Mapping) and result.get("block"):
                return str(result.get("reason") or "Tool execution was blocked by an extension")
        return None

    async def emit_tool_result(
        self,
        tool_name: str,
        tool_call_id: str,
        args: Any,
        content: list[Any],
        details: Any,
        is_error: bool,
        ctx: ExtensionContext,
    ) -> tuple[list[Any], Any]:
        """Field-wise chained overrides of content/details (error results are left as they are)."""
        if is_error:
            return content, details
        for name, handler in self._handlers.get("tool_result", ()):
            event = {
                "type": "tool_result",
                "toolName": tool_name,
                "toolCallId": tool_call_id,
                "input": args,
                "content": content,
                "details": details,
                "isError": is_error,
            }
            _, result = await self._call(name, handler, event, ctx)
            if isinstance(result, Mapping):
                if "content" in result and isinstance(result["content"], list):
                    content = result["content"]
                if "details" in result:
                    details = result["details"]
        return content, details

    async def emit_before_compact(
        self, event: dict[str, Any], ctx: ExtensionContext
    ) -> Mapping[str, Any] | None:
        """First `{cancel}` or `{compaction}` result wins."""
        for name, handler in self._handlers.get("session_before_compact", ()):
            _, result = await self._call(name, handler, event, ctx)
            if isinstance(result, Mapping) and (result.get("cancel") or result.get("compaction")):
                return result
        return None


def resolve_factory(spec: str) -> tuple[Callable[[ExtensionAPI], Any], str]:
    """Find the factory named by `spec`; ConfigError when it cannot be loaded."""
    path = Path(spec).expanduser()
    attr: str | None = None
    if path.exists():
        module = _import_path(path)
        name = str(path)
    else:
        module_name, _, attr = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigError(
                f"Cannot load extension {spec!r}: no such file, and importing module "
                f"{module_name!r} failed ({exc})"
            ) from exc
        name = spec
    names = (attr,) if attr else FACTORY_NAMES
    for candidate in names:
        factory = getattr(module, candidate, None)
        if callable(factory):
            return factory, name
    raise ConfigError(f"Extension {spec!r} has no factory: define `def extension(api): ...` in it")


def _import_path(path: Path) -> Any:
    file = path / "__init__.py" if path.is_dir() else path
    if not file.is_file():
        raise ConfigError(
            f"Cannot load extension {path}: expected a .py file or a package directory"
        )
    module_name = f"clawpi_extension_{abs(hash(str(file.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"Cannot load extension {path}: not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise ConfigError(
            f"Extension {path} failed to import: {type(exc).__name__}: {exc}"
        ) from exc
    return module


def discover_extension_paths(agent_dir: Path | None, cwd: Path) -> list[Path]:
    """`<agent_dir>/extensions/*.py` and `*/__init__.py`, then the same under the project dir."""
    from clawpi.sdk.paths import PROJECT_DIR_NAMES

    roots = [agent_dir / "extensions"] if agent_dir is not None else []
    roots += [cwd / name / "extensions" for name in PROJECT_DIR_NAMES]
    found: list[Path] = []
    for root in roots:
        if not root.is_dir():
            continue
        for entry in sorted(root.iterdir()):
            if entry.name.startswith((".", "_")):
                continue
            if (entry.is_file() and entry.suffix == ".py") or (
                entry.is_dir() and (entry / "__init__.py").is_file()
            ):
                found.append(entry)
    return found
